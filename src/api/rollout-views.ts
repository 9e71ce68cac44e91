// What the admin API shows of rollouts and telemetry: the canary, experiment, window, monitor,
// strategy plan and pipeline bodies, mapped field by field from the camelCase the controllers keep
// (and persist) to the API's snake_case. Explicit rather than a key converter: record keys (version
// ids in weights and windows, check ids) are data and must pass untouched, and the compiler checks
// each side. The canary's verdicts and rollback are mapped in src/rollout/canary-views.ts.
import type { ExperimentResult } from '../analysis/ab-test.js';
import type { JudgeStats } from '../control/quality-judge.js';
import type { StoredRollout } from '../rollout/rollout-record.js';
import type { CanaryState } from '../rollout/canary-state.js';
import { canaryRollbackView, stagedStateView } from '../rollout/canary-views.js';
import type { ExperimentState } from '../rollout/experiment-state.js';
import type { CheckResult, MonitorSettings } from '../rollout/monitor.js';
import type { RunResult, StepResult } from '../rollout/pipeline/runner.js';
import type { Check } from '../rollout/pipeline/trigger.js';
import type { StrategyPlan, StrategyRow } from '../rollout/planner.js';
import type { StagePlan } from '../rollout/stage-plan.js';
import type { WebhookResult } from '../rollout/webhooks.js';
import type { Percentiles, WindowStats } from '../telemetry/window.js';
import type {
  CanaryEventView,
  CanaryHistoryEntry,
  CanaryStateView,
  ExperimentAnalysisView,
  ExperimentResultView,
  ExperimentView,
  JudgeStatsView,
  MonitorCheckView,
  MonitorSettingsView,
  PercentilesView,
  PipelineCheckView,
  PipelineRunView,
  PipelineStepView,
  PlanVersionView,
  StagePlanView,
  StrategyPlanView,
  StrategyRowView,
  WebhookResultView,
  WindowView,
} from './types.js';

/**
 * A statistic as the types promise it: NaN and ±Infinity (no samples, no traffic) are null, which is
 * what JSON would write anyway; said here so that the type is true in process too.
 */
function fin(x: unknown): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

// ---- telemetry ---------------------------------------------------------------------------------

function percentilesView(p: Percentiles): PercentilesView {
  return { p50: fin(p.p50), p90: fin(p.p90), p99: fin(p.p99), mean: fin(p.mean) };
}

export function windowView(w: WindowStats): WindowView {
  return {
    requests: w.requests,
    errors: w.errors,
    error_rate: fin(w.errorRate),
    ttft_ms: percentilesView(w.ttftMs),
    tpot_ms: percentilesView(w.tpotMs),
    latency_ms: percentilesView(w.latencyMs),
    rps: w.rps,
    tokens_per_s: w.tokensPerS,
    span_s: w.spanS,
  };
}

export function judgeStatsView(s: JudgeStats): JudgeStatsView {
  return { judged: s.judged, failures: s.failures, dropped: s.dropped, queued: s.queued, running: s.running, last_error: s.lastError ?? null };
}

export function webhookResultView(r: WebhookResult): WebhookResultView {
  return { url: r.url, ok: r.ok, status: r.status ?? null, attempts: r.attempts, error: r.error ?? null, duration_ms: r.durationMs };
}

// ---- monitored rollback ------------------------------------------------------------------------

export function monitorSettingsView(s: MonitorSettings): MonitorSettingsView {
  return { enabled: s.enabled, max_error_rate: s.maxErrorRate, max_p99_latency_ms: s.maxP99LatencyMs, min_requests: s.minRequests, interval_ms: s.intervalMs };
}

export function monitorCheckView(c: CheckResult): MonitorCheckView {
  return {
    model: c.model,
    at: c.at,
    action: c.action,
    active: c.active ?? null,
    standby: c.standby ?? null,
    stats: c.stats ? { requests: c.stats.requests, error_rate: fin(c.stats.errorRate), latency_ms: { p99: fin(c.stats.latencyMs.p99) } } : null,
    verdict: c.verdict ? { roll_back: c.verdict.rollBack, reason: c.verdict.reason, breaches: c.verdict.breaches } : null,
    rollback: c.rollback ?? null,
    rollout: c.rollout ?? null,
    notifications: c.notifications ? c.notifications.map(webhookResultView) : null,
    error: c.error ?? null,
  };
}

