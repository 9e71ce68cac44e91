// The data plane's HTTP/1.1 client to workers: a keep-alive connection pool per worker, one request per connection at a time, a cap on requests in flight, a bounded wait by priority (the connection itself: upstream-connection.ts).
//
// Why not undici here: measured on a 2-core machine, undici's dispatcher costs ~28 µs of CPU per
// request more than this client (bench/results/gateway.md); the gateway's whole budget is 80 µs.
// Workers are trusted, speak HTTP/1.1 with keep-alive, and the gateway needs exactly one request
// shape (POST a JSON body, read a status, a content type and a body framed by Content-Length,
// chunked encoding or the connection's end). Everything else in the project still uses undici.
//
// performance.now() is the global one (not node:perf_hooks'), so fake timers in tests move queue waits too.
import { Connection, Exchange } from './upstream-connection.js';
import type { ConnectionPool } from './upstream-connection.js';
import { ConnectError, WorkerQueueError, connectFailure } from './upstream-types.js';
import { MAX_LANES, TOP_LANE, WaitQueue } from './upstream-queue.js';
import type { UpstreamController, UpstreamHandler, UpstreamOptions } from './upstream-types.js';

export { ConnectError, LocalResourceError, ProtocolError, WorkerQueueError } from './upstream-types.js';
export type { UpstreamController, UpstreamHandler, UpstreamOptions } from './upstream-types.js';

/** Requests to one worker over at most `connections` keep-alive connections. */
export class UpstreamPool implements ConnectionPool {
  readonly origin: string;
  readonly opts: UpstreamOptions;
  readonly target: { host: string; port: number; tls: boolean; hostHeader: string };
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private readonly queue = new WaitQueue<Exchange>();
  /** Requests in flight at most (≤ opts.connections): setCap. */
  private cap: number;
  /** …of which the lanes below the top tier may fill only this many (a degradation level's share; the cap when none). */
  private shared: number;
  /** path → the request heads (JSON, event stream) up to the Content-Length value. */
  private readonly prefixes = new Map<string, [Buffer, Buffer]>();
  /** The worker URL's path, put before every request path (e.g. a router's /model-a). */
  readonly pathPrefix: string;
  private sweeper: NodeJS.Timeout | undefined;
  /** Set while requests wait: fires when the oldest one's wait reaches queueTimeoutMs (one timer per pool). */
  private queueTimer: NodeJS.Timeout | undefined;
  private closing: (() => void) | undefined;
  private closed = false;

