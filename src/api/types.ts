// The admin API's response bodies, declared once: the API's views return these types (the compiler
// checks what is sent) and the CLI reads them (`import type`, no runtime edge). Every field is
// snake_case (docs/admin-api.md). Declared where they are made and re-exported here: the blue-green
// results (the strategy's own types), and the canary's verdicts and rollback and the cache download,
// which their notifications and events send too (rollout/ and fleet/ may not import api/).
import type { ExperimentDecision } from '../analysis/ab-test.js';
import type { Priority } from '../config/types.js';
import type { ProbeBasis } from '../domain/probes.js';
import type { HealthState, VersionStatus } from '../domain/version.js';
import type { BreakerState, WorkerHealthState } from '../health/machine.js';
import type { CanaryPhase } from '../rollout/canary-state.js';
import type { CanaryRollbackView, CanaryVerdictView } from '../rollout/canary-views.js';
import type { ExperimentMetric } from '../rollout/experiment-state.js';
import type { Breach, CheckAction } from '../rollout/monitor.js';
import type { Evaluation } from '../rollout/pipeline/trigger.js';
import type { Risk, RiskLevel, StrategyKind } from '../rollout/planner.js';
import type { RollbackResult } from '../rollout/bluegreen.js';

export type {
  CanaryCheckView,
  CanaryMetricView,
  CanaryNoticeView,
  CanaryRollbackView,
  CanaryVerdictView,
  VersionSummaryView,
} from '../rollout/canary-views.js';
export type { CacheResultView } from '../fleet/cache.js';
export type { DrainReport as DrainView, RetireResult as RetireView, RollbackResult as RollbackView, SwapResult as SwapView } from '../rollout/bluegreen.js';

export interface HealthView {
  state: HealthState;
  checked_at: number | null;
  error_rate: number | null;
  p99_latency_ms: number | null;
  healthy_workers: number | null;
  total_workers: number | null;
  detail: string | null;
}

/** The model's shape, as the config writes it (what KV-cache compatibility compares). */
export interface ArchitectureView {
  layers: number;
  kv_heads: number;
  head_dim: number;
  block_size: number;
  max_context: number;
  tokenizer: string;
  family: string | null;
}

export interface VersionView {
  model: string;
  version: string;
  status: VersionStatus;
  /** Its share of the route now; null when it is not in the route. */
  weight: number | null;
  loaded_at: number | null;
  load_time_ms: number | null;
  gpus: string[];
  tp: number;
  replicas: number;
  card_checksum: string;
  weights: string;
  weight_hash: string | null;
  base_model: string;
  quantization: string;
  architecture: ArchitectureView;
  gpu_memory_gb: number;
  warmup_tokens: number;
  provider: string;
  rollback_eligible: boolean;
  rollback_blocked_reason: string | null;
  asleep: boolean;
  health: HealthView;
  failure: { code: string | null; message: string; at: number; from: VersionStatus } | null;
  metadata: Record<string, unknown>;
  registered_at: number;
}

export interface TransitionView {
  from: VersionStatus;
  to: VersionStatus;
  at: number;
  actor: string | null;
  reason: string | null;
}

export interface VersionDetail extends VersionView {
  transitions: TransitionView[];
  /** What its workers are probed against; null before it was recorded. */
  probes: ProbeSetView | null;
  /** Against the active version, when this one is not it. */
  kv_cache_compatibility?: { with: string; compatible: boolean; mismatches: string[] } | undefined;
  window: WindowView;
}

/** A worker's health (src/health/machine.ts), as its state machine has it. */
export interface WorkerHealthView {
  state: WorkerHealthState;
  breaker: BreakerState;
  /** When it entered its state, epoch ms. */
  since: number;
  /** Failed probes since it was last healthy; failed requests in a row. */
  failures: number;
  traffic_failures: number;
  failed_recoveries: number;
  /** Open breaker: when half-open probes may start. */
  open_until: number | null;
  /** Half-open trial: real requests still to succeed. */
  trial_left: number;
  baseline_ms: number | null;
  corrupt: boolean;
  last_failure: { reason: string; detail: string; at: number; source: string } | null;
}