// ---- canary ------------------------------------------------------------------------------------

export function canaryStateView(s: CanaryState): CanaryStateView {
  return {
    kind: s.kind,
    ...stagedStateView(s),
    stable: s.stable,
    canary: s.canary,
    rollback: s.rollback ? canaryRollbackView(s.rollback) : null,
    loaded_by_rollout: s.loadedByRollout,
    shadow_share: s.shadowShare,
  };
}

export function canaryHistoryEntry(r: StoredRollout<CanaryState>): CanaryHistoryEntry {
  return { id: r.state.id, phase: r.state.phase, created_at: r.createdAt, updated_at: r.updatedAt, state: canaryStateView(r.state) };
}

export function canaryEventView(rolloutId: string, e: { seq: number; at: number; kind: string; message?: string | undefined }): CanaryEventView {
  return { seq: e.seq, rollout_id: rolloutId, at: e.at, kind: e.kind, message: e.message ?? null };
}

export function stagePlanView(p: StagePlan): StagePlanView {
  return {
    live_rps: p.liveRps,
    effect: p.effect,
    alpha_per_check: p.alphaPerCheck,
    power: p.power,
    stage_duration_ms: p.stageDurationMs,
    // a stage without traffic to time it by takes Infinity ms in memory: null says "unknown"
    stages: p.stages.map((r) => ({
      percent: r.percent,
      samples_needed: r.samplesNeeded,
      canary_rps: r.canaryRps,
      collect_ms: fin(r.collectMs),
      duration_ms: fin(r.durationMs),
    })),
    total_ms: fin(p.totalMs),
    note: p.note,
  };
}

// ---- the strategy planner ----------------------------------------------------------------------

function planVersionView(v: StrategyPlan['current']): PlanVersionView {
  return { id: v.id, gpus: v.gpus, tp: v.tp, replicas: v.replicas, load_time_ms: v.loadTimeMs, load_time_estimated: v.loadTimeEstimated };
}

function strategyRowView(r: StrategyRow): StrategyRowView {
  return {
    strategy: r.strategy,
    label: r.label,
    groups: r.groups ?? null,
    extra_gpus: r.extraGpus,
    extra_gpus_pct: r.extraGpusPct,
    steady_overhead_pct: r.steadyOverheadPct,
    downtime_ms: r.downtimeMs,
    max_capacity_drop_pct: r.maxCapacityDropPct,
    rollback_ms: r.rollbackMs,
    rollback_how: r.rollbackHow,
    total_deploy_ms: r.totalDeployMs,
    feasible: r.feasible,
    note: r.note ?? null,
  };
}

export function strategyPlanView(p: StrategyPlan): StrategyPlanView {
  const rec = p.recommendation;
  return {
    current: planVersionView(p.current),
    target: planVersionView(p.target),
    cluster: { total_gpus: p.cluster.totalGpus, free_gpus: p.cluster.freeGpus },
    risk: { level: p.risk.level, reason: p.risk.reason, strategy: p.risk.strategy, canary_share: p.risk.canaryShare, eval_duration_s: p.risk.evalDurationS },
    rows: p.rows.map(strategyRowView),
    recommendation: {
      strategy: rec.strategy,
      label: rec.label,
      canary_share: rec.canaryShare ?? null,
      eval_duration_s: rec.evalDurationS ?? null,
      reason: rec.reason,
    },
    canary_stages: p.canaryStages ? stagePlanView(p.canaryStages) : null,
  };
}

// ---- experiments -------------------------------------------------------------------------------

