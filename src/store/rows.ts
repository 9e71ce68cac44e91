// Row ↔ record mapping for the SQLite store: the only place that knows column names and JSON columns.
import type { Role, VersionConfig } from '../config/types.js';
import type { ActivePeriod, HealthSummary, Version, VersionFailure, VersionStatus, VersionTransition } from '../domain/version.js';
import { versionSpec } from '../domain/version.js';
import type { ProbeSet } from '../domain/probes.js';
import type { AuditEntry, GpuAssignment, RolloutEvent, RolloutRecord, TokenRecord, WorkerRecord } from './types.js';

export function json(v: unknown): string {
  return JSON.stringify(v ?? null);
}

export function parse<T>(s: string | null | undefined): T | undefined {
  if (s === null || s === undefined) return undefined;
  return JSON.parse(s) as T;
}

function opt<T>(v: T | null): T | undefined {
  return v === null ? undefined : v;
}

// ---- versions ---------------------------------------------------------------------------------------

export interface VersionRow {
  model: string;
  id: string;
  status: string;
  card_checksum: string;
  weight_hash: string | null;
  base_model: string;
  quantization: string;
  tp: number;
  spec: string;
  warmup_tokens: number;
  registered_at: number;
  updated_at: number;
  loaded_at: number | null;
  load_time_ms: number | null;
  activated_at: number | null;
  deactivated_at: number | null;
  gpus: string;
  health: string;
  rollback_eligible: number;
  rollback_blocked: string | null;
  failure: string | null;
  probes: string | null;
}

export function versionToRow(v: Version): VersionRow {
  return {
    model: v.model,
    id: v.id,
    status: v.status,
    card_checksum: v.cardChecksum,
    weight_hash: v.weightHash ?? null,
    base_model: v.baseModel,
    quantization: v.quantization,
    tp: v.tp,
    spec: json(versionSpec(v)),
    warmup_tokens: v.warmupTokens,
    registered_at: v.registeredAt,
    updated_at: v.updatedAt,
    loaded_at: v.loadedAt ?? null,
    load_time_ms: v.loadTimeMs ?? null,
    activated_at: v.activatedAt ?? null,
    deactivated_at: v.deactivatedAt ?? null,
    gpus: json(v.gpus),
    health: json(v.health),
    rollback_eligible: v.rollbackEligible ? 1 : 0,
    rollback_blocked: v.rollbackBlockedReason ?? null,
    failure: v.failure ? json(v.failure) : null,
    probes: v.probes ? json(v.probes) : null,
  };
}

export function rowToVersion(r: VersionRow): Version {
  const spec = parse<VersionConfig>(r.spec) as VersionConfig;
  const v: Version = {
    ...spec,
    // the indexed columns are authoritative over the spec copy
    model: r.model,
    id: r.id,
    status: r.status as VersionStatus,
    registeredAt: r.registered_at,
    updatedAt: r.updated_at,
    warmupTokens: r.warmup_tokens,
    gpus: parse<string[]>(r.gpus) ?? [],
    health: parse<HealthSummary>(r.health) ?? { state: 'unknown' },
    rollbackEligible: r.rollback_eligible === 1,
  };
  if (r.loaded_at !== null) v.loadedAt = r.loaded_at;
  if (r.load_time_ms !== null) v.loadTimeMs = r.load_time_ms;
  if (r.activated_at !== null) v.activatedAt = r.activated_at;
  if (r.deactivated_at !== null) v.deactivatedAt = r.deactivated_at;
  if (r.rollback_blocked !== null) v.rollbackBlockedReason = r.rollback_blocked;
  if (r.failure !== null) v.failure = parse<VersionFailure>(r.failure);
  if (r.probes !== null) v.probes = parse<ProbeSet>(r.probes);
  return v;
}

export interface TransitionRow {
  model: string;
  version_id: string;
  from_status: string;
  to_status: string;
  at: number;
  actor: string | null;
  reason: string | null;
}

export function rowToTransition(r: TransitionRow): VersionTransition {
  return {
    model: r.model,
    versionId: r.version_id,
    from: r.from_status as VersionStatus,
    to: r.to_status as VersionStatus,
    at: r.at,
    actor: opt(r.actor),
    reason: opt(r.reason),
  };
}

export interface ActiveRow {
  model: string;
  version_id: string;
  since: number;
  until: number | null;
  actor: string | null;
  reason: string | null;
}

