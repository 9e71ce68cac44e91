// The persistence seam: everything that must survive a restart goes through one `Store`.
//
// Every method is synchronous (better-sqlite3 is). A call costs microseconds to a few milliseconds
// (an fsync on commit at most, with WAL + synchronous=NORMAL usually none), so callers on the hot
// path must not call the store: the gateway never does; it serves from in-memory route snapshots
// that the control plane built from the store.
//
// Errors: ConflictError / NotFoundError / BadRequestError with stable codes (see each method);
// UnavailableError `store_*` when the database cannot be opened or used.
import type { Role } from '../config/types.js';
import type { ActivePeriod, Version, VersionStatus, VersionTransition } from '../domain/version.js';

// ---- routes ---------------------------------------------------------------------------------------

/**
 * A route as the store sees it: an opaque JSON-serialisable object keyed by model, with a revision
 * that only grows. Its shape belongs to the gateway (src/gateway); the store only keeps it whole.
 */
export interface StoredRoute {
  model: string;
  revision: number;
  [key: string]: unknown;
}

// ---- rollouts -------------------------------------------------------------------------------------

/** Phases after which a rollout is over (issue 5's names); any other phase counts as active. */
export const TERMINAL_ROLLOUT_PHASES: readonly string[] = ['succeeded', 'rolled_back', 'aborted', 'failed'];

export interface RolloutRecord {
  id: string;
  model: string;
  /** Free-form phase name (src/rollout owns the vocabulary). */
  phase: string;
  /** The strategy's persisted state: any JSON value. */
  state: unknown;
  /** True once the rollout is over; derived from TERMINAL_ROLLOUT_PHASES unless given on put. */
  terminal: boolean;
  /** Grows by one on every put. */
  revision: number;
  createdAt: number;
  updatedAt: number;
}

export interface RolloutInput {
  id: string;
  model: string;
  phase: string;
  state: unknown;
  /** Override the terminal-phase rule (e.g. for a phase name not in TERMINAL_ROLLOUT_PHASES). */
  terminal?: boolean | undefined;
}

export interface RolloutEvent {
  /** Global sequence number, increasing. */
  seq: number;
  rolloutId: string;
  at: number;
  kind: string;
  message?: string | undefined;
  data?: unknown;
}

export type RolloutEventInput = Omit<RolloutEvent, 'seq'>;

// ---- fleet ----------------------------------------------------------------------------------------

export interface GpuAssignment {
  gpuId: string;
  model: string;
  versionId: string;
  workerId?: string | undefined;
  assignedAt: number;
}

/** A worker the control plane started or adopted, so a restarted process knows what to bring back. */
export interface WorkerRecord {
  id: string;
  model: string;
  versionId: string;
  endpoint: string;
  /** Provider kind: sim | static | process | … */
  provider: string;
  pid?: number | undefined;
  /** Free-form lifecycle state owned by src/providers / src/health (e.g. starting, ready, sleeping, stopped). */
  state: string;
  gpus: string[];
  startedAt: number;
  updatedAt: number;
  /** Provider-specific extras (log file, port, sleep level, …): JSON. */
  info?: Record<string, unknown> | undefined;
}

export interface WorkerFilter {
  model?: string | undefined;
  versionId?: string | undefined;
  state?: string | undefined;
}

// ---- audit ----------------------------------------------------------------------------------------

export interface AuditEntry {
  id: number;
  at: number;
  /** Token name, or `controller` / `config` / `cli` for automatic changes. */
  actor: string;
  action: string;
  target?: string | undefined;
  params?: unknown;
  result: 'ok' | 'error';
  errorCode?: string | undefined;
  durationMs?: number | undefined;
}

export type AuditInput = Omit<AuditEntry, 'id'>;

export interface AuditQuery {
  /** Inclusive epoch ms. */
  since?: number | undefined;
  /** Exclusive epoch ms. */
  until?: number | undefined;
  actor?: string | undefined;
  action?: string | undefined;
  target?: string | undefined;
  result?: 'ok' | 'error' | undefined;
  /** Default DEFAULTS.store.auditQueryLimit, capped at DEFAULTS.store.auditQueryMaxLimit. */
  limit?: number | undefined;
  /** Only entries with id < before (paging newest → oldest). */
  beforeId?: number | undefined;
}

// ---- tokens ---------------------------------------------------------------------------------------

export interface TokenRecord {
  name: string;
  role: Role;
  /** hex SHA-256 of the token; plaintext is never stored. */
  sha256: string;
  createdAt: number;
  /** Where it came from: `config` tokens are re-synced at start; `generated` is the bootstrap admin token. */
  source: 'config' | 'generated' | 'api';
}

// ---- versions -------------------------------------------------------------------------------------

