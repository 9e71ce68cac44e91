// The ports: the one interface controllers and strategies see (blue-green, canary, experiments, the
// monitor, the planner — and the rolling, health and scheduler controllers to come). src/control
// implements it over the data plane, the store and the providers (src/control/ports.ts); tests
// implement it in memory (test/helpers/fake-ports.ts). Nothing in src/rollout imports src/control.
//
// Reads of what the data plane holds (the route in force, live telemetry, whether a worker sleeps)
// are synchronous: they are memory. Everything that touches persistence returns a Promise, so an
// asynchronous store (etcd) changes the implementation, not the ports nor their callers.
import type { ModelConfig, TimeShareConfig } from '../config/types.js';
import type { RouteSnapshot, RouteSpec } from '../domain/route.js';
import type { Version, VersionPatch, VersionStatus } from '../domain/version.js';
import type { ProbeSet } from '../domain/probes.js';
import type { KvRole } from '../domain/spec.js';
import type { ProbeOutcome } from '../gateway/probe.js';
import type { FailureReason, WorkerHealth, WorkerHealthState, BreakerState } from '../health/machine.js';
import type { RequestRecord } from '../telemetry/record.js';
import type { WorkerFault } from '../telemetry/telemetry.js';
import type { WindowStats } from '../telemetry/window.js';
import type { RemoteMetrics } from '../telemetry/prometheus-source.js';
import type { RolloutKind, RolloutState, StateOfKind, StoredRollout } from './rollout-record.js';
import type { NotifyEvent, WebhookResult } from './webhooks.js';

/** Who asked: a token name, or `controller` / `config` / `canary` / `monitor` for automatic changes. */
export interface Actor {
  name: string;
}

/** Wall-clock time and timers; tests drive both by hand. */
export interface Clock {
  /** Epoch ms. */
  now(): number;
  /** Run `fn` once after `ms` (never keeps the process alive); returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
}

export interface Published {
  route: RouteSnapshot;
  /** The data plane's reference swap itself, ms. */
  switchMs: number;
}

export interface DrainReport {
  drained: number;
  aborted: number;
  elapsedMs: number;
}

/** Traffic: the route in force, publishing a new one (one atomic swap, then persisted), drains and holds. */
export interface RoutesPort {
  current(model: string): RouteSnapshot;
  publish(spec: RouteSpec): Promise<Published>;
  /** Wait (bounded; default the gateway's drain timeout) until the version has no request in flight; new requests no longer reach it. */
  drain(model: string, version: string, timeoutMs?: number): Promise<DrainReport>;
  /** Undo a drain: the version may receive requests again (it stays at its weight). */
  undrain(model: string, version: string): void;
  /**
   * The factor on the model's latency gates now: 1, or 2 from degradation level 3 (seed 004: a fleet
   * that lost most of its capacity is slower, and that is not the version's fault; docs/resilience.md).
   */
  latencyFactor(model: string): number;
  /**
   * Hold new requests of a model in the gateway's queue (drain-first swaps; a time-shared model asleep,
   * with its own limits, the reason its refusals give, and a watch on the queue's depth) until `release`.
   */
  hold(model: string, opts?: { max?: number; timeoutMs?: number; why?: string; onDepth?: (depth: number) => void; owner?: string }): void;
  /** `owner`'s hold (default: a rollout's) ends; the requests go once no other holder is left. */
  release(model: string, owner?: string): void;
  /** Requests of a model in flight on its workers. */
  inflight(model: string): number;
}

export interface ChangeOptions {
  actor?: string | undefined;
  reason?: string | undefined;
}

export interface SwitchResult {
  active: Version;
  previous?: Version | undefined;
}

/** The version registry: lifecycle transitions by the rules of src/domain/version.ts, persisted. */
export interface VersionsPort {
  /** NotFoundError `model_not_found` / `version_not_found`. */
  get(model: string, id: string): Promise<Version>;
  /** A model's versions (undefined: every model's), of these statuses only when given. */
  list(model: string | undefined, status?: readonly VersionStatus[]): Promise<Version[]>;
  active(model: string): Promise<Version | undefined>;
  /** The rollback target: a loaded, eligible standby. */
  standby(model: string): Promise<Version | undefined>;
  transition(model: string, id: string, to: VersionStatus, patch?: VersionPatch, opts?: ChangeOptions): Promise<Version>;
  promote(model: string, id: string, opts?: ChangeOptions & { demoteTo?: 'standby' | 'retired' }): Promise<SwitchResult>;
  rollback(model: string, opts?: ChangeOptions & { blockRolledBack?: boolean }): Promise<SwitchResult>;
  /** Store (or, with null, forget) the version's probe set; no status change. */
  setProbes(model: string, id: string, probes: ProbeSet | null): Promise<Version>;
}

