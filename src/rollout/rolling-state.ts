// The rolling update's persisted state and its pure reading of the live fleet: which workers are the
// old pool's, which of the new pool are ready, starting or failed, the planner's counts, the trace of
// every step, and the estimate of what is left (docs/rolling.md).
import type { WorkerHealth } from '../health/machine.js';
import type { Budget, RoleBudget, RoleNow } from './rolling-plan.js';
import { dryRun } from './rolling-plan.js';

/**
 * progressing: moving from `from` to `to`; rolling_back: moving back to `from` (an abort, or a
 * failure with `on_failure: rollback`); paused: by an operator, at the partition, or on a failure
 * with `on_failure: pause`. The rest are over.
 */
export type RollingPhase = 'progressing' | 'rolling_back' | 'paused' | 'succeeded' | 'aborted' | 'rolled_back' | 'failed';
export const ROLLING_TERMINAL: readonly RollingPhase[] = ['succeeded', 'aborted', 'rolled_back', 'failed'];

export type OnFailure = 'pause' | 'rollback';

/** The role of a worker in an aggregated (not disaggregated) version: every worker does prefill and decode. */
export const AGGREGATED = 'aggregated';

/** One step as it was taken: the counts after it, the new pool's share of traffic, what moved. */
export interface RollingTraceEntry {
  at: number;
  step: number;
  /** Per role: old serving, new ready, new starting — after the step's stops and starts were decided. */
  roles: Record<string, RoleNow>;
  share: number;
  started: Record<string, number>;
  stopped: string[];
  /** Which way the update moved: forward (to the new version) or back (to the old one). */
  direction: 'forward' | 'back';
}

export interface RollingFailure {
  at: number;
  worker?: string | undefined;
  reason: string;
}

export interface RollingState {
  kind: 'rolling';
  id: string;
  model: string;
  /** The version serving when the update started (active throughout, until the new one is promoted). */
  from: string;
  /** The version rolled to (the same as `from` for a restart in place). */
  to: string;
  /**
   * A restart in place (`rollout restart`): the active version's workers replaced by fresh ones of
   * the same version and card, one pool throughout; these are the workers it started with.
   */
  inPlace?: { oldWorkers: string[] } | undefined;
  maxSurge: Budget;
  maxUnavailable: Budget;
  /** The budgets resolved per role against `to`'s replicas (its prefill and decode workers, or its replicas as one role). */
  budgets: Record<string, RoleBudget>;
  /** The same budgets resolved against `from`'s: what going back (an abort) restores. */
  backBudgets: Record<string, RoleBudget>;
  /** Stop with this many old workers left (0: none kept); lowered by a resume. */
  partition: number;
  stepTimeoutMs: number;
  progressDeadlineMs: number;
  onFailure: OnFailure;
  phase: RollingPhase;
  /** While paused: the phase a resume returns to. */
  resumeTo?: 'progressing' | 'rolling_back' | undefined;
  pausedReason?: string | undefined;
  /** Set when the update went back: why (an operator's abort, a failure), and the phase it ends in. */
  rollbackReason?: string | undefined;
  rollbackTo?: 'aborted' | 'rolled_back' | undefined;
  /** Steps taken (each persisted before it acted). */
  step: number;
  /** Every step (the last ones): each entry persisted before its step acts, so a restart knows what was asked. */
  trace: RollingTraceEntry[];
  failures: RollingFailure[];
  /** Set when the progress deadline passed without progress (Kubernetes' ProgressDeadlineExceeded). */
  deadlineExceededAt?: number | undefined;
  createdAt: number;
  startedAt: number;
  updatedAt: number;
  lastProgressAt: number;
  finishedAt?: number | undefined;
  actor: string;
  message?: string | undefined;
}

/** The trace entries and failures kept per update (a long update's first steps make way for its last). */
export const MAX_TRACE = 500;
export const MAX_FAILURES = 50;

export function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

/** A version's roles and how many workers of each it runs: prefill and decode, or its replicas as one role. */
export function rolesOf(v: { replicas: number; roles?: { prefill: number; decode: number } | undefined }): Record<string, number> {
  return v.roles ? { prefill: v.roles.prefill, decode: v.roles.decode } : { [AGGREGATED]: v.replicas };
}

/** The role a worker counts in. */
export function roleOfWorker(w: { kvRole?: string | undefined }): string {
  return w.kvRole ?? AGGREGATED;
}

/** The budgets of the way the update goes now. */
export function budgetsNow(s: Pick<RollingState, 'budgets' | 'backBudgets' | 'from' | 'to' | 'phase' | 'resumeTo'>): Record<string, RoleBudget> {
  return pools(s).direction === 'back' ? s.backBudgets : s.budgets;
}

/** Which pool is going and which is coming, by the update's direction. */
export function pools(s: Pick<RollingState, 'from' | 'to' | 'phase' | 'resumeTo'>): { old: string; new: string; direction: 'forward' | 'back' } {
  const back = s.phase === 'rolling_back' || (s.phase === 'paused' && s.resumeTo === 'rolling_back');
  return back ? { old: s.to, new: s.from, direction: 'back' } : { old: s.from, new: s.to, direction: 'forward' };
}

/** A worker as the rolling update reads it. */
export interface FleetWorker {
  id: string;
  role: 'serving' | 'spare';
  startedAt: number;
  health: Pick<WorkerHealth, 'state'> | undefined;
}

export type WorkerStanding = 'ready' | 'starting' | 'failed';

/**
 * A new worker's standing: ready once it takes traffic (warmed, and admitted by its probes where
 * health checks run; a worker never judged was warmed and takes traffic), starting while its
 * admission probes run, failed when health gave it up or took it out.
 */
export function standing(w: FleetWorker): WorkerStanding {
  const st = w.health?.state;
  if (st === undefined || st === 'healthy' || st === 'suspicious') return 'ready';
  if (st === 'pending') return 'starting';
  return 'failed';
}

/** An old worker still serves (counted against the unavailable budget) unless health gave it up. */
export function oldServes(w: FleetWorker): boolean {
  const st = w.health?.state;
  return w.role === 'serving' && st !== 'draining' && st !== 'dead';
}

/** Milliseconds the rest of the update is expected to take: the steps a dry run from here needs × the mean step so far. */
export function etaMs(s: RollingState, now: Record<string, RoleNow>, at: number): number | null {
  if (s.step === 0) return null;
  const mean = (at - s.startedAt) / s.step;
  const desired = Object.fromEntries(Object.entries(s.budgets).map(([r, b]) => [r, b.desired]));
  // the dry run starts from a fresh pool of `desired` old workers: count how far along this one is
  const total = dryRun(s.budgets, s.partition).steps.length;
  const doneShare = Object.entries(desired).reduce((n, [r, d]) => n + Math.min(1, (now[r]?.ready ?? 0) / d), 0) / Object.keys(desired).length;
  const left = Math.max(0, Math.ceil(total * (1 - doneShare)));
  return left * mean;
}

export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
