// A bounded FIFO that holds a model's new requests while its old pool drains (drain-first swaps), or
// while it sleeps on time-shared GPUs until its turn.

/** Why a held request was not released: it waited too long, or the queue was closed (shutdown). */
export class HoldRejected extends Error {
  constructor(readonly reason: 'timeout' | 'closed') {
    super(`hold queue: ${reason}`);
  }
}

interface Waiter {
  resolve: () => void;
  reject: (reason: HoldRejected) => void;
  timer: NodeJS.Timeout;
  done: boolean;
}

export class HoldQueue {
  readonly max: number;
  readonly timeoutMs: number;
  private readonly waiters: Waiter[] = [];
  private head = 0;
  private readonly onDepth: (depth: number) => void;

  /**
   * @param why what the model is doing, for the 503 of a request refused or timed out ("is switching
   * versions")
   */
  constructor(
    max: number,
    timeoutMs: number,
    onDepth: (depth: number) => void = () => undefined,
    readonly why = 'is switching versions',
  ) {
    this.max = max;
    this.timeoutMs = timeoutMs;
    this.onDepth = onDepth;
  }

  /** Waiters neither released nor timed out (kept as a count: enqueue must not scan the queue). */
  private live = 0;

  get depth(): number {
    return this.live;
  }

  /**
   * Forget timed-out waiters at the front. They all share one limit, so they time out in arrival
   * order and always sit at the head: without this the array grows for as long as a hold lasts.
   */
  private compact(): void {
    const ws = this.waiters;
    while (this.head < ws.length && (ws[this.head] as Waiter).done) this.head++;
    if (this.head >= 64 && this.head * 2 >= ws.length) {
      ws.splice(0, this.head);
      this.head = 0;
    }
  }

  /**
   * Wait for release. Rejects with 'full' synchronously (returns undefined) when the queue is at
   * capacity; the promise rejects with 'timeout' when the wait exceeds the limit.
   */
  enqueue(): Promise<void> | undefined {
    if (this.depth >= this.max) return undefined;
    const p = new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        resolve,
        reject,
        done: false,
        timer: setTimeout(() => {
          if (w.done) return;
          w.done = true;
          this.live--;
          this.compact();
          reject(new HoldRejected('timeout'));
          this.onDepth(this.depth);
        }, this.timeoutMs),
      };
      this.waiters.push(w);
      this.live++;
    });
    this.onDepth(this.depth);
    return p;
  }

  /** Release everyone in arrival order. */
  releaseAll(): number {
    let n = 0;
    for (let i = this.head; i < this.waiters.length; i++) {
      const w = this.waiters[i] as Waiter;
      if (w.done) continue;
      w.done = true;
      clearTimeout(w.timer);
      w.resolve();
      n++;
    }
    this.waiters.length = 0;
    this.head = 0;
    this.live = 0;
    this.onDepth(0);
    return n;
  }

  /** Refuse everyone still waiting (shutdown). */
  closeAll(): void {
    for (const w of this.waiters) {
      if (w.done) continue;
      w.done = true;
      clearTimeout(w.timer);
      w.reject(new HoldRejected('closed'));
    }
    this.waiters.length = 0;
    this.head = 0;
    this.live = 0;
    this.onDepth(0);
  }
}
