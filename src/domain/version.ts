// Model versions: the record the registry keeps per version and the pure rules of its lifecycle.
//
// No I/O, no clock: every function takes `now` so the rules are testable without a store. What a
// version is registered with (VersionConfig) is in spec.ts.
import type { ProbeSet } from './probes.js';
import type { VersionConfig } from './spec.js';

export type VersionStatus = 'registered' | 'loading' | 'ready' | 'active' | 'standby' | 'retired' | 'failed';

export const VERSION_STATUSES: readonly VersionStatus[] = ['registered', 'loading', 'ready', 'active', 'standby', 'retired', 'failed'];

/**
 * Every legal status change, and why it exists. Anything not listed is refused with
 * `illegal_transition` naming both states. Self-transitions are never legal: use a patch to change
 * fields without changing the status.
 *
 *   registered → loading → ready → active ⇄ standby → retired     (the happy path and swap/rollback)
 *   loading → failed → loading (retry)      ready → standby (warm spare)      retired → loading (re-deploy)
 * The table below is the authority; docs/store.md has it as a list.
 */
export const TRANSITIONS: Readonly<Record<VersionStatus, readonly VersionStatus[]>> = {
  // loading: deploy starts; retired: registered by mistake, never loaded.
  registered: ['loading', 'retired'],
  // ready: loaded + warmed; failed: load/warm-up error; retired: deploy cancelled by an operator.
  loading: ['ready', 'failed', 'retired'],
  // active: swap/promote; standby: kept loaded (warm spare, canary kept after rollback);
  // retired: unloaded (canary rolled back and unloaded); failed: health probe caught it before use.
  ready: ['active', 'standby', 'retired', 'failed'],
  // standby: swap to another version or rollback away from this one. Never straight to retired:
  // the active version is retired only after something else took over (the "never retire the
  // active one" rule lives in the table, not in every caller).
  active: ['standby'],
  // active: instant rollback; retired: unloaded to free GPUs; failed: its workers died or a probe
  // caught corruption (it can no longer be a rollback target).
  standby: ['active', 'retired', 'failed'],
  // loading: retry after a failure; retired: give up.
  failed: ['loading', 'retired'],
  // loading: re-deploy a retired version (it is still registered; weights may be cached).
  retired: ['loading'],
};

/** Statuses in which the version's weights are on GPUs (its workers exist). */
export const LOADED_STATUSES: readonly VersionStatus[] = ['ready', 'active', 'standby'];

export type HealthState = 'unknown' | 'healthy' | 'degraded' | 'unhealthy';

/** The last health verdict the control plane recorded for a version (from probes and windows). */
export interface HealthSummary {
  state: HealthState;
  checkedAt?: number | undefined;
  errorRate?: number | undefined;
  p50LatencyMs?: number | undefined;
  p99LatencyMs?: number | undefined;
  p99TtftMs?: number | undefined;
  p99TpotMs?: number | undefined;
  healthyWorkers?: number | undefined;
  totalWorkers?: number | undefined;
  detail?: string | undefined;
}

export interface VersionFailure {
  at: number;
  /** Status the version was in when it failed (usually `loading`). */
  from: VersionStatus;
  code?: string | undefined;
  message: string;
}

/**
 * One version of one model. Identity is (model, id): two models may both have a `v2`.
 * The VersionConfig fields are what it was registered with (immutable, except the operational ones a
 * restart may refresh from the config: provider, replicas, warmup, metadata); the rest is lifecycle.
 */
export interface Version extends VersionConfig {
  status: VersionStatus;
  /** Epoch ms. */
  registeredAt: number;
  /** Epoch ms of the last change of any field. */
  updatedAt: number;
  /** When it last became ready (weights loaded and warmed). */
  loadedAt?: number | undefined;
  /** Measured wall time of the last load, start → ready, ms. */
  loadTimeMs?: number | undefined;
  /** Tokens generated to warm the version up (seed 001's warmup_tokens): requests × max tokens. */
  warmupTokens: number;
  /** When it last became active / stopped being active. */
  activatedAt?: number | undefined;
  deactivatedAt?: number | undefined;
  /** GPU ids holding its weights (summary; the store's GPU assignments are the source of truth). */
  gpus: string[];
  health: HealthSummary;
  /** Derived by `rollbackEligible` on every change; stored so lists can show it. */
  rollbackEligible: boolean;
  /** Set when a version must not be rolled back to (e.g. the canary that was just rolled back). */
  rollbackBlockedReason?: string | undefined;
  failure?: VersionFailure | undefined;
  /** What a healthy worker of this version answers to the health probes (recorded at its first load). */
  probes?: ProbeSet | undefined;
}

