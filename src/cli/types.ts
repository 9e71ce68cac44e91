// The admin API's JSON shapes as the CLI reads them (src/api/views.ts and src/rollout/bluegreen.ts write them).
import type { Architecture } from '../domain/card.js';

export interface VersionView {
  model: string;
  version: string;
  status: string;
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
  architecture: Architecture;
  gpu_memory_gb: number;
  warmup_tokens: number;
  provider: string;
  rollback_eligible: boolean;
  rollback_blocked_reason: string | null;
  asleep: boolean;
  health: { state: string; detail?: string };
  failure: { message: string; code?: string } | null;
  metadata: Record<string, unknown>;
  registered_at: number;
}

export interface VersionDetail extends VersionView {
  transitions: { from: string; to: string; at: number; actor?: string; reason?: string }[];
  kv_cache_compatibility?: { with: string; compatible: boolean; mismatches: string[] };
}

export interface DrainView {
  drained: number;
  aborted: number;
  elapsed_ms: number;
}

export interface SwapView {
  model: string;
  from?: string;
  to: string;
  mode: string;
  switch_ms: number;
  held_ms?: number;
  drain?: DrainView;
  standby: string;
  total_ms: number;
}

export interface RollbackView {
  model: string;
  rolled_back_to: string;
  rolled_back_from?: string;
  elapsed_ms: number;
  wake_ms: number;
  total_ms: number;
  method: string;
}

export interface RetireView {
  model: string;
  version: string;
  freed_gpus: number;
  drain?: DrainView;
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
  target?: string;
  params?: unknown;
  result: 'ok' | 'error';
  errorCode?: string;
  durationMs?: number;
}
