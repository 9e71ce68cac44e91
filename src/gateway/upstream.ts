// The data plane's HTTP/1.1 client to workers: a pool per worker (one request per connection at a time, a cap on requests in flight, a bounded wait by priority) over keep-alive connections shared by the workers at one origin (upstream-origin.ts; the connection itself: upstream-connection.ts).
//
// Why not undici here: measured on a 2-core machine, undici's dispatcher costs ~28 µs of CPU per
// request more than this client (bench/results/gateway.md); the gateway's whole budget is 80 µs.
// Workers are trusted, speak HTTP/1.1 with keep-alive, and the gateway needs exactly one request
// shape (POST a JSON body, read a status, a content type and a body framed by Content-Length,
// chunked encoding or the connection's end). Everything else in the project still uses undici.
//
// performance.now() is the global one (not node:perf_hooks'), so fake timers in tests move queue waits too.
import { Connection } from './upstream-connection.js';
import { Exchange } from './upstream-exchange.js';
import type { ConnectionPool } from './upstream-connection.js';
import { ConnectError, WorkerQueueError, connectFailure } from './upstream-types.js';
import { MAX_LANES, TOP_LANE, WaitQueue } from './upstream-queue.js';
import { OriginConnections } from './upstream-origin.js';
import type { UpstreamOrigins } from './upstream-origin.js';
import type { UpstreamController, UpstreamHandler, UpstreamOptions } from './upstream-types.js';

export { ConnectError, LocalResourceError, ProtocolError, WorkerQueueError } from './upstream-types.js';
export type { UpstreamController, UpstreamHandler, UpstreamOptions } from './upstream-types.js';
export { UpstreamOrigins } from './upstream-origin.js';

/** No spare is opened to a worker for this long after one was lost before it carried a request. */
const SPARE_PAUSE_MS = 1_000;
/**
 * Spares a worker opens per turn of the event loop; more wait for the next turn. A kill -9's burst
 * took ~16 spares from each worker left, and opening them all at once (~0.2 ms each) held the loop
 * ~10 ms before it read the continuations' first answers (bench:resilience, traced).
 */
const SPARES_PER_TURN = 2;

/**
 * Requests to one worker, at most `connections` at once, over keep-alive connections to its origin:
 * idle ones are shared with the other workers at that origin (given `origins`), busy ones carry this
 * worker's requests only.
 */
export class UpstreamPool implements ConnectionPool {
  readonly origin: string;
  readonly opts: UpstreamOptions;
  readonly target: { host: string; port: number; tls: boolean; hostHeader: string };
  /** The connections carrying (or opening for) this worker's requests; idle ones wait in `shared`. */
  private readonly all = new Set<Connection>();
  /** The origin's idle connections (shared with other workers there, or this pool's own). */
  private readonly shared: OriginConnections;
  private left = false;
  private readonly queue = new WaitQueue<Exchange>();
  /** Requests in flight at most (≤ opts.connections): setCap. */
  private cap: number;
  /** …of which the lanes below the top tier may fill only this many (a degradation level's share; the cap when none). */
  private sharedCap: number;
  /** path → the request heads (JSON, event stream) up to the Content-Length value. */
  private readonly prefixes = new Map<string, [Buffer, Buffer]>();
  /** The worker URL's path, put before every request path (e.g. a router's /model-a). */
  readonly pathPrefix: string;
  /** Set while requests wait: fires when the oldest one's wait reaches queueTimeoutMs (one timer per pool). */
  private queueTimer: NodeJS.Timeout | undefined;
  private closing: (() => void) | undefined;
  private closed = false;
  /** Spares (see topUp): one top-up per turn of the event loop, none until this after one was lost unused. */
  private topUpPending = false;
  private sparesPausedUntil = 0;
  /**
   * The requests in flight this worker should be ready for besides its own: its version's mean per
   * worker (VersionPool sets it while the worker is one of its candidates; none otherwise). A worker
   * below the mean — a replacement just admitted above all — is where the picker sends the most when
   * a peer's streams break.
   */
  peerLoad: (() => number) | undefined;