/** Fields a caller may change, with or without a status change. */
export interface VersionPatch {
  loadTimeMs?: number | undefined;
  gpus?: readonly string[] | undefined;
  health?: HealthSummary | undefined;
  /** Merged into the existing metadata; a key set to `undefined` is removed. */
  metadata?: Record<string, unknown> | undefined;
  /** `null` clears the block. */
  rollbackBlockedReason?: string | null | undefined;
  /** Only meaningful with a transition to `failed`. */
  failure?: { code?: string | undefined; message: string } | undefined;
  /** The version's probe set; `null` forgets it (the next load records it anew). */
  probes?: ProbeSet | null | undefined;
}

/**
 * The error the pure rules raise (domain imports nothing of ours, so not a GlidepathError); the
 * registry maps it to ConflictError (409, `illegal_transition`) / BadRequestError (400, `invalid_patch`).
 */
export class VersionRuleError extends Error {
  readonly status: 409 | 400;
  constructor(
    readonly code: 'illegal_transition' | 'invalid_patch',
    message: string,
    readonly from?: VersionStatus,
    readonly to?: VersionStatus,
  ) {
    super(message);
    this.name = 'VersionRuleError';
    this.status = code === 'illegal_transition' ? 409 : 400;
  }
}

export function canTransition(from: VersionStatus, to: VersionStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Takes any status string so API views (the CLI's) can ask too. */
export function isLoaded(v: { status: string }): boolean {
  return (LOADED_STATUSES as readonly string[]).includes(v.status);
}

/**
 * Can traffic be sent back to this version in one route swap? It must be standby (loaded), have
 * served as active before (otherwise it is a forward move, not a rollback), not be blocked, and not
 * be known unhealthy.
 */
export function rollbackEligible(v: Pick<Version, 'status' | 'activatedAt' | 'rollbackBlockedReason' | 'health'>): boolean {
  return v.status === 'standby' && v.activatedAt !== undefined && v.rollbackBlockedReason === undefined && v.health.state !== 'unhealthy';
}

/** Seed 001's warmup_tokens: requests × max tokens. */
export function warmupTokens(c: Pick<VersionConfig, 'warmup'>): number {
  return c.warmup.requests * c.warmup.maxTokens;
}

/** The VersionConfig part of a version: what it was registered with. */
export function versionSpec(v: Version): VersionConfig {
  const spec: VersionConfig = {
    id: v.id,
    model: v.model,
    weights: v.weights,
    weightHash: v.weightHash,
    baseModel: v.baseModel,
    quantization: v.quantization,
    tp: v.tp,
    gpuMemoryGb: v.gpuMemoryGb,
    architecture: v.architecture,
    engine: v.engine,
    cardChecksum: v.cardChecksum,
    replicas: v.replicas,
    roles: v.roles,
    provider: v.provider,
    warmup: v.warmup,
    metadata: v.metadata,
    spares: v.spares,
    probeReference: v.probeReference,
  };
  return spec;
}

/** A freshly registered version from its config. Deep-copies so the frozen config is never aliased. */
export function fromConfig(c: VersionConfig, now: number): Version {
  const copy = structuredClone<VersionConfig>(c);
  const v: Version = {
    ...copy,
    status: 'registered',
    registeredAt: now,
    updatedAt: now,
    warmupTokens: warmupTokens(c),
    gpus: [],
    health: { state: 'unknown' },
    rollbackEligible: false,
  };
  return v;
}

/** Apply a patch without a status change. Returns a new record. */
export function applyPatch(v: Version, patch: VersionPatch, now: number): Version {
  const next: Version = { ...v, updatedAt: now };
  if (patch.loadTimeMs !== undefined) {
    if (!Number.isFinite(patch.loadTimeMs) || patch.loadTimeMs < 0) {
      throw new VersionRuleError('invalid_patch', `loadTimeMs must be a non-negative number, got ${patch.loadTimeMs}`);
    }
    next.loadTimeMs = patch.loadTimeMs;
  }
  if (patch.gpus !== undefined) next.gpus = [...patch.gpus];
  if (patch.health !== undefined) next.health = { ...patch.health };
  if (patch.metadata !== undefined) {
    const md: Record<string, unknown> = { ...v.metadata };
    for (const [k, val] of Object.entries(patch.metadata)) {
      if (val === undefined) delete md[k];
      else md[k] = val;
    }
    next.metadata = md;
  }
  if (patch.rollbackBlockedReason === null) next.rollbackBlockedReason = undefined;
  else if (patch.rollbackBlockedReason !== undefined) next.rollbackBlockedReason = patch.rollbackBlockedReason;
  if (patch.failure !== undefined) {
    next.failure = { at: now, from: v.status, code: patch.failure.code, message: patch.failure.message };
  }
  if (patch.probes === null) next.probes = undefined;
  else if (patch.probes !== undefined) next.probes = structuredClone(patch.probes);
  next.rollbackEligible = rollbackEligible(next);
  return next;
}

/**
 * Move a version to `to`, refusing illegal moves with an error that names both states. Side effects
 * on the record (all derived from the transition, so every caller gets them alike):
 * - → ready: `loadedAt = now`, health reset to unknown (the new workers have not been judged yet);
 * - → active: `activatedAt = now`, rollback block cleared; leaving active: `deactivatedAt = now`;
 * - → retired / failed: GPUs released (`gpus = []`);
 * - → failed: `failure` recorded (from the patch's `failure`, or a generic message);
 * - → loading: a previous failure is cleared;
 * - `rollbackEligible` recomputed.
 * The patch is applied after those, so a caller can set e.g. `loadTimeMs` and `gpus` with → ready.
 */
export function transition(v: Version, to: VersionStatus, now: number, patch: VersionPatch = {}): Version {
  const from = v.status;
  if (!canTransition(from, to)) {
    const legal = TRANSITIONS[from];
    throw new VersionRuleError(
      'illegal_transition',
      `version ${v.model}/${v.id}: illegal transition ${from} → ${to}` + (legal.length ? ` (from ${from} only ${legal.join(', ')})` : ''),
      from,
      to,
    );
  }
  let next: Version = { ...v, status: to, updatedAt: now };
  if (to === 'ready') {
    next.loadedAt = now;
    next.health = { state: 'unknown' };
  }
  if (to === 'active') {
    next.activatedAt = now;
    // becoming active again is a deliberate decision that supersedes an earlier rollback block
    next.rollbackBlockedReason = undefined;
  }
  if (from === 'active') next.deactivatedAt = now;
  if (to === 'retired' || to === 'failed') next.gpus = [];
  if (to === 'loading') next.failure = undefined;
  if (to === 'failed') {
    next.failure = {
      at: now,
      from,
      code: patch.failure?.code,
      message: patch.failure?.message ?? `failed while ${from}`,
    };
  }
  const { failure: _ignored, ...rest } = patch;
  next = applyPatch(next, rest, now);
  return next;
}

/** One period during which a version was the model's active version. */
export interface ActivePeriod {
  model: string;
  versionId: string;
  /** Epoch ms it became active. */
  since: number;
  /** Epoch ms it stopped being active; undefined while it still is. */
  until?: number | undefined;
  /** Who made it active (token name / `controller` / `config`). */
  actor?: string | undefined;
  reason?: string | undefined;
}

/** One recorded status change of one version. */
export interface VersionTransition {
  model: string;
  versionId: string;
  from: VersionStatus;
  to: VersionStatus;
  at: number;
  actor?: string | undefined;
  reason?: string | undefined;
}
