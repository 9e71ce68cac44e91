// What the HTTP/1.1 client to workers offers its callers: the handler and controller of one request, its options, and the errors a request can end with.
export { ProtocolError } from './http1/response-head.js';
import { withoutStack } from '../errors.js';

/** Lets the request's owner stop it or apply back-pressure. */
export interface UpstreamController {
  readonly aborted: boolean;
  abort(reason: Error): void;
  pause(): void;
  resume(): void;
}

/**
 * Callbacks for one request, in order: onRequestStart (synchronously from dispatch), onRequestSent
 * (synchronously from dispatch when a connection is free, later when the request waited for one),
 * then onResponseStart → onResponseData* → onResponseEnd; or onResponseError at any point (also
 * synchronously from `abort`, and from dispatch when the request cannot even wait). Exactly one of
 * onResponseEnd / onResponseError ends it. Body bytes that arrive in the same read as the
 * response's end come with onResponseEnd (`tail`), so a proxy can forward them and finish in one write.
 */
export interface UpstreamHandler {
  onRequestStart(c: UpstreamController): void;
  /**
   * The request was written to a connection (one still connecting queues the write): from here on
   * the worker has it. `queuedMs` is how long it waited for the connection (0 when one was free).
   */
  onRequestSent(queuedMs: number): void;
  onResponseStart(c: UpstreamController, status: number, contentType: string | undefined): void;
  /**
   * Body bytes, framing removed; one call per socket read at most. Borrowed: the bytes may live in
   * the pool's shared read buffer and are only valid during the call (copy what you keep).
   */
  onResponseData(c: UpstreamController, chunk: Buffer): void;
  /** The response is complete; `tail` (its last bytes, if they came with the end) is borrowed like onResponseData's chunk. */
  onResponseEnd(tail?: Buffer): void;
  onResponseError(c: UpstreamController, err: Error): void;
  /**
   * Its place when it must wait for the worker: 0 first (a broken stream's continuation), then the
   * priority tiers; asked only when it waits. Absent: the lane after the first.
   */
  priority?(): number;
}

/** Could not open a connection to the worker (refused, unreachable, timed out): the worker, not the request. */
export class ConnectError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * errno → what ran out, for connect failures that are the gateway's own limits and no sign of the
 * worker's health: descriptors (process, system), kernel buffers, memory, local ports.
 */
const LOCAL_RESOURCES: ReadonlyMap<string, string> = new Map([
  ['EMFILE', "file descriptors (the gateway process's limit, RLIMIT_NOFILE)"],
  ['ENFILE', "file descriptors (the system's open-file table is full)"],
  ['ENOBUFS', 'kernel buffer space'],
  ['ENOMEM', 'memory'],
  ['EADDRNOTAVAIL', 'local ports (the ephemeral port range is used up)'],
]);

/** The gateway could not open a connection for lack of its own resources: not the worker's fault. */
export class LocalResourceError extends Error {
  /** The errno, e.g. EMFILE. */
  readonly code: string;
  /** What ran out, in words ("file descriptors (…)"). */
  readonly resource: string;
  constructor(code: string, resource: string, message: string) {
    super(message);
    this.code = code;
    this.resource = resource;
  }
}

/** A failed connect as the error its handler gets: the gateway's own exhaustion, or the worker's. */
export function connectFailure(err: NodeJS.ErrnoException, origin: string): Error {
  const code = err.code ?? 'ECONNECT';
  const resource = LOCAL_RESOURCES.get(code);
  if (resource !== undefined) return new LocalResourceError(code, resource, `could not open a connection to ${origin}: ${err.message}`);
  // a dead worker's refused connects come in bursts too, until its exit is heard of
  return withoutStack(() => new ConnectError(code, `could not connect to ${origin}: ${err.message}`));
}

/**
 * The request never reached the worker: its queue was full (or gave its place to a higher tier), it
 * waited there past the limit, or the worker was removed while it waited (`closed`: another worker
 * may take it, like `full`).
 */
export class WorkerQueueError extends Error {
  readonly code: 'EQUEUEFULL' | 'EQUEUETIMEOUT' | 'EQUEUECLOSED';
  readonly reason: 'full' | 'timeout' | 'closed';
  /** How long it waited (0 when it could not wait at all). */
  readonly queuedMs: number;
  constructor(reason: 'full' | 'timeout' | 'closed', queuedMs: number, message: string) {
    super(message);
    this.reason = reason;
    this.code = reason === 'full' ? 'EQUEUEFULL' : reason === 'timeout' ? 'EQUEUETIMEOUT' : 'EQUEUECLOSED';
    this.queuedMs = queuedMs;
  }
}

export interface UpstreamOptions {
  /**
   * Most connections open to this worker at once. The requests in flight are capped lower by
   * `UpstreamPool.setCap` (the engine's max_num_seqs, a degradation level); further ones wait, by
   * priority, then in arrival order.
   */
  connections: number;
  /** Most requests waiting for a connection; past it dispatch fails the request (WorkerQueueError 'full'). */
  queueMax: number;
  /** Longest a request waits for a connection (WorkerQueueError 'timeout'). */
  queueTimeoutMs: number;
  connectTimeoutMs: number;
  /** Idle keep-alive connections are closed after this long (or the worker's own `keep-alive: timeout` less 1 s). */
  keepAliveTimeoutMs: number;
  /** Spare idle connections kept open to the origin: this × requests in flight, or × the peers' mean (UpstreamPool.peerLoad) if more (0: none; absent: 0), … */
  preconnectRatio?: number;
  /** …at most this many. */
  preconnectMax?: number;
}

/** What a connection (C) and an exchange (E) need of their pool; upstream-connection.ts names it ConnectionPool. */
export interface PoolOf<C, E> {
  readonly origin: string;
  readonly opts: UpstreamOptions;
  readonly target: { host: string; port: number; tls: boolean; hostHeader: string };
  /** A waiting request gave up. */
  unqueue(ex: E): void;
  /** A connection is gone. */
  forget(c: C): void;
  /** A connection finished a response and can carry another. */
  release(c: C): void;
  /** A request whose reused connection turned out closed by the worker: once more, on a fresh connection. */
  redispatch(ex: E): void;
  /** A worker's answer said how long it keeps an idle connection: the origin's are closed before (this, in ms). */
  keepAliveHeard(limitMs: number): void;
}
