// The fuzz cases' shape (what is sent, what must come back) and the helpers every family shares:
// valid data-plane requests, where a head ends, how bytes are split across writes.
import type { Rng } from './rng.js';
import { chatObject, clientHeaders, completionsObject, json, req, withLength } from './requests.js';
import type { Req } from './requests.js';

export type Family = 'head' | 'chunked' | 'json' | 'conn' | 'admin';
export const FAMILIES: readonly Family[] = ['head', 'chunked', 'json', 'conn', 'admin'];

/**
 * What one answer must be.
 * - ok: 2xx.
 * - reject: 4xx (or a 5xx the RFCs give for a client's request: see the harness's ALLOWED_5XX).
 * - any: the server decides (the request may or may not still be valid), but never a 5xx of its own.
 * - rfc-reject / rfc-ok: RFC 9110/9112 says 4xx / accept, and the gateway today does otherwise
 *   without harm: an observation in the summary, not a failure (a 5xx still fails).
 */
export type Want = 'ok' | 'reject' | 'any' | 'rfc-reject' | 'rfc-ok';

export interface Answer {
  want: Want;
  /** It answers a HEAD request (no body follows its head). */
  head: boolean;
  /** For rfc-reject / rfc-ok: what the RFC says, for the summary. */
  rfc?: string;
}

/**
 * After writing: 'wait' for the answers (half-closing after a quiet spell if they do not come and
 * the bytes may be incomplete); 'half-close' at once; 'leave' (close) or 'reset' (RST) at once;
 * 'leave-on-answer': close as soon as the first answer bytes arrive.
 */
export type End = 'wait' | 'half-close' | 'leave' | 'reset' | 'leave-on-answer';

export interface FuzzCase {
  seed: number;
  index: number;
  family: Family;
  /** How it was built, e.g. 'POST chat | host-twice'. */
  label: string;
  target: 'data' | 'admin';
  /** Written in order, `gapMs` apart (0: back to back). */
  pieces: Buffer[];
  gapMs: number;
  /** The answers that complete the exchange, in order (interim 1xx answers not counted). */
  answers: Answer[];
  /** The bytes are whole requests, so their answers must come (the case's time bound applies). Otherwise the server may rightly wait for more: after a quiet spell the client half-closes. */
  complete: boolean;
  end: End;
  /** Closing without (all of) the answers is fine: after our FIN, or for requests after one the server refused. */
  mayCloseSilently: boolean;
  /** The client never reads; it leaves after this long (a non-reading pipeliner, a slow reader). */
  noReadMs?: number;
  /** A memory-pressure case for a defect being fixed in parallel: what it presses on. */
  pressure?: string;
}

/** How big the pressure cases are (small in `npm test`, full size in `npm run fuzz`). */
export interface Scale {
  /** Largest prompt string in a body under the limit. */
  bigBody: number;
  /** Deepest JSON nesting. */
  maxDepth: number;
  /** Pipelined requests a non-reading client sends. */
  pipelineFlood: number;
  /** Body bytes sent in 1-byte chunks. */
  oneByteChunked: number;
  /** max_tokens of a stream whose client does not read. */
  slowReaderTokens: number;
  /** How long a non-reading client holds its connection. */
  holdMs: number;
  /** Relative weight of the pressure cases among connection cases (the others weigh ~20 in all). */
  pressureWeight: number;
  /** Weight of a chunked body that crosses the limit in real bytes (maxBodyBytes of them on the wire). */
  overLimitBytesWeight: number;
}

export interface GenContext {
  model: string;
  maxBodyBytes: number;
  /** The data plane's head limit (front.ts: 16 KiB). */
  maxHeaderBytes: number;
  /** A valid admin token (sent only with GETs). */
  adminToken: string;
  scale: Scale;
}

/** What a family builds; generate() adds the seed, index and family. */
export type Built = Omit<FuzzCase, 'seed' | 'index' | 'family'>;

const HOSTS = ['127.0.0.1', 'localhost:8080', 'gateway.internal', '[::1]:8080', 'a'];

export function host(rng: Rng): string {
  return rng.pick(HOSTS);
}

export type DataKind = 'GET /health' | 'GET /v1/models' | 'GET /ready' | 'HEAD /health' | 'POST chat' | 'POST chat stream' | 'POST completions';

/** A valid data-plane request of `kind` (answered 2xx). */
export function dataRequest(rng: Rng, ctx: GenContext, kind: DataKind): Req {
  switch (kind) {
    case 'GET /health':
      return req('GET', rng.chance(0.2) ? '/health?probe=1' : '/health', clientHeaders(rng, host(rng), false));
    case 'GET /v1/models':
      return req('GET', '/v1/models', clientHeaders(rng, host(rng), false));
    case 'GET /ready':
      return req('GET', '/ready', clientHeaders(rng, host(rng), false));
    case 'HEAD /health':
      return req('HEAD', '/health', clientHeaders(rng, host(rng), false));
    case 'POST chat':
      return withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(chatObject(rng, ctx.model)));
    case 'POST chat stream':
      return withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(chatObject(rng, ctx.model, true)));
    default:
      return withLength(req('POST', '/v1/completions', clientHeaders(rng, host(rng), true)), json(completionsObject(rng, ctx.model)));
  }
}

export function pickDataKind(rng: Rng): DataKind {
  return rng.weighted<DataKind>([
    ['GET /health', 3],
    ['GET /v1/models', 2],
    ['GET /ready', 1],
    ['HEAD /health', 1],
    ['POST chat', 5],
    ['POST chat stream', 2],
    ['POST completions', 2],
  ]);
}

/** The request method at the start of `b` (after empty lines), as the server will see it. */
export function methodOf(b: Buffer): string {
  let i = 0;
  while (i + 1 < b.length && b[i] === 13 && b[i + 1] === 10) i += 2;
  const sp = b.indexOf(32, i);
  return b.toString('latin1', i, sp === -1 ? Math.min(b.length, i + 16) : sp);
}

/** Is the head at the start of `b` over `max` bytes (the data plane then answers 431)? Empty lines before it count, as in front.ts. */
export function headOver(b: Buffer, max: number): boolean {
  let start = 0;
  while (start + 1 < b.length && b[start] === 13 && b[start + 1] === 10) start += 2;
  const e = b.indexOf('\r\n\r\n', start, 'latin1');
  return e === -1 ? b.length > max : e + 4 > max;
}

/** Split `b` into 1..n pieces at random points (incremental parsing: a head or body across reads). */
export function splitPieces(rng: Rng, b: Buffer, n: number): Buffer[] {
  if (n <= 1 || b.length < 2) return [b];
  const cuts = new Set<number>();
  for (let i = 1; i < n; i++) cuts.add(rng.int(1, b.length - 1));
  const sorted = [...cuts].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of sorted) {
    out.push(b.subarray(from, c));
    from = c;
  }
  out.push(b.subarray(from));
  return out;
}
