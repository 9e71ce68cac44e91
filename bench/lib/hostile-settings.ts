// bench:hostile's settings and result shapes: what each scenario sends, for how long, and the bounds
// it waits within; shared by the run (hostile.ts) and its report (hostile-report.ts).
import { chatRequest } from './raw-http.js';

export const MODEL = 'm';
/** S1: pipelined requests written at once by the client that never reads, and how long it keeps not reading. */
export const FLOOD_REQUESTS = 3000;
export const FLOOD_HOLD_MS = 5_000;
/**
 * S1: each pipelined request is a streaming chat completion of this many tokens (~FLOOD_TOKENS × 200 B
 * of answer). Small requests, large answers: the old front answered pipelined requests one after the
 * other into memory, so what it held grew with the answers' size. With 8-token answers (~620 B) a
 * first run saw no difference between the builds — both had ~2300 answers in 5 s, all still within
 * the kernel's socket buffers.
 */
export const FLOOD_TOKENS = 128;
export function floodRequest(): string {
  return chatRequest(
    JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: FLOOD_TOKENS, temperature: 0, stream: true, ignore_eos: true }),
  );
}
/** S1: once the client reads, its answers must all arrive within this (else: reported as not all answered). */
export const FLOOD_DRAIN_BOUND_MS = 30_000;
/** S2: the body's size (just under the default 4 MiB `gateway.max_body_bytes`: a valid request), and the bound on its answer. */
export const TRICKLE_BODY_BYTES = 4 * 1024 * 1024 - 64;
export const TRICKLE_BOUND_MS = 45_000;
/** S2: the client writes the one-byte-chunk framing in writes this large, so the client is never the bottleneck. */
export const TRICKLE_WRITE_BYTES = 256 * 1024;
/** S3: a small pool per worker keeps the scenario quick (the default is 128): as many slow readers as connections. */
export const SLOW_POOL = 8;
/** S3: the send timeout given to a build that has one (the default is 60 s). */
export const SEND_TIMEOUT_MS = 3_000;
/** S3: how long the slow readers stream before the victim is sent (the bench's bound on the victim is per variant, below). */
export const SLOW_SETTLE_MS = 1_000;
/** Each scenario: bystander alone for this long first (its quiet baseline), and after the hostile client has gone. */
export const QUIET_MS = 1_000;
export const AFTER_MS = 1_000;

export const S_FLOOD = 'S1 pipelined flood, never read';
export const S_TRICKLE = 'S2 4 MiB body in 1-byte chunks';

export const FAST_SIM = 'inter_token_ms: 0';

export interface SlowVariant {
  scenario: string;
  /** Simulator settings: how fast the streams' bytes come. */
  sim: string;
  maxTokens: number;
  boundMs: number;
}

/** S3a: streams at the simulator's full speed: the socket buffers towards each slow reader fill within a second. */
export const SLOW_FAST: SlowVariant = { scenario: 'S3a slow readers, fast streams', sim: 'inter_token_ms: 0', maxTokens: 40_000, boundMs: 20_000 };
/** S3b: streams at 1 ms/token (~200 KB/s each): the buffers take seconds to fill before the send timeout can start. */
export const SLOW_PACED: SlowVariant = { scenario: 'S3b slow readers, paced streams', sim: 'inter_token_ms: 1', maxTokens: 200_000, boundMs: 30_000 };

export interface Target {
  name: string;
  cli: string;
  /** The build knows `gateway.send_timeout_ms` and `limits:` (issue 12). */
  hasLimits: boolean;
  commit: string;
}

export interface Latency {
  n: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
  /** Requests still unanswered when the scenario ended (their wait so far is in max). */
  cut: number;
}

export interface Cell {
  scenario: string;
  target: string;
  rssStartMiB: number;
  rssPeakMiB: number;
  rssEndMiB: number;
  /** What the victim measurement is, and its value (ms); `victimDone` false: it was not answered within its bound. */
  victim: string;
  victimMs: number;
  victimDone: boolean;
  health: Latency;
  healthQuiet: Latency;
  chat: Latency | null;
  /** Scenario-specific figures. */
  extra: Record<string, number | string>;
}
