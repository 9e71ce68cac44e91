// The ports: the one interface controllers and strategies see (blue-green, canary, experiments, the
// monitor, the planner — and the rolling, health and scheduler controllers to come). src/control
// implements it over the data plane, the store and the providers (src/control/ports.ts); tests
// implement it in memory (test/helpers/fake-ports.ts). Nothing in src/rollout imports src/control.
//
// Reads of what the data plane holds (the route in force, live telemetry, whether a worker sleeps)
// are synchronous: they are memory. Everything that touches persistence returns a Promise, so an
// asynchronous store (etcd) changes the implementation, not the ports nor their callers.
import type { ModelConfig } from '../config/types.js';
import type { RouteSnapshot, RouteSpec } from '../domain/route.js';
import type { Version, VersionPatch, VersionStatus } from '../domain/version.js';
import type { RequestRecord } from '../telemetry/record.js';
import type { WindowStats } from '../telemetry/window.js';
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
  /** Hold new requests of a model in the gateway's queue (drain-first swaps) until `release`. */
  hold(model: string): void;
  release(model: string): void;
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
  list(model: string, status?: readonly VersionStatus[]): Promise<Version[]>;
  active(model: string): Promise<Version | undefined>;
  /** The rollback target: a loaded, eligible standby. */
  standby(model: string): Promise<Version | undefined>;
  transition(model: string, id: string, to: VersionStatus, patch?: VersionPatch, opts?: ChangeOptions): Promise<Version>;
  promote(model: string, id: string, opts?: ChangeOptions & { demoteTo?: 'standby' | 'retired' }): Promise<SwitchResult>;
  rollback(model: string, opts?: ChangeOptions & { blockRolledBack?: boolean }): Promise<SwitchResult>;
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
}

export interface TelemetryPort {
  /** The version's sliding window now (or at `now`). */
  stats(model: string, version: string, now?: number): WindowStats;
  /** Every request record, as it is produced; returns the unsubscribe function. */
  subscribe(listener: (r: RequestRecord) => void): () => void;
}

/** Persisted rollout state, validated on the way back (src/rollout/rollout-record.ts). */
export interface RolloutsPort {
  /** Insert; ConflictError `rollout_in_progress` when the model already has an unfinished rollout. Returns the revision. */
  create(state: RolloutState): Promise<number>;
  /** Compare-and-set on `revision` (ConflictError `rollout_conflict`); returns the new revision. */
  save(state: RolloutState, revision: number): Promise<number>;
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
  events(id: string): Promise<{ seq: number; at: number; kind: string; message?: string | undefined; data?: unknown }[]>;
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
  /** Run `fn` holding the model's lock: operations on one model never interleave. */
  exclusive<T>(model: string, fn: () => Promise<T>): Promise<T>;
  /** Record who did what with its result and duration; rethrows the operation's error. */
  audited<T>(actor: Actor, action: string, target: string, params: unknown, fn: () => Promise<T>): Promise<T>;
  /** In-process change events (admin SSE stream, CLI --watch). */
  emit(e: ControlEventInput): void;
  /** Every configured webhook; never rejects; outcomes become events and audit entries. */
  notify(e: NotifyEvent): Promise<WebhookResult[]>;
}
