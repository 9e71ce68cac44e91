// The admin API's response bodies for rollouts (see types.ts, which re-exports them): the monitor,
// the quality judge, the canary, the strategy planner, experiments and pipeline runs, and the
// telemetry windows they (and the status) show.
import type { ExperimentDecision } from '../analysis/ab-test.js';
import type { CanaryPhase } from '../rollout/canary-state.js';
import type { CanaryRollbackView, StagedStateView } from '../rollout/canary-views.js';
import type { ExperimentMetric } from '../rollout/experiment-state.js';
import type { Breach, CheckAction } from '../rollout/monitor.js';
import type { Evaluation } from '../rollout/pipeline/trigger.js';
import type { Risk, RiskLevel, StrategyKind } from '../rollout/planner.js';
import type { RollbackResult } from '../rollout/bluegreen.js';

// ---- telemetry windows ------------------------------------------------------------------------

/** One metric over a window; null when the window holds no sample of it (NaN in memory). */
export interface PercentilesView {
  p50: number | null;
  p90: number | null;
  p99: number | null;
  mean: number | null;
}

/** A version's sliding telemetry window, wherever one is served (status, a version, the canary). */
export interface WindowView {
  requests: number;
  errors: number;
  /** null without requests: 0 out of 0 is no data, not a healthy 0. */
  error_rate: number | null;
  ttft_ms: PercentilesView;
  tpot_ms: PercentilesView;
  latency_ms: PercentilesView;
  rps: number;
  tokens_per_s: number;
  span_s: number;
}

// ---- monitored rollback ------------------------------------------------------------------------

export interface MonitorSettingsView {
  enabled: boolean;
  max_error_rate: number;
  max_p99_latency_ms: number;
  min_requests: number;
  interval_ms: number;
}

/** A webhook delivery (URL without credentials or query string). */
export interface WebhookResultView {
  url: string;
  ok: boolean;
  status: number | null;
  attempts: number;
  error: string | null;
  duration_ms: number;
}

/** The monitor's last look at the active version: the window numbers it judged and what it did. */
export interface MonitorCheckView {
  model: string;
  at: number;
  action: CheckAction;
  active: string | null;
  standby: string | null;
  stats: { requests: number; error_rate: number | null; latency_ms: { p99: number | null } } | null;
  verdict: { roll_back: boolean; reason: string; breaches: Breach[] } | null;
  rollback: RollbackResult | null;
  /** The rollout that had the model while one was in progress. */
  rollout: string | null;
  notifications: WebhookResultView[] | null;
  error: string | null;
}

export interface MonitorView {
  model: string;
  settings: MonitorSettingsView;
  config: MonitorSettingsView;
  override: MonitorSettingsView | null;
  active: string | null;
  standby: string | null;
  fired_for: string | null;
  last_check: MonitorCheckView | null;
}

// ---- the quality judge -------------------------------------------------------------------------

export interface JudgeStatsView {
  judged: number;
  failures: number;
  dropped: number;
  queued: number;
  running: number;
  last_error: string | null;
}

/** GET /judge: the counters only when a judge is configured. */
export interface JudgeView extends Partial<JudgeStatsView> {
  configured: boolean;
}

/** One of the judge's last decisions (GET /judge/samples). */
export interface JudgeSampleView {
  at: number;
  model: string;
  kind: 'pointwise' | 'pairwise';
  version: string;
  adapter: string | null;
  /** Pointwise: the score, 0–1; pairwise: `version`'s, 1 / 0.5 / 0 for a win / tie / loss against `against`. */
  score: number;
  against: string | null;
  /** Only when the judge's `capture_prompts` is on (null otherwise), each cut to 2,000 characters. */
  prompt: string | null;
  answer: string | null;
  answer_against: string | null;
}

/** GET /judge/samples: the judge's last decisions, newest first. */
export interface JudgeSamplesView {
  configured: boolean;
  capture_prompts: boolean;
  samples: JudgeSampleView[];
}

// ---- canary ------------------------------------------------------------------------------------

/** A canary as it is kept (src/rollout/canary-state.ts), in the API's casing. */
export interface CanaryStateView extends StagedStateView {
  kind: 'canary';
  stable: string;
  canary: string;
  rollback: CanaryRollbackView | null;
  /** The rollout loaded the canary itself (so it unloads it on rollback). */
  loaded_by_rollout: boolean;
  shadow_share: number;
}

/** The operator view: the state, plus the route's weights and both versions' live windows. */
export interface CanaryView extends CanaryStateView {
  percent: number;
  /** Keyed by version id. */
  weights: Record<string, number>;
  /** Keyed by version id: the stable and the canary version. */
  windows: Record<string, WindowView>;
  /** Samples of the live judge (null when the canary is not running in this process). */
  samples: { stable: number; canary: number; min_samples: number } | null;
  next_decision: { stage_holds_ms: number; samples_needed: number; samples_eta_ms: number | null; earliest_ms: number | null } | null;
  judge: JudgeStatsView | null;
}

/** Canary stage timing from the live rate and the power analysis; null times: no traffic to time them by. */
export interface StagePlanView {
  live_rps: number;
  effect: number;
  alpha_per_check: number;
  power: number;
  stage_duration_ms: number;
  stages: { percent: number; samples_needed: number; canary_rps: number; collect_ms: number | null; duration_ms: number | null }[];
  total_ms: number | null;
  note: string;
}

/** POST /models/:model/canary: the view and how long its stages should take. */
export interface CanaryStartView extends CanaryView {
  stage_plan: StagePlanView;
}

