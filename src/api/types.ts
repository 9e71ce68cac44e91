// The admin API's response bodies, declared once: the API's views return these types (the compiler
// checks what is sent) and the CLI reads them (`import type`, no runtime edge). Every field is
// snake_case (docs/admin-api.md); the blue-green results are the strategy's own types.
import type { HealthState, VersionStatus } from '../domain/version.js';

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
  /** Against the active version, when this one is not it. */
  kv_cache_compatibility?: { with: string; compatible: boolean; mismatches: string[] } | undefined;
}

export interface WorkerView {
  id: string;
  model: string;
  version: string;
  endpoint: string;
  provider: string;
  pid: number | null;
  state: string;
  gpus: string[];
  routable: boolean;
  outstanding: number;
  ejected_until: number | null;
  started_at: number;
  log_file: string | null;
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