export interface VersionFilter {
  model?: string | undefined;
  status?: readonly VersionStatus[] | undefined;
}

export interface ActivationInput {
  model: string;
  versionId: string;
  at: number;
  actor?: string | undefined;
  reason?: string | undefined;
}

// ---- the store ------------------------------------------------------------------------------------

export interface Store {
  /** File path, or `:memory:`. */
  readonly location: string;
  /** Highest applied migration. */
  schemaVersion(): number;
  /**
   * Run `fn` in one write transaction (BEGIN IMMEDIATE, so two processes never deadlock upgrading a
   * read lock). Nested calls join as savepoints. `fn` must be synchronous; a throw rolls back.
   */
  tx<T>(fn: () => T): T;
  close(): void;

  // versions: identity is (model, id)
  getVersion(model: string, id: string): Version | undefined;
  /** Ordered by model, then registration time, then id. */
  listVersions(filter?: VersionFilter): Version[];
  /** ConflictError `version_exists` if (model, id) is known. */
  insertVersion(v: Version): void;
  /** Replace the whole record. NotFoundError `version_not_found`; ConflictError `active_exists` when a second version of a model would be active. */
  updateVersion(v: Version): void;
  appendVersionTransition(t: VersionTransition): void;
  /** Oldest first. */
  versionTransitions(model: string, id: string): VersionTransition[];

  /** Closes the model's open active period (if any) at `at` and opens one for `versionId`. */
  recordActivation(a: ActivationInput): void;
  /** Closes the open period of `versionId` (no-op if it is not open). */
  recordDeactivation(model: string, versionId: string, at: number): void;
  /** Newest first. */
  activeHistory(model: string, limit?: number): ActivePeriod[];

  // routes
  getRoute(model: string): StoredRoute | undefined;
  listRoutes(): StoredRoute[];
  /**
   * Compare-and-set: written only if the stored revision equals `expectedRevision` (0 = no route yet)
   * and `route.revision > expectedRevision` (BadRequestError `route_revision_invalid` otherwise).
   * ConflictError `route_conflict` (details: model, expected, actual) when someone else wrote first.
   */
  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): R;
  /** Returns whether a route was deleted. */
  deleteRoute(model: string): boolean;

  // rollouts
  getRollout(id: string): RolloutRecord | undefined;
  /**
   * Insert or update. With `expectedRevision` it is a compare-and-set (ConflictError `rollout_conflict`).
   * At most one non-terminal rollout per model: ConflictError `rollout_in_progress` otherwise.
   */
  putRollout(r: RolloutInput, at: number, expectedRevision?: number): RolloutRecord;
  /** Non-terminal rollouts, oldest first (the controller resumes these after a restart). */
  listActiveRollouts(): RolloutRecord[];
  /** Newest first. */
  listRollouts(filter?: { model?: string | undefined; limit?: number | undefined }): RolloutRecord[];
  /** NotFoundError `rollout_not_found` if the rollout is unknown. */
  appendRolloutEvent(e: RolloutEventInput): RolloutEvent;
  /** Oldest first; `afterSeq` for tailing. */
  rolloutEvents(rolloutId: string, opts?: { afterSeq?: number | undefined; limit?: number | undefined }): RolloutEvent[];

  // GPU assignments
  /** All-or-nothing; ConflictError `gpu_in_use` naming the GPU and its holder if any is held by another version/worker. */
  assignGpus(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string | undefined }, at: number): GpuAssignment[];
  /** Releases the given GPUs; returns how many were held. */
  releaseGpus(gpuIds: readonly string[]): number;
  /** Releases every GPU held by the version (or only by one of its workers). */
  releaseGpusOf(model: string, versionId: string, workerId?: string): number;
  listGpuAssignments(): GpuAssignment[];

  // workers
  upsertWorker(w: WorkerRecord): void;
  getWorker(id: string): WorkerRecord | undefined;
  listWorkers(filter?: WorkerFilter): WorkerRecord[];
  deleteWorker(id: string): boolean;

  // audit
  appendAudit(e: AuditInput): AuditEntry;
  /** Newest first. */
  queryAudit(q?: AuditQuery): AuditEntry[];
  /** Deletes entries older than `before`; returns how many. */
  pruneAudit(before: number): number;

  // tokens
  /** Insert or replace by name. ConflictError `token_hash_exists` if another name has the same hash. */
  putToken(t: TokenRecord): void;
  getToken(name: string): TokenRecord | undefined;
  listTokens(): TokenRecord[];
  deleteToken(name: string): boolean;

  // settings: small JSON values by key
  getSetting<T = unknown>(key: string): T | undefined;
  setSetting(key: string, value: unknown, at: number): void;
  deleteSetting(key: string): boolean;
}
