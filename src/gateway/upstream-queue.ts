// The requests waiting for one worker, in lanes by priority: the first lane first, arrival order within a lane; bounded by the pool.

/** What waits: its lane (0 is served first) and when it joined (performance.now()). */
export interface Waiting {
  rank: number;
  queuedAt: number;
}

/** Lanes beyond this share the last one (the tiers a model can name are fewer). */
export const MAX_LANES = 16;
/** The last lane that may use every request slot of a worker when a degradation level shares them out: continuations (0) and the top tier (1). */
export const TOP_LANE = 1;

interface Lane<T> {
  items: T[];
  head: number;
}

/**
 * A FIFO per lane. One lane is the common case (no tiers): every operation then costs what a
 * plain array queue costs. The oldest waiter of all is the oldest head of a lane, since each lane is
 * in arrival order, so the pool's single timeout timer needs no ordered index.
 */
export class WaitQueue<T extends Waiting> {
  private readonly lanes: Lane<T>[] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  push(x: T): void {
    const r = Math.min(Math.max(0, Math.floor(x.rank)), MAX_LANES - 1);
    x.rank = r;
    while (this.lanes.length <= r) this.lanes.push({ items: [], head: 0 });
    (this.lanes[r] as Lane<T>).items.push(x);
    this.count++;
  }

  /** The first waiter of the first non-empty lane up to `maxLane`, removed. */
  shift(maxLane = MAX_LANES): T | undefined {
    if (this.count === 0) return undefined;
    const n = Math.min(this.lanes.length, maxLane + 1);
    for (let r = 0; r < n; r++) {
      const lane = this.lanes[r] as Lane<T>;
      if (lane.head < lane.items.length) return this.take(lane);
    }
    return undefined;
  }

  /** The waiter that joined first, of any lane (not removed). */
  oldest(): T | undefined {
    let best: T | undefined;
    for (const lane of this.lanes) {
      const x = lane.items[lane.head];
      if (x !== undefined && (best === undefined || x.queuedAt < best.queuedAt)) best = x;
    }
    return best;
  }

  /** Remove `x` wherever it waits; whether it was there. */
  remove(x: T): boolean {
    const lane = this.lanes[x.rank];
    if (lane === undefined) return false;
    if (lane.items[lane.head] === x) {
      this.take(lane);
      return true;
    }
    const i = lane.items.indexOf(x, lane.head);
    if (i === -1) return false;
    lane.items.splice(i, 1);
    this.count--;
    return true;
  }

  /**
   * Make room for a waiter of lane `rank` in a full queue: the newest waiter of the last lane below
   * it, removed and returned (undefined: nothing waits in a lane below `rank`).
   */
  evictBelow(rank: number): T | undefined {
    for (let r = this.lanes.length - 1; r > rank; r--) {
      const lane = this.lanes[r] as Lane<T>;
      if (lane.head < lane.items.length) {
        this.count--;
        const x = lane.items.pop() as T;
        if (lane.head === lane.items.length) this.reset(lane);
        return x;
      }
    }
    return undefined;
  }

  /** Every waiter, removed (first lane first). */
  clear(): T[] {
    const all: T[] = [];
    for (const lane of this.lanes) {
      for (let i = lane.head; i < lane.items.length; i++) all.push(lane.items[i] as T);
      this.reset(lane);
    }
    this.count = 0;
    return all;
  }

  private take(lane: Lane<T>): T {
    const x = lane.items[lane.head] as T;
    lane.items[lane.head] = undefined as unknown as T;
    lane.head++;
    this.count--;
    if (lane.head === lane.items.length) this.reset(lane);
    else if (lane.head > 1024 && lane.head * 2 > lane.items.length) {
      lane.items = lane.items.slice(lane.head);
      lane.head = 0;
    }
    return x;
  }

  private reset(lane: Lane<T>): void {
    lane.items = [];
    lane.head = 0;
  }
}
