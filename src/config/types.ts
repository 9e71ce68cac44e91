// The normalized, frozen configuration every other module reads (camelCase, defaults applied).
import type { ProviderConfig, SimFaults, SimSettings, VersionConfig } from '../domain/spec.js';
import type { DegradationConfig, TierConfig } from './admission.js';
import type { TimeShareConfig } from './time-sharing.js';
import type { StoreConfig } from './store.js';
export type { EtcdStoreConfig, StoreConfig } from './store.js';
import type { MetricsSourceConfig, PrometheusSourceConfig } from './metrics-source.js';

export type { DegradationConfig, MetricsSourceConfig, PrometheusSourceConfig, TierConfig, TimeShareConfig };

// What a version is registered with lives in domain/ (the registry's records are built from it);
// re-exported here so the config's readers find every config type in one place.
export type { ProviderConfig, SimFaults, SimSettings, VersionConfig };

/** A model's scheduling priority (`medium` and `low` in a config are read as `standard` and `batch`). */
export type Priority = 'critical' | 'high' | 'standard' | 'batch';

/** The multi-model scheduler's settings (docs/multi-model.md). */
export interface SchedulerConfig {
  readonly enabled: boolean;
  readonly dryRun: boolean;
  readonly intervalMs: number;
  readonly windowMs: number;
  readonly idleAfterMs: number;
  readonly cooldownMs: number;
  readonly relaxBelow: number;
  readonly headroom: number;
  readonly minSamples: number;
  readonly drainTimeoutMs: number;
}
export type Role = 'viewer' | 'operator' | 'admin';

export interface RouteConfig {
  /** Normalised to fractions that sum to 1. */
  readonly weights: Readonly<Record<string, number>>;
  readonly overrides: Readonly<Record<string, string>>;
  readonly stickySalt?: string | undefined;
  readonly shadow?: { readonly version: string; readonly share: number } | undefined;
}

/** Per-model canary settings (unset fields fall back to DEFAULTS.rollout / DEFAULTS.canary). */
export interface CanarySettings {
  readonly stages?: readonly number[] | undefined;
  readonly stageDurationMs?: number | undefined;
  readonly alpha?: number | undefined;
  readonly maxP99Increase?: number | undefined;
  readonly maxErrorRate?: number | undefined;
  readonly maxErrorIncrease?: number | undefined;
  readonly maxQualityDecrease?: number | undefined;
  readonly minSamples?: number | undefined;
  readonly shadowShare?: number | undefined;
  readonly ignoreFirstRequests?: number | undefined;
}

/** Per-model rolling update settings (unset fields fall back to DEFAULTS.rolling; budgets are checked when an update starts). */
export interface RollingSettings {
  readonly maxSurge?: number | string | undefined;
  readonly maxUnavailable?: number | string | undefined;
  readonly stepTimeoutMs?: number | undefined;
  readonly progressDeadlineMs?: number | undefined;
  readonly onFailure?: 'pause' | 'rollback' | undefined;
}

export interface JudgeEndpointConfig {
  readonly url: string;
  readonly model: string;
  readonly apiKeyEnv?: string | undefined;
  readonly mode: 'pointwise' | 'pairwise';
  readonly sampleShare: number;
  readonly concurrency: number;
  readonly timeoutMs: number;
  /** Keep the prompt and answers of the last decisions (GET /judge/samples); off: scores and versions only. */
  readonly capturePrompts: boolean;
}

/** Worker health of a model (src/health/, docs/health.md); every field has a default in DEFAULTS.health. */
export interface HealthConfig {
  readonly enabled: boolean;
  readonly intervalMs: number;
  readonly jitter: number;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly probes: readonly { readonly prompt: string; readonly maxTokens: number }[];
  readonly latencyFactor: number;
  readonly latencyFloorMs: number;
  readonly logprobTolerance: number;
  readonly minMargin: number;
  readonly failureThreshold: number;
  readonly healthyAfter: number;
  readonly failureRate: number;
  readonly rateWindow: number;
  readonly rateMinCalls: number;
  readonly recoveryTimeoutMs: number;
  readonly recoveryTimeoutMaxMs: number;
  readonly halfOpenProbes: number;
  readonly halfOpenRequests: number;
  readonly deadAfterFailedRecoveries: number;
  readonly replace: boolean;
  readonly passive: boolean;
  readonly ttftOutlierFactor: number;
  readonly maxEjectedShare: number;
}

/** Monitored rollback of a model's active version (src/rollout/monitor.ts). */
export interface MonitorConfig {
  readonly enabled: boolean;
  readonly maxErrorRate: number;
  readonly maxP99LatencyMs: number;
  readonly minRequests: number;
  readonly intervalMs: number;
}

export interface ModelConfig {
  readonly name: string;
  readonly priority: Priority;
  readonly slo: { readonly ttftP99Ms?: number | undefined; readonly tpotP99Ms?: number | undefined };
  /**
   * What one replica is sized to carry, beside the SLO: requests in flight (`queue_depth`, running and
   * waiting) and completion tokens/s; the scheduler adds replicas past it and gives one back well below.
   */
  readonly scaleSignal?: { readonly queueDepth?: number | undefined; readonly tokensPerS?: number | undefined } | undefined;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly versions: readonly Readonly<VersionConfig>[];
  /** LoRA adapters served on its workers (absent in hand-built configs: none). */
  readonly adapters?: readonly { readonly name: string; readonly source: string; readonly version?: string | undefined }[] | undefined;
  readonly route: RouteConfig;
  /** Its versions take turns on the same GPUs: the standby asleep on the active's (docs/multi-model.md). */
  readonly timeSharedStandby?: boolean | undefined;
  /** Always set by the config pipeline; absent only in hand-built configs (defaults apply). */
  readonly monitor?: MonitorConfig | undefined;
  readonly canary?: CanarySettings | undefined;
  readonly rolling?: RollingSettings | undefined;
  /** Always set by the config pipeline; absent only in hand-built configs (defaults apply). */
  readonly health?: HealthConfig | undefined;
  /** Priority tiers of its requests (docs/resilience.md); absent in hand-built configs: the defaults. */
  readonly tiers?: TierConfig | undefined;
  /** Degradation when capacity falls; undefined: off (no required throughput given). */
  readonly degradation?: DegradationConfig | undefined;
}

