// One proxied request's deadlines on one timer: an attempt's first data event (a stream's; a buffered answer's first byte), then silence between them.
import type { AbortKind } from './upstream-failure.js';

/**
 * The request's one timer. It is not moved per chunk: it fires at the earliest moment a deadline
 * could have passed (never later than the idle limit from when it was set) and then checks the real
 * one — the first data event by `firstDeadline`, idle by `lastDataAt` — setting itself again for what is left.
 * performance.now() is the global one (not node:perf_hooks'), so fake timers in tests can move it too.
 */
export class RequestTimer {
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() by which the first data event (a buffered answer's first byte) must come (this attempt). */
  private firstDeadline = 0;
  /**
   * performance.now() of the last data event from the worker (or of the client draining its buffer).
   * A stream's comments (`: ping`) and the bytes of an event not yet whole do not count: a worker that
   * sends only those, or one byte of an event at a time, is as silent as one that sends nothing.
   */
  private lastDataAt = 0;
  private gotFirstByte = false;

  constructor(
    private readonly idleMs: number,
    /** A deadline passed: which. */
    private readonly expired: (kind: AbortKind & ('first_token_timeout' | 'idle_timeout')) => void,
  ) {}

  /** An attempt's request reached its worker: its first byte is due within `ms`. */
  startAttempt(ms: number): void {
    this.gotFirstByte = false;
    this.firstDeadline = performance.now() + ms;
    this.set(ms);
  }

  /** A whole data event (a buffered answer's bytes) came from the worker at `now` (the idle limit counts from here). */
  data(now: number): void {
    this.gotFirstByte = true;
    this.lastDataAt = now;
  }

  /** The client drained what it was slow to take: the worker's idle limit starts again now. */
  resumeIdle(): void {
    this.lastDataAt = performance.now();
    this.set(this.idleMs);
  }

  stop(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** (Re)start the timer, `ms` from now at most the idle limit. */
  private set(ms: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(this.fire, ms < this.idleMs ? ms : this.idleMs);
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const first = !this.gotFirstByte;
    const left = (first ? this.firstDeadline : this.lastDataAt + this.idleMs) - performance.now();
    // timers run on the loop's millisecond clock: less than a millisecond early is on time
    if (left >= 1) this.set(Math.ceil(left));
    else this.expired(first ? 'first_token_timeout' : 'idle_timeout');
  };
}
