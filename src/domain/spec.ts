// What a version is registered with: weights, engine and card, replicas, and how its workers are
// provided. The config pipeline produces these (config/load.ts) and the registry keeps them in its
// records (domain/version.ts), so they live here, below both.
import type { Architecture } from './card.js';

export interface SimFaults {
  errorRate?: number;
  errorStatus?: number;
  crashAfterTokens?: number;
  hang?: boolean;
  latencyMultiplier?: number;
  corrupt?: boolean;
  /** Subtle corruption: every logprob shifted down by this many nats, the tokens unchanged (what only a logprob check catches). */
  logprobDrift?: number;
  /** Flapping: answers with errors every other period of this many ms, normally in between. */
  flapMs?: number;
}

/** Per-version simulator settings; anything unset falls back to DEFAULTS.sim. */
export interface SimSettings {
  seed?: number;
  loadTimeMs?: number;
  prefillTokensPerS?: number;
  interTokenMs?: number;
  itlGrowthPerSeq?: number;
  jitter?: number;
  kvCapacityTokens?: number;
  maxNumSeqs?: number;
  maxModelLen?: number;
  hallucinationRate?: number;
  maxLoras?: number;
  faults?: SimFaults;
}

export type ProviderConfig =
  | { kind: 'sim'; sim: SimSettings }
  | { kind: 'static'; endpoints: string[] }
  | { kind: 'process'; command: string; env: Record<string, string>; healthPath: string; gracePeriodMs: number };

export interface VersionConfig {
  id: string;
  model: string;
  weights: string;
  weightHash?: string | undefined;
  baseModel: string;
  quantization: string;
  tp: number;
  gpuMemoryGb: number;
  architecture: Architecture;
  engine: Record<string, string | number | boolean>;
  cardChecksum: string;
  replicas: number;
  provider: ProviderConfig;
  warmup: { requests: number; maxTokens: number };
  metadata: Record<string, unknown>;
  /** Hot spares kept beside the replicas (0: none); for `static`, the last `spares` endpoints. */
  spares?: number | undefined;
  /** Known-good answers to the health probes (checks a probe set recorded from one worker). */
  probeReference?: { prompt: string; tokens: string[] }[] | undefined;
}