  /** `origins`: share idle connections with the other pools at the same origin (absent: this pool's own). */
  constructor(url: string, opts: UpstreamOptions, origins?: UpstreamOrigins) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`worker URL must be http(s), got ${url}`);
    const isTls = u.protocol === 'https:';
    this.origin = u.origin;
    this.pathPrefix = u.pathname.replace(/\/$/, '');
    this.opts = opts;
    this.cap = opts.connections;
    this.sharedCap = opts.connections;
    this.target = {
      host: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port === '' ? (isTls ? 443 : 80) : Number(u.port),
      tls: isTls,
      hostHeader: u.host,
    };
    if (origins !== undefined) this.shared = origins.join(this.origin, opts.keepAliveTimeoutMs);
    else {
      this.shared = new OriginConnections(opts.keepAliveTimeoutMs);
      this.shared.join();
    }
  }

  private head(path: string, accept: string): Buffer {
    const target = this.pathPrefix + path;
    if (!/^\/[\x21-\x7e]*$/.test(target)) throw new Error(`bad request path ${JSON.stringify(target)}`);
    return Buffer.from(
      `POST ${target} HTTP/1.1\r\nhost: ${this.target.hostHeader}\r\ncontent-type: application/json\r\naccept: ${accept}\r\ncontent-length: `,
      'latin1',
    );
  }

  /** Connections carrying this worker's requests now (idle ones belong to the origin). */
  get size(): number {
    return this.all.size;
  }

  /** Idle connections open to the worker's origin now (a request sent now is written at once on one). */
  get idle(): number {
    return this.shared.size;
  }

  /** Requests waiting for a connection now. */
  get queued(): number {
    return this.queue.size;
  }

  /** Requests in flight now (connections carrying one, or opening for one). */
  get busy(): number {
    return this.all.size;
  }

  /** Requests in flight at most. */
  get limit(): number {
    return this.cap;
  }

  /** Requests in flight at most from below the top tier. */
  get sharedLimit(): number {
    return this.sharedCap;
  }

  /**
   * Take at most `n` requests at once (1 ≤ n ≤ opts.connections), and of them at most `share` × n
   * (rounded down, at least 1) from the lanes below the top tier: continuations and the top tier may
   * use every slot. Lowered, the requests in flight finish and the next ones wait; raised, waiting
   * requests start at once.
   */
  setCap(n: number, share = 1): void {
    this.cap = Math.max(1, Math.min(this.opts.connections, Math.floor(n)));
    this.sharedCap = Math.max(1, Math.min(this.cap, Math.floor(this.cap * share)));
    if (this.closed) return;
    for (let next = this.next(this.busy); next !== undefined; next = this.next(this.busy)) this.start(next);
  }

  /** The waiting request that may take a slot with `busy` in flight (undefined: none may). */
  private next(busy: number): Exchange | undefined {
    if (busy >= this.cap || this.queue.size === 0) return undefined;
    return this.dequeue(busy < this.sharedCap ? MAX_LANES : TOP_LANE);
  }

  /**
   * Whether a request of `h`'s priority would start now rather than wait: a slot is free to its lane
   * (continuations and the top tier may take every slot; the lanes below, the share a level leaves).
   * Its priority is asked only past the first comparison.
   */
  roomFor(h: Pick<UpstreamHandler, 'priority'>): boolean {
    const busy = this.all.size;
    return busy < this.sharedCap || (busy < this.cap && (h.priority?.() ?? TOP_LANE) <= TOP_LANE);
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
    if (this.roomFor(ex)) this.start(ex);
    else this.wait(ex);
  }

  /** Send `ex` now: on an idle connection to the origin, or a new one (there is room: the cap is at most `connections`). */
  private start(ex: Exchange): void {
    const c = this.shared.take();
    if (c !== undefined) {
      c.pool = this;
      this.all.add(c);
      c.send(ex);
    } else this.open(ex)?.send(ex);
    this.wantSpares();
  }

  /** Make up the spares on the next turn of the loop if the origin holds fewer than this worker wants (one top-up at a time); also for a worker just admitted, before its first request. */
  wantSpares(): void {
    if (!this.topUpPending && this.shared.size < this.sparesWanted()) {
      this.topUpPending = true;
      setImmediate(this.topUp);
    }
  }

  /**
   * Idle connections the origin should hold for this worker: opts.preconnectRatio × its requests in
   * flight or its peers' mean (peerLoad), whichever is more, at most opts.preconnectMax, and no more
   * than its free request slots (a request past them waits).
   */
  private sparesWanted(): number {
    const r = this.opts.preconnectRatio ?? 0;
    if (r <= 0) return 0;
    const busy = this.all.size;
    return Math.min(this.opts.preconnectMax ?? 0, Math.ceil(r * Math.max(busy, this.peerLoad?.() ?? 0)), this.cap - busy);
  }

  /**
   * Open spare connections up to sparesWanted, idle at the origin: the next requests — a burst of
   * continuations when another worker dies — are written at once on them instead of each waiting a
   * turn of the event loop for its connect. After the requests that took the last ones have been
   * sent (setImmediate), never in their way, and SPARES_PER_TURN a turn; bounded per worker, and for
   * the whole data plane by the idle connections it holds (DEFAULTS.gateway.preconnectMaxIdle).
   */
  private readonly topUp = (): void => {
    this.topUpPending = false;
    if (this.closed || !this.shared.used || performance.now() < this.sparesPausedUntil) return;
    // a few a turn: what the loop has read meanwhile (a burst's answers) is handled between them
    for (let k = 0; k < SPARES_PER_TURN && this.shared.size < this.sparesWanted() && this.shared.roomForSpare; k++) {
      let c: Connection;
      try {
        c = new Connection(this);
      } catch {
        return; // out of descriptors: no spare, and the requests are told when they need one
      }
      this.shared.putSpare(c);
    }
    if (this.shared.roomForSpare) this.wantSpares();
  };

  /** `ex` waits its turn: by priority, then arrival; a full queue refuses it unless a lower lane makes room. */
  private wait(ex: Exchange): void {
    ex.priority();
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
    const next = this.next(this.all.size - 1);
    if (next !== undefined) {
      c.send(next);
      return;
    }
    this.all.delete(c);
    // a closed pool's connection serves the origin's other workers, while there are any
    if (this.shared.used) this.shared.put(c);
    else c.destroy();
    if (this.closing !== undefined && this.all.size === 0) this.closing();
  }

  /** A worker's answer said `keep-alive: timeout=…`: its origin's idle connections are closed sooner (limitMs). */
  keepAliveHeard(limitMs: number): void {
    this.shared.idleLimitMs = limitMs;
  }

  /** A connection is gone: one carrying this worker's request, or an idle one this pool used last. */
  forget(c: Connection): void {
    // a spare lost before it carried anything (it did not connect, or the worker closed it): no spares
    // for a while (no connect storm towards a worker that refuses them)
    if (c.uses === 0 && !c.swept) this.sparesPausedUntil = performance.now() + SPARE_PAUSE_MS;
    this.all.delete(c);
    this.shared.drop(c);
    // a waiting request can use the freed slot
    if (!this.closed) {
      const next = this.next(this.all.size);
      if (next !== undefined) this.start(next);
      // idled out at its keep-alive limit: spares are made up again while requests are in flight
      // (streams longer than the limit keep theirs)
      else if (c.swept) this.wantSpares();
    }
    if (this.closing !== undefined && this.all.size === 0) this.closing();
  }

  /** This pool no longer uses the origin's connections (once). */
  private leave(): void {
    if (this.left) return;
    this.left = true;
    this.shared.leave();
  }

  /**
   * Stop taking requests; resolves when in-flight ones have finished and their connections are
   * released (kept for the origin's other workers, or closed when none is left).
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
    this.leave();
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
    this.leave();
    for (const c of [...this.all]) {
      const ex = c.ex;
      if (ex !== undefined) ex.abort(new ConnectError('ECLOSED', `the pool for ${this.origin} was closed`));
      else c.destroy();
    }
    if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
  }
}
