// The idle keep-alive connections to one origin, shared by the pools of every worker at that origin
// (workers that share an endpoint: a router in front of several engines, many models behind one URL).
//
// A pool (upstream.ts) keeps what is the worker's own — its request slots, its queue by tier, the
// connections carrying its requests now — and takes an idle connection from here before it opens
// one, and gives it back here when its request ends and nothing of its own waits. 1,000 workers on
// one endpoint then hold the connections their requests in flight need, not one or more each
// (bench/results/scale.md). performance.now() is the global one, as in upstream.ts.
import { DEFAULTS } from '../defaults.js';
import type { Connection } from './upstream-connection.js';

/** Sweep for idle connections past their limit this often (one timer per origin, never per request). */
const SWEEP_MS = 250;

/** Idle connections of every origin of a data plane, counted against the spares' bound. */
class IdleCount {
  n = 0;
  constructor(readonly maxForSpares: number) {}
}

export class OriginConnections {
  private readonly idle: Connection[] = [];
  /** Pools using these connections: the last one to leave closes the idle ones. */
  private users = 0;
  private sweeper: NodeJS.Timeout | undefined;

  /**
   * An idle connection is closed after this long: the pools' keepAliveTimeoutMs, or less once the
   * worker's `keep-alive: timeout` hint, heard on any of its connections, said so (keepAliveHeard).
   */
  idleLimitMs: number;

  constructor(
    keepAliveTimeoutMs: number,
    private readonly onEmpty: () => void = () => undefined,
    private readonly count: IdleCount = new IdleCount(DEFAULTS.gateway.preconnectMaxIdle),
  ) {
    this.idleLimitMs = keepAliveTimeoutMs;
  }

  /** A spare connection may be opened: the data plane holds fewer idle connections than the spares' bound. */
  get roomForSpare(): boolean {
    return this.count.n < this.count.maxForSpares;
  }

  /** Idle connections now. */
  get size(): number {
    return this.idle.length;
  }

  join(): void {
    this.users++;
  }

  /** A pool is done with the origin; the last one closes the idle connections. */
  leave(): void {
    if (--this.users > 0) return;
    // destroy() comes back through drop(), which takes each out of the list and the count
    for (const c of [...this.idle]) c.destroy();
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.onEmpty();
  }

  /** True while some pool uses the origin (a released connection is worth keeping). */
  get used(): boolean {
    return this.users > 0;
  }

  /** The most recently idled connection (the likeliest still open), if any. */
  take(): Connection | undefined {
    const c = this.idle.pop();
    if (c !== undefined) this.count.n--;
    return c;
  }

  put(c: Connection): void {
    this.add(c, false);
  }

  /** A spare (UpstreamPool.topUp) goes under the connections that have carried requests: those are taken first, while it connects. */
  putSpare(c: Connection): void {
    this.add(c, true);
  }

  private add(c: Connection, under: boolean): void {
    c.idleSince = performance.now();
    if (under) this.idle.unshift(c);
    else this.idle.push(c);
    this.count.n++;
    if (this.sweeper === undefined) {
      this.sweeper = setInterval(this.sweep, SWEEP_MS);
      this.sweeper.unref();
    }
  }

  /** A connection is gone (closed while idle, or by its pool). */
  drop(c: Connection): void {
    const i = this.idle.lastIndexOf(c);
    if (i === -1) return;
    this.idle.splice(i, 1);
    this.count.n--;
  }

  private readonly sweep = (): void => {
    const now = performance.now();
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const c = this.idle[i] as Connection;
      // destroy() comes back through drop()
      if (now - c.idleSince >= this.idleLimitMs) {
        c.swept = true;
        c.destroy();
      }
    }
    if (this.idle.length === 0 && this.sweeper !== undefined) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  };
}

/**
 * The origins of one data plane, by origin and keep-alive limit: the pools of workers at one origin
 * share its idle connections. Connections are the only thing shared; every count, cap and queue is
 * each worker's own.
 */
export class UpstreamOrigins {
  private readonly byKey = new Map<string, OriginConnections>();
  private readonly count: IdleCount;

  /** `maxIdleForSpares`: no spare connection is opened while this many are idle, every origin together. */
  constructor(maxIdleForSpares: number = DEFAULTS.gateway.preconnectMaxIdle) {
    this.count = new IdleCount(maxIdleForSpares);
  }

  /** Idle connections now, every origin together. */
  get idle(): number {
    return this.count.n;
  }

  /** The origin's shared connections, joined (leave() when the pool closes). */
  join(origin: string, keepAliveTimeoutMs: number): OriginConnections {
    const key = `${origin} ${keepAliveTimeoutMs}`;
    let o = this.byKey.get(key);
    if (o === undefined) {
      const made = new OriginConnections(
        keepAliveTimeoutMs,
        () => {
          if (this.byKey.get(key) === made) this.byKey.delete(key);
        },
        this.count,
      );
      o = made;
      this.byKey.set(key, o);
    }
    o.join();
    return o;
  }

  /** Origins in use now. */
  get size(): number {
    return this.byKey.size;
  }
}
