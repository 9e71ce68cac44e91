// The timing model (pure): prefill time, inter-token latency under load, seeded jitter, the clock.
import { fmix32, unit } from './tokenizer.js';

export interface TimingParams {
  prefillTokensPerS: number;
  interTokenMs: number;
  itlGrowthPerSeq: number;
  /** Relative standard deviation of the jitter (0 = exact). */
  jitter: number;
  /** Latency fault: multiplies every delay. */
  latencyMultiplier: number;
}

/** Prefill time of a prompt (ms), before jitter. */
export function prefillMs(promptTokens: number, p: TimingParams): number {
  return (promptTokens / p.prefillTokensPerS) * 1000 * p.latencyMultiplier;
}

/** Inter-token latency with `running` sequences in the batch (ms), before jitter. */
export function itlMs(running: number, p: TimingParams): number {
  return p.interTokenMs * (1 + p.itlGrowthPerSeq * Math.max(0, running - 1)) * p.latencyMultiplier;
}

/**
 * Seeded jitter: factor n of a stream keyed by `seed`, normally distributed around 1 with
 * standard deviation `rel`, clamped to [max(0.05, 1 - 3·rel), 1 + 3·rel].
 */
export function jitterFactor(seed: number, n: number, rel: number): number {
  if (rel === 0) return 1;
  const a = fmix32((seed ^ Math.imul(n + 1, 0x9e3779b1)) >>> 0);
  const b = fmix32(a ^ 0x6a09e667);
  const u1 = Math.max(unit(a), 1e-12);
  const u2 = unit(b);
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  return Math.min(1 + 3 * rel, Math.max(Math.max(0.05, 1 - 3 * rel), 1 + rel * z));
}

/** A seeded sequence of jitter factors (one per delay drawn). */
export class Jitter {
  private n = 0;
  constructor(
    private readonly seed: number,
    private readonly rel: number,
  ) {}
  next(): number {
    return jitterFactor(this.seed, this.n++, this.rel);
  }
}

/** Time source and timers; tests inject a fake one. Times are milliseconds. */
export interface Clock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** A manual clock for tests: `advance(ms)` fires due timers in time order. */
export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimer(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }
  clearTimer(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  /** Move time forward, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = end;
  }
  pending(): number {
    return this.timers.size;
  }
}
