// What a rollout looks like in the store: a discriminated union by `kind` (canary, experiment,
// rolling update), written with a schema version and validated when read back. A record
// that does not validate is a clear error naming the rollout — never a cast of whatever is there.
import { z } from 'zod';
import { zodMessage } from '../config/issues.js';
import { GlidepathError } from '../errors.js';
import type { CanaryState, RollbackRecord, VerdictRecord } from './canary-state.js';
import { TERMINAL } from './canary-state.js';
import type { ExperimentState } from './experiment-state.js';
import type { AdapterCanaryState, AdapterRollbackRecord } from './adapter-canary-state.js';
import type { RollingState } from './rolling-state.js';
import { ROLLING_TERMINAL } from './rolling-state.js';

/**
 * Version of the persisted shape. Records written before versioning carry none: they have the
 * fields of version 1 and are read as such (the upgrade is the identity); a version above this one
 * was written by a newer Glidepath and is refused rather than misread.
 */
export const ROLLOUT_SCHEMA_VERSION = 1;

export type RolloutState = CanaryState | ExperimentState | RollingState | AdapterCanaryState;
export type RolloutKind = RolloutState['kind'];
export const ROLLOUT_KINDS: readonly RolloutKind[] = ['canary', 'experiment', 'rolling', 'adapter_canary'];
export type StateOfKind<K extends RolloutKind> = Extract<RolloutState, { kind: K }>;

