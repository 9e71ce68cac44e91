// What the data plane's HTTP/1.1 server offers its handler (the request, the response), its options with their defaults resolved, and the events it reports.
import { DEFAULTS } from '../../defaults.js';
import type { ClientLimits, Refusal } from '../limits.js';
import { errorTypeOf } from '../../errors.js';
import type { ErrorBody, ErrorCode } from '../../errors.js';

export interface FrontRequest {
  /** As sent (a token, e.g. 'POST'). */
  readonly method: string;
  /** Request-target in origin-form, query included, e.g. '/v1/completions?x=1'. */
  readonly url: string;
  /** Names lower-cased; a repeated header's values joined with ', ' (Content-Length: its single value). */
  readonly headers: Readonly<Record<string, string>>;
  /** The complete body (Content-Length or chunked, decoded); empty Buffer when none. */
  readonly body: Buffer;
  readonly httpVersion: '1.0' | '1.1' | '2';
  /** The client's address as the socket saw it ('' when unknown). */
  readonly remoteAddress: string;
}

export interface FrontResponse {
  /** The connection is gone (client left, or destroy()). */
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  /** Status line + headers (names given lower-case by callers; values string or number). */
  writeHead(status: number, headers: Readonly<Record<string, string | number>>): void;
  /**
   * Body bytes, copied before write returns (the caller may reuse the memory). Returns false when the
   * socket's write buffer is over its high-water mark (wait for onceDrain).
   */
  write(chunk: Buffer | string): boolean;
  /** Finish the response (optionally with a last piece, copied like write's). */
  end(chunk?: Buffer | string): void;
  /** Called once if the connection closes before this response has been fully handed to the socket (client disconnect). Not called for a response that ended normally. */
  onClose(cb: () => void): void;
  /** Called once the socket's buffer drains after write() returned false. */
  onceDrain(cb: () => void): void;
  /** The connection was closed because the client took nothing of what was written to it for the send timeout. */
  readonly sendTimedOut: boolean;
  /** Drop the connection (e.g. the upstream broke a non-streaming answer). */
  destroy(): void;
}

/** HTTP/2 with prior knowledge on the same listener (front-h2.ts). */
export interface Http2Options {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: streams one client connection may have open at once. */
  maxConcurrentStreams: number;
}

/** FrontResponse.onClose's callbacks, every one kept: `cb` after those already registered (`prev`). */
export function chainClose(prev: (() => void) | null, cb: () => void): () => void {
  return prev === null
    ? cb
    : () => {
        prev();
        cb();
      };
}

export type FrontHandler = (req: FrontRequest, res: FrontResponse) => void;

export interface FrontOptions {
  /** Over it: 413 (refused early from Content-Length; for chunked as soon as crossed), then the connection is closed. */
  maxBodyBytes: number;
  /** Default 16 KiB: request line + headers; over it 431. */
  maxHeaderBytes?: number;
  /** Default DEFAULTS.gateway.clientKeepAliveMs (65 s): an idle keep-alive connection is closed after it (0: never). */
  keepAliveTimeoutMs?: number;
  /** Default DEFAULTS.gateway.clientHeadersTimeoutMs (30 s): a request whose head (and body) has not fully arrived in this time gets 408 and close (0: no limit). */
  headersTimeoutMs?: number;
  /** Default DEFAULTS.gateway.sendTimeoutMs (60 s): bytes written to a client that stay undrained this long close the connection (0: no limit). */
  sendTimeoutMs?: number;
  /** Default DEFAULTS.gateway.clientReadAheadBytes: what a client may send ahead (pipelined) while its request is answered, before reading pauses. */
  readAheadBytes?: number;
  /** Admission: the connection ceiling and per-client-address limits (none when absent). */
  limits?: ClientLimits;
  /** Told of refused connections and requests, and of send timeouts (metrics, logs). */
  events?: FrontEvents;
  /**
   * GET/HEAD paths (health, readiness, metrics) still answered at the connection ceiling, on a few
   * connections beyond it (DEFAULTS.limits.probeConnections), one request each: a saturated
   * gateway must not look dead to its liveness probe and must stay visible to Prometheus.
   */
  probePaths?: ReadonlySet<string>;
  /** Serve clients that open with the HTTP/2 preface (h2c, prior knowledge) on the same port; absent: HTTP/1.1 only (they get 505). */
  http2?: Http2Options;
  /** Body for error answers the server writes itself (400/408/413/417/429/431/500/501/503/505). Default: OpenAI-style JSON. */
  errorBody?: (status: number, code: ErrorCode, message: string) => string;
}

export interface FrontEvents {
  refused?(reason: Refusal, addr: string): void;
  sendTimeout?(): void;
}

/** The server's own error answers: OpenAI-style JSON. */
export function defaultErrorBody(status: number, code: ErrorCode, message: string): string {
  const body: ErrorBody = { error: { message, type: errorTypeOf(status), code } };
  return JSON.stringify(body);
}

/** FrontOptions with their defaults, shared by every connection of one server. */
export class FrontConfig {
  readonly handler: FrontHandler;
  readonly maxBody: number;
  readonly maxHeader: number;
  readonly keepAliveMs: number;
  readonly requestMs: number;
  readonly sendMs: number;
  /** While a response is in progress, read at most this much of what follows before pausing the socket. */
  readonly maxBuffered: number;
  readonly limits: ClientLimits | null;
  readonly events: FrontEvents;
  readonly probePaths: ReadonlySet<string> | null;
  /** Connections admitted past the ceiling for probe paths only. */
  probeOpen = 0;
  readonly errorBody: (status: number, code: ErrorCode, message: string) => string;
  /** `connection: keep-alive` plus the timeout hint node:http sends (clients stop reusing a socket before we close it). */
  readonly keepAliveLines: string;

  constructor(handler: FrontHandler, opts: FrontOptions) {
    if (!(opts.maxBodyBytes >= 0)) throw new Error(`maxBodyBytes must be >= 0, got ${opts.maxBodyBytes}`);
    this.handler = handler;
    this.maxBody = opts.maxBodyBytes;
    this.maxHeader = opts.maxHeaderBytes ?? 16 * 1024;
    this.keepAliveMs = opts.keepAliveTimeoutMs ?? DEFAULTS.gateway.clientKeepAliveMs;
    this.requestMs = opts.headersTimeoutMs ?? DEFAULTS.gateway.clientHeadersTimeoutMs;
    this.sendMs = opts.sendTimeoutMs ?? DEFAULTS.gateway.sendTimeoutMs;
    this.maxBuffered = opts.readAheadBytes ?? DEFAULTS.gateway.clientReadAheadBytes;
    this.limits = opts.limits ?? null;
    this.events = opts.events ?? {};
    this.probePaths = opts.probePaths ?? null;
    this.errorBody = opts.errorBody ?? defaultErrorBody;
    const hint = Math.floor(this.keepAliveMs / 1000);
    this.keepAliveLines = hint >= 1 ? `connection: keep-alive\r\nkeep-alive: timeout=${hint}\r\n` : 'connection: keep-alive\r\n';
  }
}