export interface WorkerView {
  id: string;
  model: string;
  version: string;
  endpoint: string;
  provider: string;
  pid: number | null;
  state: string;
  /** `spare`: a hot spare, loaded and probed, out of rotation until a worker fails. */
  role: 'serving' | 'spare';
  gpus: string[];
  routable: boolean;
  /** The routing weight its health gives it (1 healthy, 0.5 suspicious, 0 out); null when not in the data plane. */
  weight: number | null;
  outstanding: number;
  ejected_until: number | null;
  started_at: number;
  log_file: string | null;
  /** null when health is off for its model or it was never judged. */
  health: WorkerHealthView | null;
}

/** A version's probe set (docs/health.md): what a healthy worker answers. */
export interface ProbeSetView {
  basis: ProbeBasis;
  recorded_at: number;
  from: string[];
  pinned: boolean;
  probes: { prompt: string; max_tokens: number; tokens: string[]; logprobs: { min: number; max: number }[] | null }[];
  skipped: { prompt: string; why: string }[];
}

export interface AuditView {
  id: number;
  at: number;
  actor: string;
  action: string;
  target: string | null;
  params: unknown;
  result: 'ok' | 'error';
  error_code: string | null;
  duration_ms: number | null;
}

// ---- telemetry windows and the system at a glance ----------------------------------------------

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

export interface StatusModelView {
  model: string;
  priority: Priority;
  active: string | null;
  /** The rollback target (a loaded standby that is eligible). */
  standby: string | null;
  /** Every loaded standby, with why it is not a rollback target when it is blocked. */
  standbys: { version: string; rollback_eligible: boolean; blocked_reason: string | null }[];
  /** `weights` is keyed by version id. */
  route: {
    revision: number;
    stable: string;
    weights: Record<string, number>;
    shares: { version: string; configured: number; actual: number; count: number }[];
  } | null;
  holding: boolean;
  versions: {
    version: string;
    status: VersionStatus;
    asleep: boolean;
    window: WindowView;
    /** Serving workers that take traffic, of how many; hot spares ready, of how many wanted. */
    workers: { up: number; serving: number; spares_ready: number; spares_wanted: number };
  }[];
}

export interface StatusView {
  ready: { ready: boolean; problems: string[] };
  models: StatusModelView[];
  gpus: { total: number; free: number };
}

// ---- the GPUs and the route --------------------------------------------------------------------

/** GET /gpus: one GPU and who holds it (null: free); `version` and `worker` are ids, as elsewhere. */
export interface GpuEntryView {
  id: string;
  memory_gb: number;
  holder: { model: string; version: string; worker: string | null } | null;
}

/** A version's weight in the route (`configured`) and its share of the requests counted since (`actual`). */
export interface RouteShareView {
  version: string;
  configured: number;
  actual: number;
  count: number;
}

/** The route in force (GET …/route); `weights` is keyed by version id, `overrides` by category. */
export interface RouteView {
  model: string;
  revision: number;
  weights: Record<string, number>;
  stable: string;
  overrides: Record<string, string>;
  /** null: the config's `gateway.sticky_salt`. */
  sticky_salt: string | null;
  shadow: { version: string; share: number } | null;
  shares: RouteShareView[];
}

/** PUT …/route: the route published, and how long the data plane's switch took. */
export interface RouteChangeView extends Omit<RouteView, 'shares'> {
  switch_ms: number;
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

// ---- canary ------------------------------------------------------------------------------------

/** A canary as it is kept (src/rollout/canary-state.ts), in the API's casing. */
export interface CanaryStateView {
  kind: 'canary';
  id: string;
  model: string;
  stable: string;
  canary: string;
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
  rollback: CanaryRollbackView | null;
  /** The rollout loaded the canary itself (so it unloads it on rollback). */
  loaded_by_rollout: boolean;
  actor: string;
  message: string | null;
  shadow_share: number;
  /** While `rolling_back`: why, and the phase it ends in. */
  rollback_reason: string | null;
  rollback_to: 'rolled_back' | 'aborted' | null;
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