/** A validated rollout with the store revision its next write must name (compare-and-set). */
export interface StoredRollout<S extends RolloutState = RolloutState> {
  state: S;
  revision: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * A number as statistics produce them: NaN and ±Infinity included (p-values of checks without data,
 * empty quantiles). JSON writes those as null: read null back as NaN.
 */
const num = z.custom<number | null>((v) => v === null || typeof v === 'number', { message: 'expected a number' }).transform((v) => v ?? Number.NaN);
const str = z.string();

const verdictRecord: z.ZodType<VerdictRecord> = z.object({
  at: num,
  stage: num,
  percent: num,
  look: num,
  outcome: z.enum(['pass', 'fail', 'inconclusive', 'nodata']),
  action: z.enum(['advance', 'rollback', 'pause', 'wait']),
  score: num,
  reasons: z.array(str),
  metrics: z.array(
    z.object({
      name: str,
      outcome: str,
      reason: str,
      stable: z.unknown(),
      canary: z.unknown(),
      shift: z.object({ estimate: num, lower: num, upper: num, confLevel: num, relativeToStableMedian: num }).optional(),
      checks: z.array(z.object({ id: str, outcome: str, pValue: num, pValueSequential: num, effect: num, threshold: num })),
    }),
  ),
  decisive: z.boolean(),
});

const rollbackRecord: z.ZodType<RollbackRecord> = z.object({
  reason: str,
  at: num,
  timing: z.object({ traffic_shift_ms: num, drain_ms: num, unload_ms: num, total_ms: num }),
  drained: num,
  aborted: num,
  canaryRequests: num,
  percentAtRollback: num,
});

/** The fields of every staged rollout (canary-state.ts `StagedFields`). */
const stagedFields = {
  id: str,
  model: str,
  stages: z.array(num),
  stageIndex: z.number().int().nonnegative(),
  stageDurationMs: num,
  phase: z.enum(['pending', 'loading', 'progressing', 'paused', 'promoting', 'rolling_back', 'succeeded', 'rolled_back', 'aborted', 'failed']),
  createdAt: num,
  startedAt: num,
  stageStartedAt: num,
  updatedAt: num,
  look: z.number().int().nonnegative(),
  previous: z.record(str, num),
  verdicts: z.array(verdictRecord),
  last: verdictRecord.optional(),
  pausedReason: str.optional(),
  actor: str,
  message: str.optional(),
  rollbackReason: str.optional(),
  rollbackTo: z.enum(['rolled_back', 'aborted']).optional(),
};

const canaryState: z.ZodType<CanaryState> = z.object({
  kind: z.literal('canary'),
  ...stagedFields,
  stable: str,
  canary: str,
  rollback: rollbackRecord.optional(),
  loadedByRollout: z.boolean(),
  shadowShare: num,
});

const adapterSide = z.object({ source: str, version: str.nullable(), servedAs: str });
const adapterRollback: z.ZodType<AdapterRollbackRecord> = z.object({
  reason: str,
  at: num,
  timing: z.object({ traffic_shift_ms: num, unload_ms: num, total_ms: num }),
  unloaded: num,
  unloadFailed: z.array(str),
  unloadPending: z.array(str),
  candidateRequests: num,
  percentAtRollback: num,
});

const adapterCanaryState: z.ZodType<AdapterCanaryState> = z.object({
  kind: z.literal('adapter_canary'),
  ...stagedFields,
  adapter: str,
  stable: adapterSide,
  candidate: adapterSide.extend({ version: str }),
  rollback: adapterRollback.optional(),
});

const experimentResult = z.object({
  at: num,
  status: z.enum(['analyzed', 'insufficient_data']),
  n_a: num,
  n_b: num,
  mean_a: num,
  mean_b: num,
  std_a: num,
  std_b: num,
  median_a: num,
  median_b: num,
  p_value: num,
  p_value_sequential: num,
  p_value_decision: num,
  alpha: num,
  significant: z.boolean(),
  decision: z.enum(['b_better', 'a_better', 'no_difference', 'insufficient_data']),
  effect_size: num,
  effect_size_seed: num,
  win_rate: num,
  hl_shift: num,
  hl_ci: z.tuple([num, num]),
  hl_conf_level: num,
  welch: z.object({ t: num, df: num, p: num }),
  samples_needed_for_power: num,
  samples_needed_sequential: num,
  additional_samples_needed: num,
  min_detectable_effect: num,
  method: z.enum(['msprt', 'fixed']),
});

const experimentState: z.ZodType<ExperimentState> = z.object({
  kind: z.literal('experiment'),
  id: str,
  model: str,
  a: str,
  b: str,
  split: num,
  metric: z.enum(['quality', 'ttft', 'tpot', 'latency']),
  minDetectableEffect: num.optional(),
  alpha: num,
  power: num,
  phase: z.enum(['running', 'stopped']),
  createdAt: num,
  updatedAt: num,
  actor: str,
  previousWeights: z.record(str, num),
  previousStable: str,
  result: experimentResult.optional(),
  stoppedReason: str.optional(),
});

const budget = z.union([z.object({ count: z.number().int().nonnegative() }).strict(), z.object({ percent: z.number().min(0).max(100) }).strict()]);
const roleNow = z.object({ old: num, ready: num, starting: num });
const rollingState: z.ZodType<RollingState> = z.object({
  kind: z.literal('rolling'),
  id: str,
  model: str,
  from: str,
  to: str,
  inPlace: z.object({ oldWorkers: z.array(str) }).optional(),
  maxSurge: budget,
  maxUnavailable: budget,
  budgets: z.record(str, z.object({ desired: num, surge: num, unavailable: num })),
  backBudgets: z.record(str, z.object({ desired: num, surge: num, unavailable: num })),
  partition: z.number().int().nonnegative(),
  stepTimeoutMs: num,
  progressDeadlineMs: num,
  onFailure: z.enum(['pause', 'rollback']),
  phase: z.enum(['progressing', 'rolling_back', 'paused', 'succeeded', 'aborted', 'rolled_back', 'failed']),
  resumeTo: z.enum(['progressing', 'rolling_back']).optional(),
  pausedReason: str.optional(),
  rollbackReason: str.optional(),
  rollbackTo: z.enum(['aborted', 'rolled_back']).optional(),
  step: z.number().int().nonnegative(),
  trace: z.array(
    z.object({
      at: num,
      step: num,
      roles: z.record(str, roleNow),
      share: num,
      started: z.record(str, num),
      stopped: z.array(str),
      direction: z.enum(['forward', 'back']),
    }),
  ),
  failures: z.array(z.object({ at: num, worker: str.optional(), reason: str })),
  deadlineExceededAt: num.optional(),
  createdAt: num,
  startedAt: num,
  updatedAt: num,
  lastProgressAt: num,
  finishedAt: num.optional(),
  actor: str,
  message: str.optional(),
});

const SCHEMAS: { [K in RolloutKind]: z.ZodType<StateOfKind<K>> } = {
  canary: canaryState,
  experiment: experimentState,
  rolling: rollingState,
  adapter_canary: adapterCanaryState,
};

/**
 * What the store keeps one unfinished rollout of at a time: the model, or for an adapter canary the
 * adapter (its name is unique among models' and adapters' names), so that adapters' canaries run beside
 * their model's own rollouts and beside each other.
 */
export function rolloutScope(state: RolloutState): string {
  return state.kind === 'adapter_canary' ? state.adapter : state.model;
}

/** The error every unreadable rollout record becomes: 500, code `rollout_state_invalid`, naming the rollout. */
export function rolloutStateError(id: string, model: string, why: string): GlidepathError {
  return new GlidepathError('rollout_state_invalid', `rollout ${id} of model ${model} has an unreadable stored state: ${why}`, {
    details: { rollout: id, model },
  });
}

/** The `kind` a raw record claims, before validation (undefined when it names none). */
export function claimedKind(raw: unknown): string | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const k = (raw as { kind?: unknown }).kind;
  return typeof k === 'string' ? k : undefined;
}

