// The canary's rollback sequence, the steps that touch traffic and workers (seed 001): every request
// back to stable in one route switch, then the canary's in-flight requests drained (bounded) and its
// workers unloaded when the rollout had loaded it. The controller persists between the two, so a
// restart finishes the second (src/rollout/canary-controller.ts). The same steps take back a canary
// whose start failed.
import { DEFAULTS } from '../defaults.js';
import { routeToSpec } from '../domain/route.js';
import type { CanaryState } from './canary-state.js';
import type { ControllerPorts } from './ports.js';
import { reweighted } from './samples.js';

/** All traffic to stable at once; a canary the rollout loaded leaves the route (and its overrides) entirely. */
export async function routeToStable(p: ControllerPorts, s: CanaryState): Promise<void> {
  const cur = routeToSpec(p.routes.current(s.model));
  const weights = reweighted(cur.weights, { [s.stable]: 1, [s.canary]: 0 });
  if (s.loadedByRollout) delete weights[s.canary];
  await p.routes.publish({
    model: s.model,
    weights,
    stable: s.stable,
    overrides: Object.fromEntries(Object.entries(cur.overrides ?? {}).filter(([, v]) => v !== s.canary)),
    stickySalt: cur.stickySalt,
    shadow: undefined,
  });
}

/** Drain the canary's in-flight requests (bounded) and unload it, when the rollout loaded it; the ms each step took. */
export async function drainAndUnload(
  p: ControllerPorts,
  s: CanaryState,
  reason: string,
): Promise<{ drained: number; aborted: number; drainMs: number; unloadMs: number }> {
  const t0 = performance.now();
  if (!s.loadedByRollout) return { drained: 0, aborted: 0, drainMs: 0, unloadMs: 0 };
  const d = await p.routes.drain(s.model, s.canary, DEFAULTS.rollout.rollbackDrainTimeoutMs);
  const t1 = performance.now();
  await unloadCanary(p, s, reason);
  return { drained: d.drained, aborted: d.aborted, drainMs: t1 - t0, unloadMs: performance.now() - t1 };
}

/** The canary's workers stopped and its GPUs freed; a loaded version retired (one that failed to load stays failed). */
export async function unloadCanary(p: ControllerPorts, s: CanaryState, reason: string): Promise<void> {
  await p.workers.unload(s.model, s.canary);
  const v = await p.versions.get(s.model, s.canary);
  if (v.status === 'ready' || v.status === 'standby') await p.versions.transition(s.model, s.canary, 'retired', { gpus: [] }, { actor: 'canary', reason });
}

/**
 * A canary that never got going (its start failed, or a restart cut it short before its first
 * stage): any traffic it was given back to stable, and a candidate its own load brought up (`unload`:
 * that load began, or ended) drained and unloaded, not left running on its GPUs. Never a version
 * someone else loaded: a deploy that won the candidate's load keeps it.
 */
export async function takeBackFailedStart(p: ControllerPorts, s: CanaryState, reason: string, unload: boolean): Promise<void> {
  // its first stage's weights were published before it failed (a loaded version keeps its place at 0)
  const w = routeToSpec(p.routes.current(s.model)).weights;
  const routed = s.loadedByRollout ? s.canary in w : (w[s.canary] ?? 0) > 0;
  if (routed) await routeToStable(p, s);
  if (!unload || !s.loadedByRollout) return;
  if (routed) await drainAndUnload(p, s, reason);
  else await unloadCanary(p, s, reason);
}
