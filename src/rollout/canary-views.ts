// A canary's verdicts and rollback record in the admin API's snake_case, and the `data` of its
// `canary_*` notifications built from them. Beside the state (canary-state.ts) rather than in
// src/api/ because the controller sends these shapes itself and rollout/ may not import api/;
// src/api/types.ts re-exports the types and src/api/rollout-views.ts reuses the mappings.
import type { Action, Outcome } from '../analysis/judge-types.js';
import type { CanaryPhase, CanaryState, RollbackRecord, StagedFields, VerdictRecord } from './canary-state.js';

/** One statistical or threshold check of a metric; null where the statistic was not computed. */
export interface CanaryCheckView {
  id: string;
  outcome: string;
  p_value: number | null;
  p_value_sequential: number | null;
  effect: number | null;
  threshold: number | null;
}

/** One version's summary in a metric's verdict (the fields the metric has). */
export interface VersionSummaryView {
  n: number | null;
  mean?: number | null;
  median?: number | null;
  p99?: number | null;
  rate?: number | null;
  throughput?: number | null;
}

export interface CanaryMetricView {
  name: string;
  outcome: string;
  reason: string;
  stable: VersionSummaryView;
  canary: VersionSummaryView;
  /** Hodges-Lehmann shift canary − stable with its confidence interval (sample metrics); null otherwise. */
  shift: { estimate: number | null; lower: number | null; upper: number | null; conf_level: number | null; relative_to_stable_median: number | null } | null;
  checks: CanaryCheckView[];
}

export interface CanaryVerdictView {
  at: number;
  stage: number;
  percent: number;
  look: number;
  outcome: Outcome;
  action: Action;
  /** 0-100; null when there was nothing to score. */
  score: number | null;
  reasons: string[];
  metrics: CanaryMetricView[];
  /** Whether this verdict decided something (advance, rollback, pause), or was just a look. */
  decisive: boolean;
}

export interface CanaryRollbackView {
  reason: string;
  at: number;
  timing: { traffic_shift_ms: number; drain_ms: number; unload_ms: number; total_ms: number };
  drained: number;
  aborted: number;
  /** Requests the canary served in this rollout, and at what share of traffic it was caught. */
  canary_requests: number;
  percent_at_rollback: number;
}

/** The `data` of a `canary_succeeded` / `_rolled_back` / `_aborted` / `_failed` notification. */
export interface CanaryNoticeView {
  /** The rollout's id. */
  id: string;
  rollback: CanaryRollbackView | null;
  last: CanaryVerdictView | null;
}

/**
 * A statistic as the types promise it: NaN and ±Infinity (no samples, no traffic) are null, which is
 * what JSON would write anyway; said here so that the type is true in process too.
 */
function fin(x: unknown): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

/** A verdict's per-version summary is kept as `unknown` (the judge's VersionSummary): take its numbers. */
function summaryView(x: unknown): VersionSummaryView {
  const o = (typeof x === 'object' && x !== null ? x : {}) as Record<string, unknown>;
  const out: VersionSummaryView = { n: fin(o.n) };
  for (const k of ['mean', 'median', 'p99', 'rate', 'throughput'] as const) if (k in o) out[k] = fin(o[k]);
  return out;
}

export function verdictView(v: VerdictRecord): CanaryVerdictView {
  return {
    at: v.at,
    stage: v.stage,
    percent: v.percent,
    look: v.look,
    outcome: v.outcome,
    action: v.action,
    score: fin(v.score),
    reasons: v.reasons,
    metrics: v.metrics.map((m) => ({
      name: m.name,
      outcome: m.outcome,
      reason: m.reason,
      stable: summaryView(m.stable),
      canary: summaryView(m.canary),
      shift: m.shift
        ? {
            estimate: fin(m.shift.estimate),
            lower: fin(m.shift.lower),
            upper: fin(m.shift.upper),
            conf_level: fin(m.shift.confLevel),
            relative_to_stable_median: fin(m.shift.relativeToStableMedian),
          }
        : null,
      checks: m.checks.map((c): CanaryCheckView => ({
        id: c.id,
        outcome: c.outcome,
        p_value: fin(c.pValue),
        p_value_sequential: fin(c.pValueSequential),
        effect: fin(c.effect),
        threshold: fin(c.threshold),
      })),
    })),
    decisive: v.decisive,
  };
}

export function canaryRollbackView(r: RollbackRecord): CanaryRollbackView {
  return {
    reason: r.reason,
    at: r.at,
    timing: { traffic_shift_ms: r.timing.traffic_shift_ms, drain_ms: r.timing.drain_ms, unload_ms: r.timing.unload_ms, total_ms: r.timing.total_ms },
    drained: r.drained,
    aborted: r.aborted,
    canary_requests: r.canaryRequests,
    percent_at_rollback: r.percentAtRollback,
  };
}

export function canaryNoticeView(s: Pick<CanaryState, 'id' | 'rollback' | 'last'>): CanaryNoticeView {
  return { id: s.id, rollback: s.rollback ? canaryRollbackView(s.rollback) : null, last: s.last ? verdictView(s.last) : null };
}

/** What every staged rollout's view shows (a version's canary, an adapter's), in the API's names. */
export interface StagedStateView {
  id: string;
  model: string;
  /** Percent of traffic per stage, ascending; 100 means promote. */
  stages: number[];
  stage_index: number;
  stage_duration_ms: number;
  phase: CanaryPhase;
  created_at: number;
  started_at: number;
  stage_started_at: number;
  updated_at: number;
  look: number;
  /** Always-valid p-values so far, keyed by check id. */
  previous: Record<string, number | null>;
  verdicts: CanaryVerdictView[];
  last: CanaryVerdictView | null;
  paused_reason: string | null;
  actor: string;
  message: string | null;
  /** While `rolling_back`: why, and the phase it ends in. */
  rollback_reason: string | null;
  rollback_to: 'rolled_back' | 'aborted' | null;
}

export function stagedStateView(s: StagedFields): StagedStateView {
  return {
    id: s.id,
    model: s.model,
    stages: s.stages,
    stage_index: s.stageIndex,
    stage_duration_ms: s.stageDurationMs,
    phase: s.phase,
    created_at: s.createdAt,
    started_at: s.startedAt,
    stage_started_at: s.stageStartedAt,
    updated_at: s.updatedAt,
    look: s.look,
    // keyed by check id: copied, never renamed
    previous: Object.fromEntries(Object.entries(s.previous).map(([k, p]) => [k, fin(p)])),
    verdicts: s.verdicts.map(verdictView),
    last: s.last ? verdictView(s.last) : null,
    paused_reason: s.pausedReason ?? null,
    actor: s.actor,
    message: s.message ?? null,
    rollback_reason: s.rollbackReason ?? null,
    rollback_to: s.rollbackTo ?? null,
  };
}
