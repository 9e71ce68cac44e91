// What a rolling update starts from: its settings (flags over the model's `rolling:` config over the
// defaults, each checked with a message naming it), the versions it may go between, and its first
// persisted state with the budgets resolved per role both ways (docs/rolling.md).
import { randomUUID } from 'node:crypto';
import type { ModelConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { Version } from '../domain/version.js';
import { BadRequestError, ConflictError } from '../errors.js';
import type { Actor } from './ports.js';
import { assertFeasible, budgetText, parseBudget, roleBudgets } from './rolling-plan.js';
import type { StoredRollout } from './rollout-record.js';
import type { Budget, RoleBudget } from './rolling-plan.js';
import { messageOf, rolesOf } from './rolling-state.js';
import type { OnFailure, RollingState } from './rolling-state.js';

export interface RollingStartOptions {
  to: string;
  maxSurge?: unknown;
  maxUnavailable?: unknown;
  partition?: number | undefined;
  stepTimeoutMs?: number | undefined;
  progressDeadlineMs?: number | undefined;
  onFailure?: OnFailure | undefined;
}

export interface RollingSettings {
  surge: Budget;
  unavailable: Budget;
  partition: number;
  stepTimeoutMs: number;
  progressDeadlineMs: number;
  onFailure: OnFailure;
}

/** The settings of an update: the flags given, else the model's `rolling:` config, else the defaults. */
export function rollingSettings(m: ModelConfig, o: Omit<RollingStartOptions, 'to'>): RollingSettings {
  const d = DEFAULTS.rolling;
  return {
    surge: parseBudget(o.maxSurge ?? m.rolling?.maxSurge ?? d.maxSurge, 'max surge'),
    unavailable: parseBudget(o.maxUnavailable ?? m.rolling?.maxUnavailable ?? d.maxUnavailable, 'max unavailable'),
    partition: checkPartition(o.partition ?? 0),
    stepTimeoutMs: checkMs('step timeout', o.stepTimeoutMs ?? m.rolling?.stepTimeoutMs ?? d.stepTimeoutMs),
    progressDeadlineMs: checkMs('progress deadline', o.progressDeadlineMs ?? m.rolling?.progressDeadlineMs ?? d.progressDeadlineMs),
    onFailure: o.onFailure ?? m.rolling?.onFailure ?? d.onFailure,
  };
}

/** A partition: a count of old workers to keep (0: none). */
export function checkPartition(n: number): number {
  if (!Number.isInteger(n) || n < 0) throw new BadRequestError('invalid_rollout', `partition: expected a count of old workers ≥ 0, got ${n}`);
  return n;
}

/**
 * The update's first state, from the active version to `to`: refused when `to` cannot be rolled to,
 * when the two run different roles, or when the budgets could not finish (or go back) with the
 * ratio kept.
 */
export function initialState(from: Version, to: Version, st: RollingSettings, actor: Actor, now: number, oldWorkers?: string[]): RollingState {
  if (oldWorkers === undefined) refuseTarget(from, to);
  else refuseStatic(from);
  const [a, b] = [Object.keys(rolesOf(from)).sort().join(' and '), Object.keys(rolesOf(to)).sort().join(' and ')];
  if (a !== b) {
    throw new BadRequestError(
      'invalid_rollout',
      `${from.id} runs ${a} workers and ${to.id} runs ${b} workers: a rolling update replaces workers role by role; use blue-green (deploy green, swap) or stop-start to change how a model is served`,
    );
  }
  const budgets = roleBudgets(rolesOf(to), st.surge, st.unavailable);
  checkPartitionFits(st.partition, budgets);
  assertFeasible(budgets, st.partition);
  return {
    kind: 'rolling',
    id: `rolling-${randomUUID().slice(0, 8)}`,
    model: to.model,
    from: from.id,
    to: to.id,
    inPlace: oldWorkers === undefined ? undefined : { oldWorkers },
    maxSurge: st.surge,
    maxUnavailable: st.unavailable,
    budgets,
    backBudgets: backBudgetsFor(from, st.surge, st.unavailable),
    partition: st.partition,
    stepTimeoutMs: st.stepTimeoutMs,
    progressDeadlineMs: st.progressDeadlineMs,
    onFailure: st.onFailure,
    phase: 'progressing',
    step: 0,
    trace: [],
    failures: [],
    createdAt: now,
    startedAt: now,
    updatedAt: now,
    lastProgressAt: now,
    actor: actor.name,
  };
}

/** An undo: a rolling update back to the version the model's last (succeeded) update replaced, with its settings unless `o` says otherwise. */
export function undoOptions(model: string, last: StoredRollout<RollingState> | undefined, o: Omit<RollingStartOptions, 'to'>): RollingStartOptions {
  if (!last || last.state.phase !== 'succeeded' || last.state.inPlace) {
    const why = last ? ` (the last one, ${last.state.id}, ${last.state.inPlace ? 'was a restart in place' : `is ${last.state.phase}`})` : '';
    throw new ConflictError('nothing_to_undo', `model ${model} has no finished rolling update to undo${why}`);
  }
  const s = last.state;
  const { stepTimeoutMs, progressDeadlineMs, onFailure } = s;
  return { maxSurge: budgetText(s.maxSurge), maxUnavailable: budgetText(s.maxUnavailable), stepTimeoutMs, progressDeadlineMs, onFailure, ...o, to: s.from };
}

/** The `started` event's message: each role's desired workers and budgets. */
export function startedMessage(s: RollingState): string {
  const each = Object.entries(s.budgets)
    .map(([r, b]) => `${r} ${b.desired} (max surge ${b.surge}, max unavailable ${b.unavailable})`)
    .join(', ');
  return `${s.from} → ${s.to}: ${each}${s.partition > 0 ? `, partition ${s.partition}` : ''}; on failure: ${s.onFailure}`;
}

/** The budgets an abort goes back with: the same surge and unavailability, against the old version's roles. */
function backBudgetsFor(from: Version, surge: Budget, unavailable: Budget): Record<string, RoleBudget> {
  try {
    return roleBudgets(rolesOf(from), surge, unavailable);
  } catch (err) {
    throw new BadRequestError('invalid_rollout', `going back to ${from.id} (an abort, or a failure) could not keep these budgets: ${messageOf(err)}`);
  }
}

function checkMs(what: string, ms: number): number {
  if (!Number.isInteger(ms) || ms <= 0 || ms > DEFAULTS.rolling.maxLimitMs)
    throw new BadRequestError('invalid_rollout', `${what}: expected milliseconds from 1 to a week, got ${ms}`);
  return ms;
}

/** Versions a rolling update cannot go to, each with what to do instead. */
function refuseTarget(from: Version, to: Version): void {
  const id = `${to.model}/${to.id}`;
  if (to.id === from.id)
    throw new ConflictError('already_active', `version ${id} is already the active version (to replace its workers by fresh ones: glidepath rollout restart)`);
  if (to.status === 'loading') throw new ConflictError('already_loading', `version ${id} is loading`);
  if (to.status === 'ready' || to.status === 'standby') {
    throw new ConflictError('already_loaded', `version ${id} is loaded already (${to.status}): swap it in (glidepath swap --to ${to.id}), nothing to roll`);
  }
  refuseStatic(from);
  refuseStatic(to);
}

function refuseStatic(v: Version): void {
  if (v.provider.kind !== 'static') return;
  throw new BadRequestError(
    'invalid_rollout',
    `version ${v.model}/${v.id} runs on static endpoints: a rolling update starts and stops workers, which fixed endpoints cannot`,
  );
}

/** A partition leaves fewer old workers than the update's desired workers (else it would pause having done nothing). */
export function checkPartitionFits(partition: number, budgets: Readonly<Record<string, RoleBudget>>): void {
  const total = Object.values(budgets).reduce((n, b) => n + b.desired, 0);
  if (partition >= total && partition > 0) {
    throw new BadRequestError(
      'invalid_rollout',
      `partition ${partition}: it must keep fewer old workers than the ${total} the version runs (0 finishes the update)`,
    );
  }
}
