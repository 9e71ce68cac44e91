// A model's recent traffic as the scheduler judges it: TTFT and TPOT of its last requests (bounded by
// age and count), their rate, and when it last had one. Fed by the telemetry's request records.
import { quantileSorted } from '../domain/quantile.js';

interface Sample {
  at: number;
  ttftMs: number;
  tpotMs: number;
  latencyMs: number;
}

export interface LoadStats {
  /** NaN without samples. */
  ttftP99Ms: number;
  tpotP99Ms: number;
  rps: number;
  /** Requests in flight on average (Little's law: the time they took over the window's length). */
  inFlight: number;
  /** Requests in the window. */
  samples: number;
  /** Epoch ms of the last request (-Infinity: none). */
  lastAt: number;
}

/** The 99th percentile of the finite values, as every percentile in Glidepath (domain/quantile.ts); NaN when none. */
function p99(values: number[]): number {
  return quantileSorted(
    values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b),
    0.99,
  );
}

export class LoadWindow {
  private readonly samples: Sample[] = [];
  private lastAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly maxAgeMs: number,
    private readonly maxSamples: number,
  ) {}

  add(at: number, ttftMs: number, tpotMs: number, latencyMs: number): void {
    this.samples.push({ at, ttftMs, tpotMs, latencyMs });
    // trimmed in batches (at twice the bound), not one shift per request
    if (this.samples.length > 2 * this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
    if (at > this.lastAt) this.lastAt = at;
  }

  stats(now: number): LoadStats {
    const from = now - this.maxAgeMs;
    if (this.samples.length > this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
    let drop = 0;
    while (drop < this.samples.length && (this.samples[drop] as Sample).at < from) drop++;
    if (drop > 0) this.samples.splice(0, drop);
    const s = this.samples;
    return {
      ttftP99Ms: p99(s.map((x) => x.ttftMs)),
      tpotP99Ms: p99(s.map((x) => x.tpotMs)),
      rps: s.length / (this.maxAgeMs / 1000),
      samples: s.length,
      inFlight: s.reduce((a, x) => a + (Number.isFinite(x.latencyMs) ? x.latencyMs : 0), 0) / this.maxAgeMs,
      lastAt: this.lastAt,
    };
  }
}
