// One request to a worker as its handler controls it: aborted, paused, resumed, waiting in the pool's queue by its lane, or carried by a
// connection (upstream-connection.ts, which reads and writes it).
import type { Socket } from 'node:net';
import { TOP_LANE } from './upstream-queue.js';
import type { UpstreamController, UpstreamHandler } from './upstream-types.js';

/** What an exchange needs of the connection carrying it. */
export interface Carrier {
  readonly socket: Socket;
  /** Close it under the exchange (aborted mid-way: the connection cannot carry another). */
  drop(): void;
}

/** What an exchange needs of its pool: to leave the queue. */
export interface ExchangePool {
  unqueue(ex: Exchange): void;
}

/** One request's controller; also the link between the pool and the connection carrying it. */
export class Exchange implements UpstreamController {
  aborted = false;
  /** The connection carrying it (upstream-connection.ts), while one does. */
  conn: Carrier | undefined;
  /** True while waiting in the pool's queue. */
  queued = false;
  /** performance.now() when it joined the queue (-1: never waited). */
  queuedAt = -1;
  /** Its lane in the queue (0 first): the handler's priority, asked only when it matters (-1: not asked yet). */
  rank = -1;
  ended = false;
  /** Sent again once already (a stale keep-alive connection). */
  resent = false;
  readonly handler: UpstreamHandler;
  prefix: Buffer | undefined;
  body: Buffer | undefined;
  private readonly pool: ExchangePool;

  constructor(pool: ExchangePool, handler: UpstreamHandler) {
    this.pool = pool;
    this.handler = handler;
  }

  /** Its lane, asked of the handler once (the pool's queue and its room for it read it). */
  priority(): number {
    if (this.rank < 0) this.rank = this.handler.priority?.() ?? TOP_LANE;
    return this.rank;
  }

  abort(reason: Error): void {
    if (this.aborted || this.ended) return;
    this.aborted = true;
    const c = this.conn;
    this.conn = undefined;
    if (c !== undefined) c.drop();
    else if (this.queued) this.pool.unqueue(this);
    this.ended = true;
    this.handler.onResponseError(this, reason);
  }

  pause(): void {
    this.conn?.socket.pause();
  }

  resume(): void {
    this.conn?.socket.resume();
  }
}