export interface TokenConfig {
  readonly name: string;
  readonly role: Role;
  /** hex SHA-256 of the token; plaintext tokens are hashed at load and never kept. */
  readonly sha256: string;
}

export interface GpuConfig {
  readonly id: string;
  readonly memoryGb: number;
}

export interface GatewayConfig {
  readonly maxBodyBytes: number;
  /** The most bytes of one answer copied for the quality judge; a longer one is not judged. */
  readonly captureMaxBytes: number;
  readonly connectTimeoutMs: number;
  readonly firstTokenTimeoutMs: number;
  /** Whole-answer limit for non-streaming requests. */
  readonly requestTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxRetries: number;
  /** Resuming broken streams on another worker (docs/resilience.md). */
  readonly resume: { readonly maxMigrations: number; readonly budgetMs: number; readonly logBytes: number };
  readonly ejectBaseMs: number;
  readonly ejectMaxMs: number;
  readonly connectionsPerWorker: number;
  /** Spare idle connections per worker: ratio × its requests in flight, at most maxPerWorker (docs/resilience.md). */
  readonly preconnect: { readonly ratio: number; readonly maxPerWorker: number };
  /** HTTP/2 with prior knowledge on the data plane's port (docs/gateway.md). */
  readonly http2: { readonly enabled: boolean; readonly maxConcurrentStreams: number };
  /** Requests waiting for a connection to one worker; past it the request goes elsewhere or gets 503 (0: none wait). */
  readonly workerQueueMax: number;
  /** Longest wait for a connection to a worker before 503 (it does not count towards the first-token limit). */
  readonly queueTimeoutMs: number;
  readonly allowVersionHeader: boolean;
  readonly stickyHeader: string;
  readonly categoryHeader: string;
  readonly versionHeader: string;
  readonly stickySalt: string;
  readonly picker: 'p2c' | 'round_robin';
  readonly drainTimeoutMs: number;
  readonly holdQueueMax: number;
  readonly holdQueueTimeoutMs: number;
  /** Bytes written to a client that stay undrained this long close its connection and release its worker (0: never). */
  readonly sendTimeoutMs: number;
  /** Where a LoRA adapter's request goes: a worker that has it, bounded by load (`affinity`), or any that can load it (`random`). */
  readonly adapterRouting: 'affinity' | 'random';
  /** Loading each model's most wanted adapters ahead of their requests (src/gateway/prefetch.ts). */
  readonly adapterPrefetch: AdapterPrefetchConfig;
}

/** The adapter prefetcher (docs/multi-model.md). */
export interface AdapterPrefetchConfig {
  readonly enabled: boolean;
  /** Adapters per model kept loaded ahead of their requests, the most wanted first. */
  readonly topK: number;
  /** How often the prefetcher looks at demand and loads. */
  readonly intervalMs: number;
  /** An adapter's recent demand halves in this long. */
  readonly halfLifeMs: number;
}

/** One listener's admission limits (0: off; see src/gateway/limits.ts). */
export interface ListenerLimitsConfig {
  /** Data plane: 0 = derived from the descriptor limit at start-up. */
  readonly maxConnections: number;
  readonly perClientConnections: number;
  readonly perClientRps: number;
  /** At least 1 whenever perClientRps is set. */
  readonly perClientBurst: number;
}

export interface GlidepathConfig {
  /** Absolute path of the file it came from, when it came from a file. */
  readonly source?: string | undefined;
  readonly server: { readonly listen: string; readonly adminListen: string; readonly dataDir: string };
  /** Where state lives: SQLite in `dataDir` (default) or etcd (cluster mode). */
  readonly store: StoreConfig;
  readonly auth: {
    readonly tokens: readonly TokenConfig[];
    /** Dashboard sessions: ended after this long unused, and after `sessionMaxMs` however used (docs/dashboard.md). */
    readonly sessionIdleMs: number;
    readonly sessionMaxMs: number;
  };
  readonly gpus: readonly GpuConfig[];
  readonly gateway: GatewayConfig;
  readonly limits: { readonly dataPlane: ListenerLimitsConfig; readonly admin: ListenerLimitsConfig };
  readonly telemetry: { readonly windowMaxSamples: number; readonly windowMaxAgeMs: number };
  /** Where the canary judge and the monitor read their series: this process's windows, or Prometheus. */
  readonly metricsSource: MetricsSourceConfig;
  readonly notifications: { readonly webhooks: readonly string[] };
  readonly control: { readonly tickMs: number };
  readonly scheduler: SchedulerConfig;
  /** Models taking turns on the same GPUs (empty: none). */
  readonly timeSharing: readonly TimeShareConfig[];
  /** The slots of each model with `time_shared_standby` (named after the model; empty: none). */
  readonly sharedStandby: readonly TimeShareConfig[];
  readonly judge?: JudgeEndpointConfig | undefined;
  /** Weight cache: absolute directory, LRU bound, per-version download limit (bytes). */
  readonly cache: { readonly dir: string; readonly maxVersions: number; readonly maxBytes: number };
  readonly models: readonly ModelConfig[];
}