export type WorkerRole = 'serving' | 'spare';

/** One live worker as controllers see it. */
export interface WorkerInfo {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  readonly url: string;
  readonly provider: string;
  readonly role: WorkerRole;
  readonly startedAt: number;
  /** Its persisted health; undefined when never judged. */
  readonly health: WorkerHealth | undefined;
  /** Whether its provider can start another in its place (`static` workers are fixed endpoints). */
  readonly replaceable: boolean;
  /** Disaggregated serving: it prefills or decodes (undefined: it serves whole requests). */
  readonly kvRole?: KvRole | undefined;
  /** The GPUs it holds (undefined where not known). */
  readonly gpus?: readonly string[] | undefined;
}

/**
 * Workers of a version. The sleep state belongs here: `sleep` records it so that a restarted
 * control plane puts the version back to sleep; `wake` and `unload` forget it.
 */
export interface WorkersPort {
  /** registered/failed/retired → loading → ready (or failed), all replicas warmed and published to the data plane. */
  load(v: Version, actor: Actor, onProgress?: (m: string) => void): Promise<Version>;
  /** Stop every worker of the version, free its GPUs, drop it from the data plane; returns the GPUs freed. */
  unload(model: string, version: string): Promise<number>;
  sleep(model: string, version: string, level: 1 | 2): Promise<void>;
  /** Wake it if asleep; either way it stays awake across restarts. */
  wake(model: string, version: string): Promise<void>;
  isAsleep(model: string, version: string): boolean;

  /** The live workers, of one version or all. */
  list(model?: string, version?: string): WorkerInfo[];
  /** Send a health probe over the worker's traffic connections (never counted as traffic); never rejects. */
  probe(w: WorkerInfo, body: unknown, timeoutMs: number): Promise<ProbeOutcome>;
  /** The worker's routing weight in the data plane, and for a half-open trial how many picks it holds for. */
  setWeight(w: WorkerInfo, weight: number, budget?: number): void;
  /**
   * Wait (bounded) for the worker's in-flight requests, then abort the rest; 0 aborts at once. `why`:
   * `unhealthy` (default) ends its streams (their text is suspect); `removed` (scaled down, preempted)
   * continues them on another worker.
   */
  drainOne(w: WorkerInfo, timeoutMs: number, why?: 'unhealthy' | 'removed'): Promise<{ aborted: number; elapsedMs: number }>;
  saveHealth(w: WorkerInfo, h: WorkerHealth): Promise<void>;
  setRole(w: WorkerInfo, role: WorkerRole): Promise<void>;
  /**
   * Start another worker of a version on free GPUs (a replacement, a spare, a rolling update's new
   * worker), warmed, published at the weight its health says. The version must be loaded, unless
   * `newPool`: a rolling update's new version, whose pool joins the data plane with its first worker.
   */
  start(model: string, version: string, role: WorkerRole, health: WorkerHealth, opts?: { newPool?: boolean; kvRole?: KvRole | undefined }): Promise<WorkerInfo>;
  /**
   * A controller that owns a version's worker count (a rolling update, by its id; undefined lets go):
   * health's recovery neither refills nor trims a claimed version.
   */
  claim(model: string, version: string, by: string | undefined): void;
  claimedBy(model: string, version: string): string | undefined;
  /**
   * The serving replicas a controller wants of a version instead of its configured `replicas` (the
   * multi-model scheduler's); health's recovery keeps this count. undefined: the configured count.
   */
  setTarget(model: string, version: string, replicas: number | undefined): void;
  target(model: string, version: string): number | undefined;
  /** Stop one worker and free its GPUs. */
  stop(w: WorkerInfo): Promise<void>;
  /** Told when a worker exits without being asked to. */
  onExit(l: (w: WorkerInfo, detail: string) => void): () => void;
  /** Told of every saved change of a worker's health (a canary fails when its workers turn unhealthy). */
  onHealth(l: (w: WorkerInfo, h: WorkerHealth) => void): () => void;
  /**
   * Told after a version's workers are up and warm, before the version is ready: a hook that throws
   * fails the load (and its workers are stopped). The health controller records probe sets here.
   */
  onLoaded(l: (v: Version, workers: WorkerInfo[]) => Promise<void>): () => void;
}