function experimentResultView(r: ExperimentResult & { at: number }): ExperimentResultView {
  return {
    at: r.at,
    status: r.status,
    n_a: r.n_a,
    n_b: r.n_b,
    mean_a: fin(r.mean_a),
    mean_b: fin(r.mean_b),
    std_a: fin(r.std_a),
    std_b: fin(r.std_b),
    median_a: fin(r.median_a),
    median_b: fin(r.median_b),
    p_value: fin(r.p_value),
    p_value_sequential: fin(r.p_value_sequential),
    p_value_decision: fin(r.p_value_decision),
    alpha: r.alpha,
    significant: r.significant,
    decision: r.decision,
    effect_size: fin(r.effect_size),
    effect_size_seed: fin(r.effect_size_seed),
    win_rate: fin(r.win_rate),
    hl_shift: fin(r.hl_shift),
    hl_ci: [fin(r.hl_ci[0]), fin(r.hl_ci[1])],
    hl_conf_level: fin(r.hl_conf_level),
    welch: { t: fin(r.welch.t), df: fin(r.welch.df), p: fin(r.welch.p) },
    samples_needed_for_power: fin(r.samples_needed_for_power),
    samples_needed_sequential: fin(r.samples_needed_sequential),
    additional_samples_needed: fin(r.additional_samples_needed),
    min_detectable_effect: fin(r.min_detectable_effect),
    method: r.method,
  };
}

export function experimentView(s: ExperimentState): ExperimentView {
  return {
    kind: s.kind,
    id: s.id,
    model: s.model,
    a: s.a,
    b: s.b,
    split: s.split,
    metric: s.metric,
    min_detectable_effect: s.minDetectableEffect ?? null,
    alpha: s.alpha,
    power: s.power,
    phase: s.phase,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    actor: s.actor,
    // keyed by version id: copied, never renamed
    previous_weights: { ...s.previousWeights },
    previous_stable: s.previousStable,
    result: s.result ? experimentResultView(s.result) : null,
    stopped_reason: s.stoppedReason ?? null,
  };
}

/** `analyze` answers the experiment with the analysis it just made. */
export function experimentAnalysisView(s: ExperimentState & { result: ExperimentResult & { at: number } }): ExperimentAnalysisView {
  return { ...experimentView(s), result: experimentResultView(s.result) };
}

// ---- pipelines ---------------------------------------------------------------------------------

function stepView(s: StepResult): PipelineStepView {
  return { kind: s.kind, what: s.what, status: s.status, detail: s.detail, duration_ms: s.durationMs };
}

function checkView(c: Check): PipelineCheckView {
  return { expr: c.expr, value: c.value, result: c.result, reason: c.reason ?? null };
}

/** `pipeline run -o json`: the run's result, with the file and model it ran. */
export function pipelineRunView(file: string, model: string | undefined, r: RunResult): PipelineRunView {
  const rb = r.rollback;
  return {
    file,
    model: model ?? null,
    ok: r.ok,
    outcome: r.outcome,
    failed_stage: r.failedStage ?? null,
    reason: r.reason ?? null,
    stages: r.stages.map((s) => ({ name: s.name, status: s.status, steps: s.steps.map(stepView), on_failure: s.onFailure.map(stepView) })),
    rollback: rb
      ? {
          stage: rb.stage,
          evaluation: { fired: rb.evaluation.fired, result: rb.evaluation.result, checks: rb.evaluation.checks.map(checkView), summary: rb.evaluation.summary },
          // keyed by scope (active, stable, canary)
          versions: { ...rb.versions },
          action: rb.action ? stepView(rb.action) : null,
          notify: rb.notify ? { sent: rb.notify.sent, detail: rb.notify.detail, results: rb.notify.results.map(webhookResultView) } : null,
          notice: rb.notice
            ? {
                channel: rb.notice.channel,
                pipeline: rb.notice.pipeline ?? null,
                file: rb.notice.file,
                stage: rb.notice.stage,
                trigger: rb.notice.trigger,
                summary: rb.notice.summary,
                checks: rb.notice.checks.map(checkView),
                versions: { ...rb.notice.versions },
                action: rb.notice.action,
              }
            : null,
        }
      : null,
    duration_ms: r.durationMs,
  };
}
