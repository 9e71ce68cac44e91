// The persistence seam: everything that must survive a restart goes through one `Store`.
//
// Asynchronous, so that a networked store (etcd, issue 18) implements the same seam as the embedded
// SQLite file: every method returns a Promise, and `tx` runs an async function atomically. The
// SQLite implementation answers at once (better-sqlite3 is synchronous underneath) but still keeps
// the rules a networked store needs: callers await, and atomic read-check-write goes through `tx`.
// The hot path never calls the store: the gateway serves from in-memory route snapshots that the
// control plane built from it.
//
// Errors: ConflictError / NotFoundError / BadRequestError with stable codes (see each method);
// UnavailableError `store_*` when the store cannot be reached or used. docs/store.md has the whole
// contract; test/helpers/store-contract.ts checks it against every backend.
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
  /** `spare`: a hot spare, loaded and probed but out of rotation; default `serving`. */
  role?: 'serving' | 'spare' | undefined;
  /** Its health state machine (src/health owns the shape and validates it when read back): JSON. */
  health?: unknown;
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
  /** Where it came from: `config` tokens are re-synced at start; `generated` is the bootstrap admin token; `cluster` the replicas' own (cluster mode). */
  source: 'config' | 'generated' | 'api' | 'cluster';
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

/** The data operations: what a transaction handle offers, and the store outside transactions. */
export interface StoreOps {
  // versions: identity is (model, id)
  getVersion(model: string, id: string): Promise<Version | undefined>;
  /** Ordered by model, then registration time, then id. */
  listVersions(filter?: VersionFilter): Promise<Version[]>;
  /** ConflictError `version_exists` if (model, id) is known. */
  insertVersion(v: Version): Promise<void>;
  /** Replace the whole record. NotFoundError `version_not_found`; ConflictError `active_exists` when a second version of a model would be active. */
  updateVersion(v: Version): Promise<void>;
  appendVersionTransition(t: VersionTransition): Promise<void>;
  /** Oldest first. */
  versionTransitions(model: string, id: string): Promise<VersionTransition[]>;

  /** Closes the model's open active period (if any) at `at` and opens one for `versionId`. */
  recordActivation(a: ActivationInput): Promise<void>;
  /** Closes the open period of `versionId` (no-op if it is not open). */
  recordDeactivation(model: string, versionId: string, at: number): Promise<void>;
  /** Newest first. */
  activeHistory(model: string, limit?: number): Promise<ActivePeriod[]>;

  // routes
  getRoute(model: string): Promise<StoredRoute | undefined>;
  listRoutes(): Promise<StoredRoute[]>;
  /**
   * Compare-and-set: written only if the stored revision equals `expectedRevision` (0 = no route yet)
   * and `route.revision > expectedRevision` (BadRequestError `route_revision_invalid` otherwise).
   * ConflictError `route_conflict` (details: model, expected, actual) when someone else wrote first.
   */
  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): Promise<R>;
  /** Returns whether a route was deleted. */
  deleteRoute(model: string): Promise<boolean>;

  // rollouts
  getRollout(id: string): Promise<RolloutRecord | undefined>;
  /**
   * Insert or update. With `expectedRevision` it is a compare-and-set (ConflictError `rollout_conflict`).
   * At most one non-terminal rollout per model: ConflictError `rollout_in_progress` otherwise.
   */
  putRollout(r: RolloutInput, at: number, expectedRevision?: number): Promise<RolloutRecord>;
  /** Non-terminal rollouts, oldest first (the controller resumes these after a restart). */
  listActiveRollouts(): Promise<RolloutRecord[]>;
  /** Newest first. */
  listRollouts(filter?: { model?: string | undefined; limit?: number | undefined }): Promise<RolloutRecord[]>;
  /** NotFoundError `rollout_not_found` if the rollout is unknown. */
  appendRolloutEvent(e: RolloutEventInput): Promise<RolloutEvent>;
  /** Oldest first; `afterSeq` for tailing. */
  rolloutEvents(rolloutId: string, opts?: { afterSeq?: number | undefined; limit?: number | undefined }): Promise<RolloutEvent[]>;

  // GPU assignments
  /**
   * All-or-nothing; ConflictError `gpu_in_use` naming the GPU and its holder if any is held by another
   * version/worker. The holder is a registered version (NotFoundError `version_not_found`), or a
   * time-shared group: model `@<group>`, version `slot-<i>`.
   */
  assignGpus(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string | undefined }, at: number): Promise<GpuAssignment[]>;
  /** Releases the given GPUs; returns how many were held. */
  releaseGpus(gpuIds: readonly string[]): Promise<number>;
  /** Releases every GPU held by the version (or only by one of its workers). */
  releaseGpusOf(model: string, versionId: string, workerId?: string): Promise<number>;
  listGpuAssignments(): Promise<GpuAssignment[]>;

  // workers
  upsertWorker(w: WorkerRecord): Promise<void>;
  getWorker(id: string): Promise<WorkerRecord | undefined>;
  listWorkers(filter?: WorkerFilter): Promise<WorkerRecord[]>;
  deleteWorker(id: string): Promise<boolean>;

  // audit
  appendAudit(e: AuditInput): Promise<AuditEntry>;
  /** Newest first. */
  queryAudit(q?: AuditQuery): Promise<AuditEntry[]>;
  /** Deletes entries older than `before`; returns how many. */
  pruneAudit(before: number): Promise<number>;

  // tokens
  /** Insert or replace by name. ConflictError `token_hash_exists` if another name has the same hash. */
  putToken(t: TokenRecord): Promise<void>;
  getToken(name: string): Promise<TokenRecord | undefined>;
  listTokens(): Promise<TokenRecord[]>;
  deleteToken(name: string): Promise<boolean>;

  // settings: small JSON values by key
  getSetting<T = unknown>(key: string): Promise<T | undefined>;
  setSetting(key: string, value: unknown, at: number): Promise<void>;
  deleteSetting(key: string): Promise<boolean>;
}

/**
 * Where transactions start: the store itself, and a transaction's handle (a nested `tx` on the handle
 * is a savepoint: its failure rolls back only its own writes, and the outer function may go on).
 */
export interface StoreTxRunner {
  /**
   * Run `fn` atomically: its writes are committed together when its promise resolves, and all rolled
   * back when it rejects (the rejection is passed on). While it runs, no other caller sees its writes,
   * and other callers' writes do not interleave with its reads.
   *
   * Rules for `fn`, so that every backend can keep them:
   * - Use only the handle `t` for store calls. A call on the store itself from inside `fn` waits for
   *   the transaction it is inside: it never returns.
   * - It may be run more than once. A store with optimistic concurrency (etcd's software
   *   transactional memory retries on a conflicting revision) re-runs `fn` from the start, so `fn`
   *   does nothing but read and write through `t` and compute: no events, no route publication, no
   *   I/O outside the store. Do those after the returned promise resolves.
   * - Keep it short: SQLite serialises transactions (one writer), etcd bounds them by its request size.
   */
  tx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T>;
}

/** A transaction's handle: the data operations and nested transactions. Unusable once its transaction has ended. */
export interface StoreTx extends StoreOps, StoreTxRunner {}

export interface Store extends StoreOps, StoreTxRunner {
  /** File path, `:memory:`, or the cluster's endpoints. */
  readonly location: string;
  /** Highest applied schema migration. */
  schemaVersion(): Promise<number>;
  /** Waits for running transactions, then closes; calls made after it are refused (UnavailableError `store_closed`). */
  close(): Promise<void>;
}
