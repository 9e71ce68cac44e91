// What the health controller keeps per worker — its health, its probe schedule, and the passive
// signals of its real traffic (whether its last requests fail at a rate that should open its
// breaker, its time to first token) — and what recovery needs of the controller.
import type { HealthConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { WorkerInfo } from '../rollout/ports.js';
import type { WorkerHealth } from './machine.js';

/** One worker as the controller tracks it. */
export interface Tracked {
  info: WorkerInfo;
  health: WorkerHealth;
  /** Which prompt of the set it gets next. */
  turn: number;
  /**
   * Its next admission probe may follow at once: none was tried yet, or the last one passed. After a
   * failure, or a probe that could not be judged, the next waits `probeGapMs`.
   */
  soon: boolean;
  cancelProbe: (() => void) | undefined;
  busy: boolean;
  /** The weight last given to the data plane. */
  weight: number;
  /** Changed since it was last persisted (counters only: flushed with a later tick). */
  dirty: boolean;
  persistedAt: number;
  /** The last probe's latency over the worker's baseline (the pool's median of these tells load from a slow worker). */
  ratio: number | undefined;
  readonly rate: RateWindow;
  readonly ttft: TtftTracker;
}

/** What recovery uses of the health controller. */
export interface HealthHost {
  readonly tracked: ReadonlyMap<string, Tracked>;
  config(model: string): HealthConfig | undefined;
  /** Run as background work: errors become events. */
  spawn(what: string, p: Promise<unknown>): void;
  /** Start `work` in the background `ms` from now (not if the controller stops first). */
  later(what: string, ms: number, work: () => Promise<unknown>): void;
  /** Track the workers that appeared, forget the ones gone. */
  sync(): void;
  /** Give the data plane the worker's weight for its role and health. */
  applyWeight(t: Tracked): void;
}

/** The outcomes of a worker's last `size` requests, O(1) per request. */
export class RateWindow {
  private readonly ring: Uint8Array;
  private next = 0;
  private filled = 0;
  private failed = 0;

  constructor(size: number) {
    this.ring = new Uint8Array(Math.max(1, size));
  }

  push(failed: boolean): void {
    const i = this.next;
    if (this.filled === this.ring.length) this.failed -= this.ring[i] as number;
    else this.filled++;
    this.ring[i] = failed ? 1 : 0;
    if (failed) this.failed++;
    this.next = i + 1 === this.ring.length ? 0 : i + 1;
  }

  /** Forget (a breaker that closed starts from a clean window). */
  reset(): void {
    this.ring.fill(0);
    this.next = 0;
    this.filled = 0;
    this.failed = 0;
  }

  /** At least `minCalls` outcomes, and `rate` or more of them failures. */
  tripped(rate: number, minCalls: number): boolean {
    return this.filled >= minCalls && this.failed >= rate * this.filled;
  }
}

/** A worker's time to first token (without the gateway's own queueing): an EMA and how many requests fed it since the last verdict. */
export class TtftTracker {
  ema = NaN;
  count = 0;

  observe(ms: number): void {
    if (!(ms >= 0)) return; // NaN: no token came
    const a = DEFAULTS.health.baselineAlpha; // as the probe baseline's
    this.ema = this.ema === this.ema ? a * ms + (1 - a) * this.ema : ms;
    this.count++;
  }

  /** A verdict was taken: the next one needs fresh requests (the average carries on). */
  reset(): void {
    this.count = 0;
  }
}