export interface CanaryHistoryEntry {
  id: string;
  phase: CanaryPhase;
  created_at: number;
  updated_at: number;
  state: CanaryStateView;
}

export interface CanaryEventView {
  seq: number;
  rollout_id: string;
  at: number;
  kind: string;
  message: string | null;
}

// ---- the strategy planner (GET /models/:model/plan) --------------------------------------------

/** The version moved from or to; `load_time_estimated`: never loaded, estimated from its weights' size. */
export interface PlanVersionView {
  id: string;
  gpus: number;
  tp: number;
  replicas: number;
  load_time_ms: number;
  load_time_estimated: boolean;
}

/** One strategy's row of the comparison (docs/operations.md#strategy-planner has the columns). */
export interface StrategyRowView {
  strategy: StrategyKind;
  label: string;
  /** Rolling only: the number of steps; null for the other strategies. */
  groups: number | null;
  extra_gpus: number;
  extra_gpus_pct: number;
  steady_overhead_pct: number;
  downtime_ms: number;
  max_capacity_drop_pct: number;
  rollback_ms: number;
  rollback_how: string;
  total_deploy_ms: number;
  feasible: boolean;
  /** Why it is infeasible, or a caveat. */
  note: string | null;
}

export interface StrategyPlanView {
  current: PlanVersionView;
  target: PlanVersionView;
  cluster: { total_gpus: number; free_gpus: number };
  risk: { level: RiskLevel; reason: string; strategy: Risk['strategy']; canary_share: number; eval_duration_s: number };
  rows: StrategyRowView[];
  /** `canary_share` and `eval_duration_s` when it recommends a canary, else null. */
  recommendation: { strategy: StrategyKind; label: string; canary_share: number | null; eval_duration_s: number | null; reason: string };
  canary_stages: StagePlanView | null;
}

// ---- experiments -------------------------------------------------------------------------------

/** An A/B analysis (src/analysis/ab-test.ts); statistics that could not be computed are null. */
export interface ExperimentResultView {
  at: number;
  status: 'analyzed' | 'insufficient_data';
  n_a: number;
  n_b: number;
  mean_a: number | null;
  mean_b: number | null;
  std_a: number | null;
  std_b: number | null;
  median_a: number | null;
  median_b: number | null;
  p_value: number | null;
  p_value_sequential: number | null;
  p_value_decision: number | null;
  alpha: number;
  significant: boolean;
  decision: ExperimentDecision;
  effect_size: number | null;
  effect_size_seed: number | null;
  win_rate: number | null;
  hl_shift: number | null;
  hl_ci: [number | null, number | null];
  hl_conf_level: number | null;
  welch: { t: number | null; df: number | null; p: number | null };
  samples_needed_for_power: number | null;
  samples_needed_sequential: number | null;
  additional_samples_needed: number | null;
  min_detectable_effect: number | null;
  method: 'msprt' | 'fixed';
}

/** An experiment (create, status, stop); `analyze` answers it with a `result`. */
export interface ExperimentView {
  kind: 'experiment';
  id: string;
  model: string;
  a: string;
  b: string;
  split: number;
  metric: ExperimentMetric;
  /** Smallest difference worth detecting (metric units); null: the observed one. */
  min_detectable_effect: number | null;
  alpha: number;
  power: number;
  phase: 'running' | 'stopped';
  created_at: number;
  updated_at: number;
  actor: string;
  /** The route before the experiment (restored at stop), keyed by version id. */
  previous_weights: Record<string, number>;
  previous_stable: string;
  result: ExperimentResultView | null;
  stopped_reason: string | null;
}

export interface ExperimentAnalysisView extends ExperimentView {
  result: ExperimentResultView;
}

// ---- pipelines (`glidepath pipeline run -o json`) -----------------------------------------------

export interface PipelineStepView {
  kind: 'run' | 'wait_for' | 'monitor' | 'on_failure' | 'rollback_action';
  what: string;
  status: 'ok' | 'failed';
  detail: string;
  duration_ms: number;
}

export interface PipelineStageView {
  name: string;
  status: 'ok' | 'failed' | 'not_run';
  steps: PipelineStepView[];
  on_failure: PipelineStepView[];
}

export interface PipelineCheckView {
  expr: string;
  value: number | null;
  result: Evaluation['result'];
  reason: string | null;
}

export interface PipelineRollbackView {
  stage: string;
  evaluation: { fired: boolean; result: Evaluation['result']; checks: PipelineCheckView[]; summary: string };
  /** The versions the scopes meant, keyed by scope (active, stable, canary). */
  versions: Record<string, string>;
  action: PipelineStepView | null;
  notify: { sent: boolean; detail: string; results: WebhookResultView[] } | null;
  /** The `pipeline_rolled_back` event's data, as the webhooks received it. */
  notice: {
    channel: string;
    pipeline: string | null;
    file: string;
    stage: string;
    trigger: string;
    summary: string;
    checks: PipelineCheckView[];
    versions: Record<string, string>;
    action: { command: string; result: string } | null;
  } | null;
}

/** A pipeline run's result: the CLI prints it; it is no admin API answer, but speaks its casing. */
export interface PipelineRunView {
  file: string;
  model: string | null;
  ok: boolean;
  outcome: 'succeeded' | 'failed' | 'rolled_back';
  failed_stage: string | null;
  reason: string | null;
  stages: PipelineStageView[];
  rollback: PipelineRollbackView | null;
  duration_ms: number;
}
