// The canary rollout's persisted state and its pure decision rule: (state, verdict, now) → next step;
// and the model's canary settings as the judge's configuration.
import type { JudgeConfigOverrides, Verdict } from '../analysis/judge.js';
import type { CanarySettings } from '../config/types.js';
import type { WorkerHealth } from '../health/machine.js';

export type CanaryPhase = 'pending' | 'loading' | 'progressing' | 'paused' | 'promoting' | 'rolling_back' | 'succeeded' | 'rolled_back' | 'aborted' | 'failed';
export const TERMINAL: readonly CanaryPhase[] = ['succeeded', 'rolled_back', 'aborted', 'failed'];

/** What is kept of one verdict: enough to show operators and to audit the decision. */
export interface VerdictRecord {
  at: number;
  stage: number;
  percent: number;
  look: number;
  outcome: Verdict['outcome'];
  action: Verdict['action'];
  score: number;
  reasons: string[];
  /** Per metric: outcome, both versions' summaries, effect and p-values. */
  metrics: {
    name: string;
    outcome: string;
    reason: string;
    stable: unknown;
    canary: unknown;
    /** Hodges-Lehmann shift canary − stable with its confidence interval (sample metrics; absent in records from before it was kept). */
    shift?: { estimate: number; lower: number; upper: number; confLevel: number; relativeToStableMedian: number } | undefined;
    checks: { id: string; outcome: string; pValue: number; pValueSequential: number; effect: number; threshold: number }[];
  }[];
  /** Whether this verdict decided something (advance, rollback, pause), or was just a look. */
  decisive: boolean;
}

export interface RollbackRecord {
  reason: string;
  at: number;
  timing: { traffic_shift_ms: number; drain_ms: number; unload_ms: number; total_ms: number };
  drained: number;
  aborted: number;
  /** Requests the canary served in this rollout, and at what share of traffic it was caught. */
  canaryRequests: number;
  percentAtRollback: number;
}

/** What every staged rollout judged by the canary judge keeps (a version's canary, an adapter's). */
export interface StagedFields {
  id: string;
  model: string;
  /** Percent of traffic per stage, ascending; 100 means promote. */
  stages: number[];
  stageIndex: number;
  stageDurationMs: number;
  phase: CanaryPhase;
  createdAt: number;
  startedAt: number;
  stageStartedAt: number;
  updatedAt: number;
  /** Looks taken on the current sample stream and the always-valid p-values so far. */
  look: number;
  previous: Record<string, number>;
  verdicts: VerdictRecord[];
  last?: VerdictRecord | undefined;
  pausedReason?: string | undefined;
  actor: string;
  message?: string | undefined;
  /** While `rolling_back`: why, and the phase it ends in (a restart finishes the sequence). */
  rollbackReason?: string | undefined;
  rollbackTo?: 'rolled_back' | 'aborted' | undefined;
}

export interface CanaryState extends StagedFields {
  kind: 'canary';
  stable: string;
  canary: string;
  rollback?: RollbackRecord | undefined;
  /** The rollout loaded the canary itself (so it unloads it on rollback). */
  loadedByRollout: boolean;
  /** Shadow share used for pairwise judging (0: none). */
  shadowShare: number;
}

/** What the decision rule reads of a staged rollout. */
export type Staged = Pick<StagedFields, 'phase' | 'pausedReason' | 'stageStartedAt' | 'stageDurationMs' | 'stages' | 'stageIndex'>;

export type Step =
  | { kind: 'none'; why: string }
  | { kind: 'advance'; to: number }
  | { kind: 'promote' }
  | { kind: 'rollback'; reason: string }
  | { kind: 'pause'; reason: string };

export function currentPercent(s: Pick<CanaryState, 'stages' | 'stageIndex'>): number {
  return s.stages[Math.min(s.stageIndex, s.stages.length - 1)] ?? 0;
}

/**
 * The decision after a look. A failing verdict rolls back at once, whatever the stage's age (a bad
 * canary must be caught early). Otherwise nothing moves until the stage has lasted its duration;
 * then pass → advance (or promote after the last stage below 100 %), inconclusive → pause for a
 * human, nodata → keep waiting.
 */
export function decide(s: Staged, v: Verdict, now: number): Step {
  if (v.action === 'rollback') return { kind: 'rollback', reason: v.reasons.join('; ') || 'canary failed its analysis' };
  if (s.phase === 'paused') return { kind: 'none', why: `paused: ${s.pausedReason ?? 'by an operator'}` };
  const elapsed = now - s.stageStartedAt;
  if (elapsed < s.stageDurationMs) return { kind: 'none', why: `stage holds ${Math.ceil((s.stageDurationMs - elapsed) / 1000)} s more` };
  switch (v.action) {
    case 'advance':
      return nextStage(s);
    case 'pause':
      return { kind: 'pause', reason: `inconclusive (score ${v.score.toFixed(0)}): ${v.reasons.join('; ')}` };
    case 'wait':
      return { kind: 'none', why: `waiting for data: ${v.reasons.join('; ') || 'too few samples'}` };
  }
}

