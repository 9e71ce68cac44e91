// The layer rules of src/ (DESIGN.md, "Dependency rules"; docs/layers.md explains them) and the
// known violations still allowed. `npm run lint` checks them with scripts/check-layers.ts.
//
// Selectors are paths under src/: a folder (`gateway`) takes everything in it, a file
// (`defaults.ts`) only itself, `*` every file. Packages are named as imported (`node:` for builtins).
import type { Allowance, Rule } from './check.js';

/** The foundation every layer may use: pure types and rules, the defaults, the error classes. */
const FOUNDATION = ['domain', 'defaults.ts', 'defaults', 'errors.ts', 'errors'];

/** An engine's admin endpoints (vLLM's sleep mode and LoRA loading): providers call them, the simulator serves them. */
const ENGINE_ADMIN = /^\/(sleep|wake_up|is_sleeping|v1\/(un)?load_lora_adapter)\b/;

export const RULES: readonly Rule[] = [
  {
    id: 'domain-is-pure',
    files: ['domain'],
    mayImportOnly: ['domain'],
    why: 'domain imports nothing of ours: its types and rules are what every other layer builds on',
  },
  {
    id: 'defaults-are-values',
    files: ['defaults.ts', 'defaults'],
    mayImportOnly: ['defaults.ts', 'defaults'],
    why: 'the defaults are plain values with their reasons: every layer reads them, so they import nothing else of ours',
  },
  {
    id: 'config-is-foundation',
    files: ['config'],
    mayImportOnly: ['config', ...FOUNDATION],
    why: 'config (parse, defaults, normalize, freeze) imports no feature module: every module reads it',
  },
  {
    id: 'http-is-foundation',
    files: ['http'],
    mayImportOnly: ['http', ...FOUNDATION],
    why: 'http holds the HTTP helpers shared by the gateway, the simulator and the admin API; it imports no feature module',
  },
  {
    id: 'sim-stands-alone',
    files: ['sim'],
    mayImportOnly: ['sim', 'config', 'http', 'telemetry/prom.ts', ...FOUNDATION],
    why: 'the simulator is a separate engine (its own process): it imports no feature module, only the foundation and the Prometheus helpers',
  },
  {
    id: 'engine-stands-alone',
    files: ['engine'],
    mayImportOnly: ['engine', 'sim', 'config', 'http', 'telemetry/prom.ts', ...FOUNDATION],
    why: 'the llama.cpp engine is a separate engine (its own process) like the simulator, whose request parsing, errors and metrics it shares',
  },
  {
    id: 'data-plane-stands-alone',
    files: ['gateway'],
    mayNotImport: ['rollout', 'analysis', 'control', 'api', 'store', 'cli'],
    why: 'the data plane never waits on the control plane or the store: it keeps serving its last route snapshot when they are down',
  },
  {
    id: 'controllers-see-ports',
    files: ['rollout', 'health', 'fleet', 'scheduler'],
    mayNotImport: ['control', 'api'],
    why: 'controllers in rollout/, health/, fleet/ and scheduler/ see the ports, not the composition root (control/) nor the admin API that calls them',
  },
  {
    id: 'database-in-store',
    files: ['*'],
    except: ['store'],
    mayNotImport: ['better-sqlite3', 'node:sqlite'],
    why: 'only store/ touches the database, so another store (etcd) replaces it in one place',
  },
  {
    id: 'processes-in-providers',
    files: ['*'],
    except: ['providers'],
    mayNotImport: ['node:child_process', 'node:cluster'],
    why: 'only providers start processes',
  },
  {
    id: 'engine-admin-in-providers',
    files: ['*'],
    except: ['providers', 'sim', 'engine'],
    mayNotMention: [ENGINE_ADMIN],
    why: "only providers talk to an engine's admin endpoints (the simulator and the llama.cpp engine serve them)",
  },
];

/**
 * Violations that exist today in folders being redesigned (issue 13: the controllers' ports). Each
 * entry is one edge `from → to`; the check fails when an entry no longer happens, so this list only
 * shrinks. Never add to it: fix the import, or change a rule above (and DESIGN.md) for a reason.
 */
export const ALLOWED: readonly Allowance[] = [
  // The pipeline runner's `run:` steps spawn operator commands. Not a worker, but a process all the
  // same: behind a port of its own, or named as an exception in the rule.
  { rule: 'processes-in-providers', from: 'rollout/pipeline/exec.ts', to: 'node:child_process' },
];
