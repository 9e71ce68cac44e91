// The normalized, frozen configuration every other module reads (camelCase, defaults applied).
import type { ProviderConfig, SimFaults, SimSettings, VersionConfig } from '../domain/spec.js';

// What a version is registered with lives in domain/ (the registry's records are built from it);
// re-exported here so the config's readers find every config type in one place.
export type { ProviderConfig, SimFaults, SimSettings, VersionConfig };

export type Priority = 'critical' | 'high' | 'medium' | 'low';
export type Role = 'viewer' | 'operator' | 'admin';

export interface RouteConfig {
  /** Normalised to fractions that sum to 1. */
  weights: Record<string, number>;
  overrides: Record<string, string>;
  stickySalt?: string | undefined;
  shadow?: { version: string; share: number } | undefined;
}

/** Per-model canary settings (unset fields fall back to DEFAULTS.rollout / DEFAULTS.canary). */
export interface CanarySettings {
  stages?: number[] | undefined;
  stageDurationMs?: number | undefined;
  alpha?: number | undefined;
  maxP99Increase?: number | undefined;
  maxErrorRate?: number | undefined;
  maxErrorIncrease?: number | undefined;
  maxQualityDecrease?: number | undefined;
  minSamples?: number | undefined;
  shadowShare?: number | undefined;
  ignoreFirstRequests?: number | undefined;
}

export interface JudgeEndpointConfig {
  url: string;
  model: string;
  apiKeyEnv?: string | undefined;
  mode: 'pointwise' | 'pairwise';
  sampleShare: number;
  concurrency: number;
  timeoutMs: number;
}

/** Monitored rollback of a model's active version (src/rollout/monitor.ts). */
export interface MonitorConfig {
  enabled: boolean;
  maxErrorRate: number;
  maxP99LatencyMs: number;
  minRequests: number;
  intervalMs: number;
}

export interface ModelConfig {
  name: string;
  priority: Priority;
  slo: { ttftP99Ms?: number | undefined; tpotP99Ms?: number | undefined };
  minReplicas: number;
  maxReplicas: number;
  versions: VersionConfig[];
  route: RouteConfig;
  /** Always set by the config pipeline; absent only in hand-built configs (defaults apply). */
  monitor?: MonitorConfig | undefined;
  canary?: CanarySettings | undefined;
}

export interface TokenConfig {
  name: string;
  role: Role;
  /** hex SHA-256 of the token; plaintext tokens are hashed at load and never kept. */
  sha256: string;
}

export interface GpuConfig {
  id: string;
  memoryGb: number;
}

export interface GatewayConfig {
  maxBodyBytes: number;
  connectTimeoutMs: number;
  firstTokenTimeoutMs: number;
  /** Whole-answer limit for non-streaming requests. */
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxRetries: number;
  ejectBaseMs: number;
  ejectMaxMs: number;
  connectionsPerWorker: number;
  /** Requests waiting for a connection to one worker; past it the request goes elsewhere or gets 503 (0: none wait). */
  workerQueueMax: number;
  /** Longest wait for a connection to a worker before 503 (it does not count towards the first-token limit). */
  queueTimeoutMs: number;
  allowVersionHeader: boolean;
  stickyHeader: string;
  categoryHeader: string;
  versionHeader: string;
  stickySalt: string;
  picker: 'p2c' | 'round_robin';
  drainTimeoutMs: number;
  holdQueueMax: number;
  holdQueueTimeoutMs: number;
  /** Bytes written to a client that stay undrained this long close its connection and release its worker (0: never). */
  sendTimeoutMs: number;
}

/** One listener's admission limits (0: off; see src/gateway/limits.ts). */
export interface ListenerLimitsConfig {
  /** Data plane: 0 = derived from the descriptor limit at start-up. */
  maxConnections: number;
  perClientConnections: number;
  perClientRps: number;
  /** At least 1 whenever perClientRps is set. */
  perClientBurst: number;
}

export interface GlidepathConfig {
  /** Absolute path of the file it came from, when it came from a file. */
  source?: string | undefined;
  server: { listen: string; adminListen: string; dataDir: string };
  auth: { tokens: TokenConfig[] };
  gpus: GpuConfig[];
  gateway: GatewayConfig;
  limits: { dataPlane: ListenerLimitsConfig; admin: ListenerLimitsConfig };
  telemetry: { windowMaxSamples: number; windowMaxAgeMs: number };
  notifications: { webhooks: string[] };
  control: { tickMs: number };
  judge?: JudgeEndpointConfig | undefined;
  /** Weight cache: absolute directory, LRU bound, per-version download limit (bytes). */
  cache: { dir: string; maxVersions: number; maxBytes: number };
  models: ModelConfig[];
}