/** The step after a passed stage: the next stage, or promotion when none below 100 % is left. */
export function nextStage(s: Pick<CanaryState, 'stages' | 'stageIndex'>): Step {
  const next = s.stageIndex + 1;
  const pct = s.stages[next];
  if (pct === undefined || pct >= 100) return { kind: 'promote' };
  return { kind: 'advance', to: next };
}

/** Route weights for a stage: canary at `percent`, stable the rest. */
export function stageWeights(s: Pick<CanaryState, 'stable' | 'canary'>, percent: number): Record<string, number> {
  const c = Math.min(1, Math.max(0, percent / 100));
  return { [s.canary]: c, [s.stable]: 1 - c };
}

/**
 * A canary worker's health that fails the canary at once — a critical failure, whatever the statistics
 * say: a serving worker unhealthy, draining or dead. The reason, or undefined.
 */
export function criticalHealth(w: { id: string; role: string }, h: Pick<WorkerHealth, 'state' | 'lastFailure'>): string | undefined {
  if (w.role !== 'serving' || (h.state !== 'unhealthy' && h.state !== 'draining' && h.state !== 'dead')) return undefined;
  const f = h.lastFailure;
  return `critical: canary worker ${w.id} turned ${h.state}${f ? ` (${f.reason}: ${f.detail})` : ''}`;
}

/** Validate operator-given stages: ascending percentages in (0, 100]. */
export function checkStages(stages: readonly number[]): string | undefined {
  if (stages.length === 0) return 'at least one stage is needed';
  for (let i = 0; i < stages.length; i++) {
    const p = stages[i] as number;
    if (!Number.isFinite(p) || p <= 0 || p > 100) return `stage ${i + 1} must be a percentage in (0, 100], got ${p}`;
    if (i > 0 && p <= (stages[i - 1] as number)) return `stages must increase: ${stages[i - 1]} then ${p}`;
  }
  return undefined;
}

export function summarizeVerdict(v: Verdict, s: Pick<CanaryState, 'stages' | 'stageIndex'>, now: number, decisive: boolean): VerdictRecord {
  return {
    at: now,
    stage: s.stageIndex,
    percent: currentPercent(s),
    look: v.look.index,
    outcome: v.outcome,
    action: v.action,
    score: v.score,
    reasons: v.reasons,
    metrics: v.metrics.map((m) => ({
      name: m.name,
      outcome: m.outcome,
      reason: m.reason,
      stable: m.stable,
      canary: m.canary,
      ...(m.shift ? { shift: m.shift } : {}),
      checks: m.checks.map((c) => ({
        id: c.id,
        outcome: c.outcome,
        pValue: c.pValue,
        pValueSequential: c.pValueSequential,
        effect: c.effect,
        threshold: c.threshold,
      })),
    })),
    decisive,
  };
}

/** Config overrides (glidepath.yaml `models[].canary`) → the judge's configuration. */
export function judgeOverrides(c: CanarySettings | undefined): JudgeConfigOverrides {
  if (!c) return {};
  const o: JudgeConfigOverrides = {};
  if (c.alpha !== undefined) o.alpha = c.alpha;
  const lat = (extra: object) => ({
    ...(c.maxP99Increase !== undefined ? { maxP99Increase: c.maxP99Increase } : {}),
    ...(c.minSamples !== undefined ? { minSamples: c.minSamples } : {}),
    ...extra,
  });
  o.latency = lat({});
  o.ttft = lat({});
  o.tpot = lat({});
  o.errors = {
    ...(c.maxErrorRate !== undefined ? { maxRate: c.maxErrorRate } : {}),
    ...(c.maxErrorIncrease !== undefined ? { maxRelativeIncrease: c.maxErrorIncrease } : {}),
    ...(c.minSamples !== undefined ? { minRequests: c.minSamples } : {}),
  };
  o.quality = {
    ...(c.maxQualityDecrease !== undefined ? { maxDecrease: c.maxQualityDecrease } : {}),
    ...(c.minSamples !== undefined ? { minSamples: Math.min(30, c.minSamples) } : {}),
  };
  o.throughput = c.minSamples !== undefined ? { minRequests: c.minSamples } : {};
  return o;
}