/** The canary's metrics (Prometheus): its state after every step, and its decisive verdicts. */
export interface CanaryMetricsPort {
  state(model: string, canary: string, phase: string, percent: number, stageStartedAt: number, done: boolean): void;
  verdict(model: string, outcome: string, action: string): void;
}

/** An adapter canary's metrics (Prometheus), by model and adapter. */
export interface AdapterCanaryMetricsPort {
  state(model: string, adapter: string, candidate: string, phase: string, percent: number, stageStartedAt: number, done: boolean): void;
  verdict(model: string, adapter: string, outcome: string, action: string): void;
}

/** The health metrics (Prometheus) the health controller keeps. */
export interface HealthMetricsPort {
  worker(w: WorkerInfo, state: WorkerHealthState, breaker: BreakerState): void;
  forget(w: WorkerInfo): void;
  probe(model: string, version: string, check: string, seconds: number): void;
  /** A probe done (its tries together): outcome pass, fail or inconclusive. */
  probeDone(model: string, version: string, check: string, outcome: string): void;
  probeFailure(model: string, version: string, reason: FailureReason): void;
  passiveFailure(model: string, version: string, reason: FailureReason): void;
  replacement(model: string, version: string, reason: string): void;
  spares(model: string, version: string, ready: number, wanted: number): void;
  version(model: string, version: string, healthy: number, serving: number): void;
  degradation(model: string, level: number): void;
}

export interface TelemetryPort {
  /** The version's sliding window now (or at `now`). */
  stats(model: string, version: string, now?: number): WindowStats;
  /** Every request record, as it is produced; returns the unsubscribe function. */
  subscribe(listener: (r: RequestRecord) => void): () => void;
  /** Every failed attempt of a worker (passive health signals); returns the unsubscribe function. */
  subscribeFaults(listener: (f: WorkerFault) => void): () => void;
  /**
   * Where the canary judge and the monitor read their series instead of this process's records and
   * windows: a Prometheus server that scrapes every gateway replica (`metrics_source`, docs/cluster.md);
   * undefined: local.
   */
  readonly remote?: RemoteMetrics | undefined;
  readonly health: HealthMetricsPort;
  readonly canary: CanaryMetricsPort;
  readonly adapterCanary: AdapterCanaryMetricsPort;
  readonly scheduler: SchedulerMetricsPort;
}

/** The multi-model scheduler's metrics (Prometheus): each model after a round, and its decisions. */
export interface SchedulerMetricsPort {
  round(model: string, m: { serving: number; target: number; min: number; max: number; short: number }): void;
  decision(model: string, action: string, outcome: 'done' | 'failed' | 'skipped' | 'dry_run'): void;
  /** Time-shared GPUs: which member of a group is awake. */
  awake(group: string, model: string, awake: boolean): void;
  /** A switch of a group to `to`, and how long its phases took (ms; absent: not reached). */
  switched(group: string, to: string, outcome: 'done' | 'failed', phases: { drainMs?: number; sleepMs?: number; wakeMs?: number; totalMs: number }): void;
}

/** One entry of a rollout's own event log. */
export interface RolloutLogEntry {
  at: number;
  kind: string;
  message: string;
  data?: unknown;
}

/** Persisted rollout state, validated on the way back (src/rollout/rollout-record.ts). */
export interface RolloutsPort {
  /** Insert; ConflictError `rollout_in_progress` when the model already has an unfinished rollout. Returns the revision. */
  create(state: RolloutState): Promise<number>;
  /**
   * Compare-and-set on `revision` (ConflictError `rollout_conflict`); returns the new revision. With
   * `event`, the event is appended to the rollout's log in the same transaction: a step and its entry
   * are written together or not at all (a controller killed between two writes neither repeats nor
   * loses the entry when the next one resumes the rollout).
   */
  save(state: RolloutState, revision: number, event?: RolloutLogEntry): Promise<number>;
  /** By id, of any kind; undefined when unknown; `rollout_state_invalid` when unreadable. */
  get(id: string): Promise<StoredRollout | undefined>;
  /** The model's newest rollout of this kind (never one of another kind). */
  latest<K extends RolloutKind>(model: string, kind: K): Promise<StoredRollout<StateOfKind<K>> | undefined>;
  /** The model's rollouts of this kind, newest first. */
  history<K extends RolloutKind>(model: string, kind: K, limit: number): Promise<StoredRollout<StateOfKind<K>>[]>;
  /** Every unfinished rollout (resumed after a restart), oldest first, and those that could not be read. */
  unfinished(): Promise<{ rollouts: StoredRollout[]; unreadable: Error[] }>;
  /** The model's unfinished rollout, by id and claimed kind, without reading its state. */
  inProgress(model: string): Promise<{ id: string; kind: string } | undefined>;
  appendEvent(id: string, e: { at: number; kind: string; message: string; data?: unknown }): Promise<void>;
  /** Its events, oldest first: those after `page.afterSeq`, at most `page.limit` (and at most the store's 10,000). */
  events(id: string, page?: EventPage): Promise<{ seq: number; at: number; kind: string; message?: string | undefined; data?: unknown }[]>;
}

