// What the rolling controller keeps of a running update in memory beside its persisted state, and
// how it reads the fleet for it: each role's old, ready and starting workers, the new workers that
// failed, and the old workers that leave next.
import type { RoleNow } from './rolling-plan.js';
import type { WorkerInfo, WorkersPort } from './ports.js';
import { budgetsNow, oldServes, pools, roleOfWorker, standing } from './rolling-state.js';
import type { RollingState } from './rolling-state.js';

/** A start in flight: not a worker yet (the provider is starting and warming it). */
export interface Launch {
  role: string;
  since: number;
  /** Past the step timeout: the worker is stopped as soon as it exists. */
  abandoned: boolean;
  /**
   * Refused for want of a GPU while GPUs were being let go (`Live.released` then): it waits, counted
   * as starting, and is made again (the same step, its clock kept) once one more has been let go.
   */
  gpuWait?: number;
}

export interface Live {
  state: RollingState;
  revision: number;
  saving: Promise<unknown>;
  /** The state as the store has it (rollout-writes.ts restoreSaved). */
  saved: RollingState;
  busy: boolean;
  launches: Set<Launch>;
  /** Old workers being drained and stopped (no longer counted as serving). */
  stopping: Set<string>;
  /**
   * GPUs let go so far: stops of workers ended, and abandoned starts ended (their worker stopped, or
   * never made). A start refused for want of a GPU while one was being let go waits for it.
   */
  released: number;
  /** Failures seen outside the model's lock (a start that threw), handled at the next tick. */
  failed: { worker: string | undefined; reason: string }[];
  /** New workers already counted as failed (and being stopped). */
  given: Set<string>;
  /** New workers ready at the last look: one more is progress (the deadline counts from it). */
  ready: number;
}

export function newLive(state: RollingState, revision: number): Live {
  return {
    state,
    revision,
    saved: structuredClone(state),
    saving: Promise.resolve(),
    busy: false,
    launches: new Set(),
    stopping: new Set(),
    released: 0,
    failed: [],
    given: new Set(),
    ready: 0,
  };
}

/** Per role: the old pool's serving workers, the new pool's ready and starting ones (starts in flight included). */
export function fleetCounts(workers: WorkersPort, l: Live): Record<string, RoleNow> {
  const s = l.state;
  // serving workers only: a hot spare of the version going back to is not one of its replicas
  const fresh = workers.list(s.model, pools(s).new).filter((w) => w.role === 'serving' && !l.given.has(w.id) && !l.stopping.has(w.id) && !wasThere(s, w));
  const out: Record<string, RoleNow> = {};
  for (const role of Object.keys(budgetsNow(s))) {
    const mine = fresh.filter((w) => roleOfWorker(w) === role);
    out[role] = {
      old: oldWorkers(workers, l, role).length,
      ready: mine.filter((w) => standing(w) === 'ready').length,
      starting: mine.filter((w) => standing(w) === 'starting').length + [...l.launches].filter((x) => !x.abandoned && x.role === role).length,
    };
  }
  return out;
}

/** The old pool's serving workers (of one role), not being stopped. */
export function oldWorkers(workers: WorkersPort, l: Live, role?: string): WorkerInfo[] {
  const s = l.state;
  return workers
    .list(s.model, pools(s).old)
    .filter((w) => oldServes(w) && !l.stopping.has(w.id) && (role === undefined || roleOfWorker(w) === role) && (s.inPlace === undefined || wasThere(s, w)));
}

/** A restart in place: whether the worker is one of those the update started with (the old pool of one version). */
function wasThere(s: RollingState, w: WorkerInfo): boolean {
  return s.inPlace?.oldWorkers.includes(w.id) ?? false;
}

/** The old workers a step stops, per role: those serving nothing first (`rank`), then the newest. */
export function leavingWorkers(workers: WorkersPort, l: Live, stop: Readonly<Record<string, number>>): WorkerInfo[] {
  const out: WorkerInfo[] = [];
  for (const [role, n] of Object.entries(stop)) {
    const olds = oldWorkers(workers, l, role).sort(
      (a, b) => rank(a) - rank(b) || b.startedAt - a.startedAt || b.id.localeCompare(a.id, 'en', { numeric: true }),
    );
    out.push(...olds.slice(0, n));
  }
  return out;
}

/**
 * New workers that failed since the last look — given up by health, or still not ready past the step
 * timeout — and starts in flight past it: recorded in `l.failed`; returns the workers to stop.
 */
export function findFailures(workers: WorkersPort, l: Live, now: number): WorkerInfo[] {
  const s = l.state;
  const pool = pools(s);
  const limit = `${Math.round(s.stepTimeoutMs / 1000)} s`;
  const stop: WorkerInfo[] = [];
  for (const w of workers.list(s.model, pool.new)) {
    if (l.given.has(w.id) || wasThere(s, w) || w.role !== 'serving') continue;
    const st = standing(w);
    const late = st === 'starting' && now - w.startedAt > s.stepTimeoutMs;
    if (st !== 'failed' && !late) continue;
    l.given.add(w.id);
    const why = late ? `new worker ${w.id} was not ready within the step timeout (${limit})` : `new worker ${w.id} turned ${w.health?.state ?? 'unhealthy'}`;
    l.failed.push({ worker: w.id, reason: why });
    stop.push(w);
  }
  for (const x of l.launches) {
    if (x.abandoned || now - x.since <= s.stepTimeoutMs) continue;
    x.abandoned = true;
    l.failed.push({ worker: undefined, reason: `a new ${x.role} worker of ${pool.new} did not start within the step timeout (${limit})` });
  }
  return stop;
}

/** Each role's desired workers the way the update goes now. */
export function desiredOf(s: RollingState): Record<string, number> {
  return Object.fromEntries(Object.entries(budgetsNow(s)).map(([r, b]) => [r, b.desired]));
}

/**
 * Old workers that serve nothing leave first: those health gave up or that still wait for their
 * admission (going back, the new pool's unadmitted workers are the old pool: counted against the
 * budget, stopping them first keeps the capacity that serves within it), then those it doubts.
 */
export function rank(w: WorkerInfo): number {
  const st = w.health?.state;
  return st === 'unhealthy' || st === 'pending' ? 0 : st === 'suspicious' ? 1 : 2;
}

/** What a step does, for its event and the update's message. */
export function describeStep(
  step: number,
  start: Record<string, number>,
  leaving: readonly WorkerInfo[],
  counts: Record<string, RoleNow>,
  share: number,
): string {
  const starts = Object.entries(start)
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `start ${n} ${r}`);
  const stops = leaving.length > 0 ? [`stop ${leaving.map((w) => w.id).join(', ')}`] : [];
  const now = Object.entries(counts)
    .map(([r, c]) => `${r} ${c.old} old / ${c.ready} ready / ${c.starting} starting`)
    .join('; ');
  return `step ${step}: ${[...starts, ...stops].join(', ')} (${now}); new pool's share ${(share * 100).toFixed(1)} %`;
}