function isKind(k: string | undefined): k is RolloutKind {
  return k !== undefined && (ROLLOUT_KINDS as readonly string[]).includes(k);
}

/**
 * Validate a stored state and upgrade it to the current shape. Throws `rolloutStateError` naming
 * the rollout on anything else: not an object, an unknown kind, a newer schema version, a missing
 * or mistyped field, or a state that names another rollout or model than its row.
 */
export function parseRolloutState(raw: unknown, row: { id: string; model: string }): RolloutState {
  const bad = (why: string) => rolloutStateError(row.id, row.model, why);
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw bad(`expected an object, got ${raw === null ? 'null' : Array.isArray(raw) ? 'an array' : typeof raw}`);
  const { schemaVersion, ...rest } = raw as Record<string, unknown>;
  if (schemaVersion !== undefined && schemaVersion !== ROLLOUT_SCHEMA_VERSION) {
    throw bad(
      `schemaVersion ${JSON.stringify(schemaVersion)} is not one this Glidepath reads (${ROLLOUT_SCHEMA_VERSION}, or none for records written before versioning)`,
    );
  }
  const kind = claimedKind(rest);
  if (!isKind(kind)) throw bad(`unknown kind ${JSON.stringify(kind ?? null)} (known: ${ROLLOUT_KINDS.join(', ')})`);
  const parsed = SCHEMAS[kind].safeParse(rest);
  if (!parsed.success) {
    throw bad(zodMessage(parsed.error, '(state)'));
  }
  const state: RolloutState = parsed.data;
  if (state.id !== row.id || rolloutScope(state) !== row.model)
    throw bad(`the state names rollout ${state.id} of ${state.kind === 'adapter_canary' ? 'adapter' : 'model'} ${rolloutScope(state)}`);
  return state;
}

/** Narrow a validated state to one kind, or undefined: reading "the canary" never yields an experiment. */
export function asKind<K extends RolloutKind>(state: RolloutState, kind: K): StateOfKind<K> | undefined {
  return state.kind === kind ? (state as StateOfKind<K>) : undefined;
}

/** The JSON written to the store: the state with the schema version. */
export function toStoredState(state: RolloutState): Record<string, unknown> {
  return { ...state, schemaVersion: ROLLOUT_SCHEMA_VERSION };
}

/** The row's phase column and whether the rollout is over (one non-terminal rollout per model). */
export function rowPhase(state: RolloutState): { phase: string; terminal: boolean } {
  switch (state.kind) {
    case 'canary':
      return { phase: state.phase, terminal: TERMINAL.includes(state.phase) };
    case 'experiment':
      // a stopped experiment is over; its row phase has always been `aborted`
      return state.phase === 'running' ? { phase: 'running', terminal: false } : { phase: 'aborted', terminal: true };
    case 'rolling':
      return { phase: state.phase, terminal: ROLLING_TERMINAL.includes(state.phase) };
    case 'adapter_canary':
      return { phase: state.phase, terminal: TERMINAL.includes(state.phase) };
  }
}
