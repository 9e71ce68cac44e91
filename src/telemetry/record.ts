// The one record every request produces, and what counts as an error.
import type { ErrorCode } from '../errors.js';

export interface RequestRecord {
  model: string;
  version: string;
  worker: string;
  /** HTTP status sent to the client (499 when the client went away first). */
  status: number;
  /** Stable error code when the request failed (`upstream_connect_failed`, `drain_aborted`, …). */
  /** A code of the error catalogue (src/errors.ts): what went wrong, for metrics and the judge. */
  errorCode: ErrorCode | undefined;
  stream: boolean;
  /** ms from receiving the request to the first token (NaN when none arrived); includes queueMs. */
  ttftMs: number;
  /** ms spent waiting for a free connection to a worker, over all attempts (0 when one was free). */
  queueMs: number;
  /** mean ms between tokens after the first (NaN with fewer than two tokens). */
  tpotMs: number;
  /** per-token gaps in ms (streams only; empty otherwise). */
  itlMs: readonly number[];
  latencyMs: number;
  promptTokens: number;
  completionTokens: number;
  /** epoch ms at which the request arrived. */
  at: number;
  /** workers tried before this one. */
  retries: number;
  /** true for mirrored shadow requests (never seen by the client). */
  shadow: boolean;
  /**
   * A LoRA adapter's request: the name its worker serves the adapter under (gateway/adapters.ts,
   * `servedAs`), which tells an adapter's versions apart while a canary runs; undefined otherwise.
   */
  adapter?: string | undefined;
}

/**
 * Errors that count against a version: server-side failures. Client errors (4xx) and clients that
 * hang up (499) are not the version's fault and never count (sglang#25811 is what happens otherwise).
 */
export function isVersionError(r: Pick<RequestRecord, 'status' | 'errorCode'>): boolean {
  if (r.status >= 400 && r.status < 500) return false;
  // the gateway's own exhaustion (descriptors, ports): no version's fault, and it must not roll one back
  if (r.errorCode === 'local_resources_exhausted') return false;
  // 5xx, or a stream that started with 200 and then failed (error code set)
  return r.status >= 500 || r.errorCode !== undefined;
}
