// The list of CLI verbs; each lives in its own folder and exports `register(program)`.
// Loaded on demand: running one verb imports only that verb's modules (a CLI call against the admin
// API must not pay for loading the gateway, the store and the simulator); help loads them all.
import type { Command } from 'commander';

type VerbModule = { register(program: Command): void };

/** Verb name → its module, in help order. */
const VERBS: Record<string, () => Promise<VerbModule>> = {
  config: () => import('./config/index.js'),
  sim: () => import('./sim/index.js'),
  engine: () => import('./engine/index.js'),
  up: () => import('./up/index.js'),
  status: () => import('./status/index.js'),
  version: () => import('./version/index.js'),
  deploy: () => import('./deploy/index.js'),
  swap: () => import('./swap/index.js'),
  rollout: () => import('./rollout/index.js'),
  rollback: () => import('./rollback/index.js'),
  workers: () => import('./workers/index.js'),
  capacity: () => import('./capacity/index.js'),
  scheduler: () => import('./scheduler/index.js'),
  adapter: () => import('./adapter/index.js'),
  probes: () => import('./probes/index.js'),
  audit: () => import('./audit/index.js'),
  cache: () => import('./cache/index.js'),
  plan: () => import('./plan/index.js'),
  pipeline: () => import('./pipeline/index.js'),
  canary: () => import('./canary/index.js'),
  experiment: () => import('./experiment/index.js'),
  'migrate-store': () => import('./migrate-store/index.js'),
};

/** Register `verb` alone when it is a known verb, else every verb (help, unknown command). */
export async function registerVerbs(program: Command, verb?: string): Promise<void> {
  const load = verb !== undefined && Object.hasOwn(VERBS, verb) ? [VERBS[verb] as () => Promise<VerbModule>] : Object.values(VERBS);
  for (const m of await Promise.all(load.map((f) => f()))) m.register(program);
}
