// The admin API's response bodies, declared once: the API's views return these types (the compiler
// checks what is sent) and the CLI reads them (`import type`, no runtime edge). Every field is
// snake_case (docs/admin-api.md). Declared where they are made and re-exported here: the blue-green
// results (the strategy's own types), and the canary's verdicts and rollback and the cache download,
// which their notifications and events send too (rollout/ and fleet/ may not import api/).
import type { Priority } from '../config/types.js';
import type { ProbeBasis } from '../domain/probes.js';
import type { HealthState, VersionStatus } from '../domain/version.js';
import type { BreakerState, WorkerHealthState } from '../health/machine.js';
import type { AdapterCanaryStateView } from '../rollout/adapter-canary-views.js';

export type {
  CanaryCheckView,
  CanaryMetricView,
  CanaryNoticeView,
  CanaryRollbackView,
  CanaryVerdictView,
  VersionSummaryView,
} from '../rollout/canary-views.js';
export type { AdapterCanaryStateView, AdapterSideView } from '../rollout/adapter-canary-views.js';
export type { CacheResultView } from '../fleet/cache.js';
export type { DrainReport as DrainView, RetireResult as RetireView, RollbackResult as RollbackView, SwapResult as SwapView } from '../rollout/bluegreen.js';
export type { StopStartResult as StopStartView } from '../rollout/stop-start.js';
export type { RollingRoleView, RollingView } from './routes/rolling.js';

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

export type * from './rollout-types.js';
import type { WindowView } from './rollout-types.js';

/** One routed worker's part of its model's capacity (GET /models/:model/capacity; docs/resilience.md). */
export interface WorkerCapacityView {
  version: string;
  worker: string;
  /** Its health weight (at most 1): what share of its capacity counts. */
  weight: number;
  /** What it is worth now (completion tokens/s): learned from its engine's metrics, else the configured worth. */
  capacity_tokens_per_s: number;
  /** Whether its engine's metrics were read at the last try. */
  measured: boolean;
  /** From its engine's metrics at the last read (null: not read, or not exported). */
  tokens_per_s: number | null;
  running: number | null;
  waiting: number | null;
  kv_usage: number | null;
  saturated: boolean | null;
  measured_at: number | null;
  /** Why the last read failed. */
  error: string | null;
  /** Its request slots in the gateway: all of them, those below the top tier may fill, in flight, waiting. */
  slots: { limit: number; shared: number; busy: number; queued: number };
}

export interface CapacityView {
  model: string;
  /** 0–4 (docs/resilience.md); null when the model has no degradation configured. */
  level: number | null;
  /** Healthy capacity over what the model must serve. */
  ratio: number | null;
  required_tokens_per_s: number | null;
  capacity_tokens_per_s: number | null;
  workers: WorkerCapacityView[];
}

/** An adapter's canary (`/models/:model/adapters/:name/canary`): the state, and the samples each side is judged on while it runs. */
export interface AdapterCanaryView extends AdapterCanaryStateView {
  samples: { stable: number; canary: number; min_samples: number } | null;
}
