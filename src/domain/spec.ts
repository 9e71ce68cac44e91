// What a version is registered with: weights, engine and card, replicas, and how its workers are
// provided. The config pipeline produces these (config/load.ts) and the registry keeps them in its
// records (domain/version.ts), so they live here, below both.
import type { Architecture } from './card.js';

export interface SimFaults {
  errorRate?: number;
  errorStatus?: number;
  crashAfterTokens?: number;
  /** Mid-stream hang: stop sending after N tokens, the connection kept open (what the gateway's idle timeout catches). */
  stallAfterTokens?: number;
  /** Mid-stream garbage: after N tokens, an event that is not valid SSE JSON, then silence. */
  garbageAfterTokens?: number;
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
  /** Time a LoRA adapter takes to load (ms). */
  loraLoadMs?: number;
  /** Wake from sleep level 1 (weights copied back from CPU memory), ms. */
  wakeMs?: number;
  /** Wake from sleep level 2 (weights discarded: read again from storage), ms. */
  reloadMs?: number;
  /** Requests a simulator process serves itself before it listens (its code compiled and optimised first). */
  warmupRequests?: number;
  faults?: SimFaults;
}

/**
 * How an engine continues a broken stream from the text already sent (docs/resilience.md):
 * `continue_final_message` (vLLM, SGLang, the simulator: the partial assistant message with
 * `continue_final_message: true, add_generation_prompt: false`), `assistant_prefill` (llama.cpp's
 * server: the partial assistant message last, no flags), `completions_only` (only /v1/completions,
 * from prompt + text), `off` (none).
 */
export type ResumeMode = 'continue_final_message' | 'assistant_prefill' | 'completions_only' | 'off';
export const RESUME_MODES: readonly ResumeMode[] = ['continue_final_message', 'assistant_prefill', 'completions_only', 'off'];

export type ProviderConfig =
  | { kind: 'sim'; sim: SimSettings }
  | { kind: 'static'; endpoints: string[]; resume?: ResumeMode | undefined; tokenIdPrompts?: boolean | undefined }
  | {
      kind: 'process';
      command: string;
      env: Record<string, string>;
      healthPath: string;
      gracePeriodMs: number;
      resume?: ResumeMode | undefined;
      tokenIdPrompts?: boolean | undefined;
    };

/** How a version's workers continue a broken stream (the simulator continues like vLLM; others as declared, vLLM's way by default). */
export function resumeModeOf(p: ProviderConfig): ResumeMode {
  return p.kind === 'sim' ? 'continue_final_message' : (p.resume ?? 'continue_final_message');
}

/** What the data plane must know of a version's engine. */
export interface EngineTraits {
  /** How its workers continue a broken stream. */
  resume: ResumeMode;
  /**
   * Its workers take a completion's prompt as token ids (vLLM, SGLang, llama.cpp's server, `glidepath
   * engine`; not the simulator, which has no token ids): a stream that carried its ids (the client
   * asked `return_token_ids`) is continued from them, not from its text re-tokenised.
   */
  tokenIdPrompts: boolean;
  /** Sequences one worker runs at once (vLLM's `--max-num-seqs`): the gateway sends it no more; undefined: not declared. */
  maxNumSeqs?: number | undefined;
  /** LoRA adapters one worker holds at once (vLLM's `--max-loras`); undefined or 0: it serves none. */
  maxLoras?: number | undefined;
}

function positiveInt(raw: unknown): number | undefined {
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : undefined;
}

/** A version's engine traits: `engine.max_num_seqs` / `engine.max_loras` (a positive integer, or its digits), else the simulator's. */
export function engineTraitsOf(v: Pick<VersionConfig, 'provider' | 'engine'>): EngineTraits {
  const p = v.provider;
  return {
    resume: resumeModeOf(p),
    tokenIdPrompts: p.kind !== 'sim' && (p.tokenIdPrompts ?? true),
    maxNumSeqs: positiveInt(v.engine.max_num_seqs) ?? (p.kind === 'sim' ? p.sim.maxNumSeqs : undefined),
    maxLoras: positiveInt(v.engine.max_loras) ?? (p.kind === 'sim' ? p.sim.maxLoras : undefined),
  };
}

/** A worker's part in disaggregated serving (vLLM's kv_role): it prefills, or it decodes from another's KV. */
export type KvRole = 'prefill' | 'decode';

/** The role of each of a version's first workers, by index: its prefill workers, then its decode workers (undefined: whole requests). */
export function kvRoleAt(v: Pick<VersionConfig, 'roles'>, index: number): KvRole | undefined {
  if (v.roles === undefined) return undefined;
  return index < v.roles.prefill ? 'prefill' : 'decode';
}

/** Why a worker of this kv role cannot be started for the version (undefined: it can). */
export function kvRoleMismatch(v: Pick<VersionConfig, 'model' | 'id' | 'roles'>, kvRole: KvRole | undefined): string | undefined {
  if ((v.roles === undefined) === (kvRole === undefined)) return undefined;
  return v.roles === undefined
    ? `${v.model}/${v.id} has no prefill/decode roles: its workers serve whole requests`
    : `${v.model}/${v.id} runs prefill and decode workers: say which to start`;
}

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
  /** Workers it runs: prefill + decode when it has roles. */
  replicas: number;
  /** Disaggregated serving: how many prefill and how many decode workers (undefined: every worker serves whole requests). */
  roles?: { prefill: number; decode: number } | undefined;
  provider: ProviderConfig;
  warmup: { requests: number; maxTokens: number };
  metadata: Record<string, unknown>;
  /** Hot spares kept beside the replicas (0: none); for `static`, the last `spares` endpoints. */
  spares?: number | undefined;
  /** Known-good answers to the health probes (checks a probe set recorded from one worker). */
  probeReference?: { prompt: string; tokens: string[] }[] | undefined;
}