/** A page of a rollout's events: after this sequence number, at most this many. */
export interface EventPage {
  afterSeq?: number | undefined;
  limit?: number | undefined;
}

/** Small JSON values by key that must survive a restart (e.g. the monitor's runtime settings). */
export interface SettingsPort {
  get<T>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
  delete(key: string): Promise<void>;
}

export interface ModelsPort {
  /** The model's configuration; NotFoundError `model_not_found` naming the configured models. */
  config(name: string): ModelConfig;
  names(): string[];
  /** The groups of models that take turns on the same GPUs. */
  timeShared(): readonly TimeShareConfig[];
}

/** A LoRA adapter as the gateway serves it (gateway/adapters.ts `AdapterSpec`). */
export interface AdapterRef {
  name: string;
  /** Its base model. */
  model: string;
  source: string;
  version?: string | undefined;
  /** The name its engines have it loaded under. */
  servedAs: string;
}

/** LoRA adapters: the registry (persisted) and the data plane's split of one adapter's requests between two of its versions. */
export interface AdaptersPort {
  /** The registered adapter of that name, of any model (undefined: none). */
  get(name: string): AdapterRef | undefined;
  /** Send `share` (0-1) of adapter `name`'s requests to `candidate` (sticky per user by `salt`); undefined: none. */
  setCandidate(name: string, c: { spec: AdapterRef; share: number; salt: string } | undefined): void;
  /** The candidate becomes the registered adapter, persisted (a config-defined one is overridden in the store). */
  promote(name: string, candidate: AdapterRef): Promise<void>;
  /**
   * Unload the adapter served as `servedAs` from every worker of `model` once no request uses it there,
   * waiting (bounded: the gateway's drain timeout) for the requests still running on it: the workers it
   * was unloaded from, those that refused, those still serving it (they unload it when done).
   */
  retire(model: string, servedAs: string): Promise<{ unloaded: number; failed: string[]; pending: string[] }>;
  /** Whether a name is taken on the engines or among requests' model names: a model's, an adapter's, or one an adapter version is served as. */
  taken(name: string): boolean;
}

export interface GpusPort {
  total(): number;
  /** Free GPUs with their memory. */
  free(): Promise<{ id: string; memoryGb: number }[]>;
}

export interface ControlEventInput {
  kind: string;
  model?: string | undefined;
  version?: string | undefined;
  message: string;
  data?: unknown;
  at?: number | undefined;
}

export interface ControllerPorts {
  readonly clock: Clock;
  readonly models: ModelsPort;
  readonly routes: RoutesPort;
  readonly versions: VersionsPort;
  readonly workers: WorkersPort;
  readonly telemetry: TelemetryPort;
  readonly rollouts: RolloutsPort;
  readonly settings: SettingsPort;
  readonly gpus: GpusPort;
  readonly adapters: AdaptersPort;
  /** Run `fn` holding the model's lock: operations on one model never interleave. */
  exclusive<T>(model: string, fn: () => Promise<T>): Promise<T>;
  /** Record who did what with its result and duration; rethrows the operation's error. */
  audited<T>(actor: Actor, action: string, target: string, params: unknown, fn: () => Promise<T>): Promise<T>;
  /** In-process change events (admin SSE stream, CLI --watch). */
  emit(e: ControlEventInput): void;
  /** Every configured webhook; never rejects; outcomes become events and audit entries. */
  notify(e: NotifyEvent): Promise<WebhookResult[]>;
}