export function rowToActive(r: ActiveRow): ActivePeriod {
  return {
    model: r.model,
    versionId: r.version_id,
    since: r.since,
    until: opt(r.until),
    actor: opt(r.actor),
    reason: opt(r.reason),
  };
}

// ---- rollouts -----------------------------------------------------------------------------------------

export interface RolloutRow {
  id: string;
  model: string;
  phase: string;
  terminal: number;
  revision: number;
  state: string;
  created_at: number;
  updated_at: number;
}

export function rowToRollout(r: RolloutRow): RolloutRecord {
  return {
    id: r.id,
    model: r.model,
    phase: r.phase,
    state: parse<unknown>(r.state) ?? null,
    terminal: r.terminal === 1,
    revision: r.revision,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export interface RolloutEventRow {
  seq: number;
  rollout_id: string;
  at: number;
  kind: string;
  message: string | null;
  data: string | null;
}

export function rowToRolloutEvent(r: RolloutEventRow): RolloutEvent {
  const e: RolloutEvent = { seq: r.seq, rolloutId: r.rollout_id, at: r.at, kind: r.kind };
  if (r.message !== null) e.message = r.message;
  if (r.data !== null) e.data = parse<unknown>(r.data);
  return e;
}

// ---- fleet --------------------------------------------------------------------------------------------

export interface GpuRow {
  gpu_id: string;
  model: string;
  version_id: string;
  worker_id: string | null;
  assigned_at: number;
}

export function rowToGpu(r: GpuRow): GpuAssignment {
  return { gpuId: r.gpu_id, model: r.model, versionId: r.version_id, workerId: opt(r.worker_id), assignedAt: r.assigned_at };
}

export interface WorkerRow {
  id: string;
  model: string;
  version_id: string;
  endpoint: string;
  provider: string;
  pid: number | null;
  state: string;
  gpus: string;
  started_at: number;
  updated_at: number;
  info: string | null;
  role: string;
  health: string | null;
}

export function workerToRow(w: WorkerRecord): WorkerRow {
  return {
    id: w.id,
    model: w.model,
    version_id: w.versionId,
    endpoint: w.endpoint,
    provider: w.provider,
    pid: w.pid ?? null,
    state: w.state,
    gpus: json(w.gpus),
    started_at: w.startedAt,
    updated_at: w.updatedAt,
    info: w.info === undefined ? null : json(w.info),
    role: w.role ?? 'serving',
    health: w.health === undefined ? null : json(w.health),
  };
}

export function rowToWorker(r: WorkerRow): WorkerRecord {
  const w: WorkerRecord = {
    id: r.id,
    model: r.model,
    versionId: r.version_id,
    endpoint: r.endpoint,
    provider: r.provider,
    state: r.state,
    gpus: parse<string[]>(r.gpus) ?? [],
    startedAt: r.started_at,
    updatedAt: r.updated_at,
  };
  if (r.pid !== null) w.pid = r.pid;
  if (r.info !== null) w.info = parse<Record<string, unknown>>(r.info);
  if (r.role === 'spare') w.role = 'spare';
  if (r.health !== null) w.health = parse<unknown>(r.health);
  return w;
}

// ---- audit, tokens ------------------------------------------------------------------------------------

export interface AuditRow {
  id: number;
  at: number;
  actor: string;
  action: string;
  target: string | null;
  params: string | null;
  result: string;
  error_code: string | null;
  duration_ms: number | null;
}

export function rowToAudit(r: AuditRow): AuditEntry {
  const e: AuditEntry = { id: r.id, at: r.at, actor: r.actor, action: r.action, result: r.result as 'ok' | 'error' };
  if (r.target !== null) e.target = r.target;
  if (r.params !== null) e.params = parse<unknown>(r.params);
  if (r.error_code !== null) e.errorCode = r.error_code;
  if (r.duration_ms !== null) e.durationMs = r.duration_ms;
  return e;
}

export interface TokenRow {
  name: string;
  role: string;
  sha256: string;
  created_at: number;
  source: string;
}

export function rowToToken(r: TokenRow): TokenRecord {
  return {
    name: r.name,
    role: r.role as Role,
    sha256: r.sha256,
    createdAt: r.created_at,
    source: r.source as TokenRecord['source'],
  };
}
