// The engine's sequences as slots: a request takes one or waits (bounded, first come first served); a client that leaves stops waiting.
import { UnavailableError } from '../errors.js';

interface Waiter<T> {
  resolve(s: T): void;
  reject(e: Error): void;
}

export class Slots<T> {
  private readonly free: T[] = [];
  private readonly waiting: Waiter<T>[] = [];
  /** Slots handed out now. */
  running = 0;

  constructor(private readonly maxWaiting: number) {}

  get queued(): number {
    return this.waiting.length;
  }

  /** Make `items` the slots (after a load); waiting requests take them at once. */
  fill(items: readonly T[]): void {
    for (const s of items) this.release(s, false);
  }

  /** Forget the free slots (before an unload); slots in use are forgotten as they come back. */
  drain(): T[] {
    return this.free.splice(0);
  }

  /** A free slot now, or a turn in the queue; `signal` aborted: the turn is given up. */
  take(signal: AbortSignal): Promise<T> {
    const s = this.free.pop();
    if (s !== undefined) {
      this.running++;
      return Promise.resolve(s);
    }
    if (this.waiting.length >= this.maxWaiting) {
      return Promise.reject(new UnavailableError('queue_full', `the waiting queue is full (${this.maxWaiting} requests)`, { retryAfterS: 1 }));
    }
    return new Promise<T>((resolve, reject) => {
      const w: Waiter<T> = {
        resolve: (x) => {
          signal.removeEventListener('abort', onAbort);
          resolve(x);
        },
        reject,
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(w);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new Error('the client left while its request waited'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(w);
    });
  }

  /** A slot comes back (`used`: it was handed out); the oldest waiting request takes it. */
  release(s: T, used = true): void {
    if (used) this.running--;
    const w = this.waiting.shift();
    if (w !== undefined) {
      this.running++;
      w.resolve(s);
    } else this.free.push(s);
  }

  /** Refuse every waiting request with `err` (the engine is going to sleep or closing). */
  refuseWaiting(err: Error): void {
    for (const w of this.waiting.splice(0)) w.reject(err);
  }
}