  constructor(url: string, opts: UpstreamOptions) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`worker URL must be http(s), got ${url}`);
    const isTls = u.protocol === 'https:';
    this.origin = u.origin;
    this.pathPrefix = u.pathname.replace(/\/$/, '');
    this.opts = opts;
    this.cap = opts.connections;
    this.shared = opts.connections;
    this.target = {
      host: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port === '' ? (isTls ? 443 : 80) : Number(u.port),
      tls: isTls,
      hostHeader: u.host,
    };
  }

  private head(path: string, accept: string): Buffer {
    const target = this.pathPrefix + path;
    if (!/^\/[\x21-\x7e]*$/.test(target)) throw new Error(`bad request path ${JSON.stringify(target)}`);
    return Buffer.from(
      `POST ${target} HTTP/1.1\r\nhost: ${this.target.hostHeader}\r\ncontent-type: application/json\r\naccept: ${accept}\r\ncontent-length: `,
      'latin1',
    );
  }

  /** Connections open now (busy or idle). */
  get size(): number {
    return this.all.size;
  }

  /** Requests waiting for a connection now. */
  get queued(): number {
    return this.queue.size;
  }

  /** Requests in flight now (connections carrying one, or opening for one). */
  get busy(): number {
    return this.all.size - this.idle.length;
  }

  /** Requests in flight at most. */
  get limit(): number {
    return this.cap;
  }

  /** Requests in flight at most from below the top tier. */
  get sharedLimit(): number {
    return this.shared;
  }

  /**
   * Take at most `n` requests at once (1 ≤ n ≤ opts.connections), and of them at most `share` × n
   * (rounded down, at least 1) from the lanes below the top tier: continuations and the top tier may
   * use every slot. Lowered, the requests in flight finish and the next ones wait; raised, waiting
   * requests start at once.
   */
  setCap(n: number, share = 1): void {
    this.cap = Math.max(1, Math.min(this.opts.connections, Math.floor(n)));
    this.shared = Math.max(1, Math.min(this.cap, Math.floor(this.cap * share)));
    if (this.closed) return;
    for (let next = this.next(this.busy); next !== undefined; next = this.next(this.busy)) this.start(next);
  }

  /** The waiting request that may take a slot with `busy` in flight (undefined: none may). */
  private next(busy: number): Exchange | undefined {
    if (busy >= this.cap || this.queue.size === 0) return undefined;
    return this.dequeue(busy < this.shared ? MAX_LANES : TOP_LANE);
  }

  private lane(ex: Exchange): number {
    if (ex.rank < 0) ex.rank = ex.handler.priority?.() ?? TOP_LANE;
    return ex.rank;
  }

  /**
   * POST `body` (JSON) to the worker's path prefix + `path`, accepting an event stream or JSON.
   * Never throws: failures reach the handler.
   */
  dispatch(path: string, stream: boolean, body: Buffer, handler: UpstreamHandler): UpstreamController {
    const ex = new Exchange(this, handler);
    handler.onRequestStart(ex);
    if (ex.aborted) return ex;
    if (this.closed) {
      ex.ended = true;
      handler.onResponseError(ex, new ConnectError('ECLOSED', `the pool for ${this.origin} is closed`));
      return ex;
    }
    let shapes = this.prefixes.get(path);
    if (shapes === undefined) {
      shapes = [this.head(path, 'application/json'), this.head(path, 'text/event-stream')];
      if (this.prefixes.size < 64) this.prefixes.set(path, shapes);
    }
    const prefix = shapes[stream ? 1 : 0];
    ex.prefix = prefix;
    ex.body = body;
    this.run(ex);
    return ex;
  }

  private run(ex: Exchange): void {
    // one comparison while no level shares the slots out; the request's lane is asked only past that
    const busy = this.all.size - this.idle.length;
    if (busy < this.shared || (busy < this.cap && this.lane(ex) <= TOP_LANE)) this.start(ex);
    else this.wait(ex);
  }

  /** Send `ex` now: on an idle connection, or a new one (there is room: the cap is at most `connections`). */
  private start(ex: Exchange): void {
    const c = this.idle.pop();
    if (c !== undefined) c.send(ex);
    else this.open(ex)?.send(ex);
  }

  /** `ex` waits its turn: by priority, then arrival; a full queue refuses it unless a lower lane makes room. */
  private wait(ex: Exchange): void {
    this.lane(ex);
    let bumped: Exchange | undefined;
    if (this.queue.size >= this.opts.queueMax) {
      bumped = this.queue.evictBelow(ex.rank);
      if (bumped === undefined) {
        this.refuse(ex, 0, `all ${this.cap} request slots of ${this.origin} are busy and ${this.opts.queueMax} requests wait for one`);
        return;
      }
      bumped.queued = false;
    }
    ex.queued = true;
    ex.queuedAt = performance.now();
    this.queue.push(ex);
    if (this.queueTimer === undefined) this.armQueueTimer(this.opts.queueTimeoutMs);
    // the newest of a lower lane gave way (it waited least; another worker may have room): told
    // last, since its handler may dispatch again at once
    if (bumped !== undefined) {
      this.refuse(bumped, performance.now() - bumped.queuedAt, `${this.origin}'s queue is full and a request of a higher priority took this one's place`);
    }
  }

  private refuse(ex: Exchange, waited: number, message: string): void {
    ex.ended = true;
    ex.handler.onResponseError(ex, new WorkerQueueError('full', waited, message));
  }

  /** A new connection for `ex`; undefined (and `ex` failed) when even creating the socket threw. */
  private open(ex: Exchange): Connection | undefined {
    let c: Connection;
    try {
      c = new Connection(this);
    } catch (err) {
      // net.connect may throw instead of emitting 'error' (out of descriptors or memory): the handler
      // hears of it either way, and dispatch never throws
      ex.ended = true;
      ex.handler.onResponseError(ex, connectFailure(err as NodeJS.ErrnoException, this.origin));
      return undefined;
    }
    this.all.add(c);
    this.ensureSweeper();
    return c;
  }

  /** A request whose reused connection turned out closed by the worker: once more, on a fresh connection. */
  redispatch(ex: Exchange): void {
    ex.resent = true;
    this.open(ex)?.send(ex);
  }

  private armQueueTimer(ms: number): void {
    this.queueTimer = setTimeout(this.expireQueue, ms);
    // the waiting requests' own sockets keep the process alive, not this
    this.queueTimer.unref();
  }

  /** Fail the requests that waited queueTimeoutMs (the oldest first: one limit for every lane), then wait for the next. */
  private readonly expireQueue = (): void => {
    this.queueTimer = undefined;
    const limit = this.opts.queueTimeoutMs;
    const now = performance.now();
    for (;;) {
      const ex = this.queue.oldest();
      if (ex === undefined) return;
      const waited = now - ex.queuedAt;
      // timers run on the loop's millisecond clock: less than a millisecond early is on time
      if (limit - waited >= 1) {
        // a handler below may have queued a request (and armed the timer for its later limit)
        if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
        this.armQueueTimer(Math.ceil(limit - waited));
        return;
      }
      this.queue.remove(ex);
      ex.queued = false;
      ex.ended = true;
      ex.handler.onResponseError(
        ex,
        new WorkerQueueError('timeout', waited, `waited ${Math.round(waited)} ms for one of the ${this.cap} request slots of ${this.origin}`),
      );
    }
  };

  /** The next waiting request of a lane up to `maxLane`, if any. */
  private dequeue(maxLane: number): Exchange | undefined {
    const ex = this.queue.shift(maxLane);
    if (ex !== undefined) ex.queued = false;
    return ex;
  }

  unqueue(ex: Exchange): void {
    ex.queued = false;
    this.queue.remove(ex);
  }

  /** A connection finished a response and can carry another (unless the cap was lowered meanwhile). */
  release(c: Connection): void {
    // c still counts as busy: handing it on keeps the count, idling it lowers it
    const next = this.next(this.all.size - this.idle.length - 1);
    if (next !== undefined) {
      c.send(next);
      return;
    }
    if (this.closed) {
      c.destroy();
      return;
    }
    c.idleSince = performance.now();
    this.idle.push(c);
  }

  forget(c: Connection): void {
    this.all.delete(c);
    const i = this.idle.indexOf(c);
    if (i !== -1) this.idle.splice(i, 1);
    // a waiting request can use the freed slot
    if (!this.closed) {
      const next = this.next(this.all.size - this.idle.length);
      if (next !== undefined) this.start(next);
    }
    if (this.closing !== undefined && this.all.size === 0) this.closing();
  }

  /** Close idle connections past their limit; one timer per pool, never per request. */
  private ensureSweeper(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (let i = this.idle.length - 1; i >= 0; i--) {
        const c = this.idle[i] as Connection;
        if (now - c.idleSince >= c.idleLimitMs) c.destroy();
      }
      if (this.all.size === 0 && this.sweeper !== undefined) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, 250);
    this.sweeper.unref();
  }

  /**
   * Stop taking requests; resolves when in-flight ones have finished and every connection is closed.
   * Requests still waiting are handed back at once (WorkerQueueError `closed`): another worker may take them.
   */
  close(): Promise<void> {
    this.closed = true;
    if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
    const now = performance.now();
    for (const ex of this.queue.clear()) {
      ex.queued = false;
      // (one handler's answer may have ended another of these)
      if (ex.ended) continue;
      ex.ended = true;
      ex.handler.onResponseError(
        ex,
        new WorkerQueueError('closed', now - ex.queuedAt, `${this.origin} was taken out of its pool while this request waited for it`),
      );
    }
    for (const c of [...this.idle]) c.destroy();
    if (this.all.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.closing = resolve;
    });
  }

  /** Close everything now; requests in flight fail. */
  destroy(): void {
    this.closed = true;
    for (const ex of this.queue.clear()) {
      ex.queued = false;
      ex.abort(new ConnectError('ECLOSED', `the pool for ${this.origin} was closed`));
    }
    for (const c of [...this.all]) {
      const ex = c.ex;
      if (ex !== undefined) ex.abort(new ConnectError('ECLOSED', `the pool for ${this.origin} was closed`));
      else c.destroy();
    }
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
  }
}
