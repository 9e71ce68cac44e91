// Sliding per-(model, version) windows bounded by count and age: percentiles, rates and raw samples.
import { quantileSorted } from '../domain/quantile.js';
import type { RequestRecord } from './record.js';
import { isVersionError } from './record.js';

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

export interface WindowStats {
  requests: number;
  errors: number;
  errorRate: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  latencyMs: Percentiles;
  /** requests per second over the window's time span. */
  rps: number;
  /** generated tokens per second over the window's time span. */
  tokensPerS: number;
  /** seconds between the oldest and newest record (at least the age of the oldest). */
  spanS: number;
}

/** Raw samples for the statistics, as the canary judge takes them (src/analysis/judge-types.ts). NaN / undefined entries are removed (NaN policy). */
export interface MetricSamples {
  /** Time to first token per request (ms). */
  ttftMs: number[];
  /** Time per output token per request (ms). */
  tpotMs: number[];
  /** Whole-request latency per request (ms). */
  latencyMs: number[];
  /** Requests finished (successes + errors). */
  requests: number;
  /** Requests that failed. */
  errors: number;
  /**
   * Seconds of serving time that produced `outputTokens`, comparable between versions (e.g. summed
   * request durations or busy seconds per replica), not the window's wall clock when the versions get
   * different traffic shares: throughput = outputTokens / durationS.
   */
  durationS: number;
  outputTokens: number;
  /** Quality scores on a 0-1 scale (LLM-as-judge, 1 - hallucination flag, ...). Absent on both versions: not measured. */
  quality?: number[];
}

function summarize(values: number[]): Percentiles {
  const v = values.filter((x) => Number.isFinite(x));
  if (v.length === 0) return { p50: NaN, p90: NaN, p99: NaN, mean: NaN };
  const s = Float64Array.from(v).sort();
  let sum = 0;
  for (const x of s) sum += x;
  return { p50: quantileSorted(s, 0.5), p90: quantileSorted(s, 0.9), p99: quantileSorted(s, 0.99), mean: sum / s.length };
}

/**
 * A ring buffer of the last `capacity` records' numbers (typed arrays: O(1) push, no per-record
 * allocation) from which records older than `maxAgeMs` are ignored when read.
 */
export class SlidingWindow {
  readonly capacity: number;
  readonly maxAgeMs: number;
  private readonly at: Float64Array;
  private readonly ttft: Float64Array;
  private readonly tpot: Float64Array;
  private readonly latency: Float64Array;
  private readonly tokens: Float64Array;
  private readonly error: Uint8Array;
  private head = 0;
  private size = 0;
  private readonly qAt: Float64Array;
  private readonly qScore: Float64Array;
  private qHead = 0;
  private qSize = 0;

  constructor(capacity: number, maxAgeMs: number) {
    this.capacity = capacity;
    this.maxAgeMs = maxAgeMs;
    this.at = new Float64Array(capacity);
    this.ttft = new Float64Array(capacity);
    this.tpot = new Float64Array(capacity);
    this.latency = new Float64Array(capacity);
    this.tokens = new Float64Array(capacity);
    this.error = new Uint8Array(capacity);
    this.qAt = new Float64Array(capacity);
    this.qScore = new Float64Array(capacity);
  }

  push(r: RequestRecord): void {
    const i = this.head;
    this.at[i] = r.at + r.latencyMs;
    this.ttft[i] = r.ttftMs;
    this.tpot[i] = r.tpotMs;
    this.latency[i] = r.latencyMs;
    this.tokens[i] = r.completionTokens;
    this.error[i] = isVersionError(r) ? 1 : 0;
    this.head = (i + 1) % this.capacity;
    if (this.size < this.capacity) this.size++;
  }

  /** A quality score (e.g. from the LLM judge) for a response of this version. */
  pushQuality(score: number, at: number): void {
    const i = this.qHead;
    this.qAt[i] = at;
    this.qScore[i] = score;
    this.qHead = (i + 1) % this.capacity;
    if (this.qSize < this.capacity) this.qSize++;
  }

  clear(): void {
    this.head = 0;
    this.size = 0;
    this.qHead = 0;
    this.qSize = 0;
  }

  /** Indexes of live records, oldest first. */
  private live(now: number): number[] {
    const out: number[] = [];
    const cutoff = now - this.maxAgeMs;
    const start = (this.head - this.size + this.capacity) % this.capacity;
    for (let k = 0; k < this.size; k++) {
      const i = (start + k) % this.capacity;
      if ((this.at[i] as number) >= cutoff) out.push(i);
    }
    return out;
  }

  samples(now: number = Date.now()): MetricSamples {
    const idx = this.live(now);
    const ttftMs: number[] = [];
    const tpotMs: number[] = [];
    const latencyMs: number[] = [];
    let errors = 0;
    let outputTokens = 0;
    let oldest = now;
    for (const i of idx) {
      const t = this.ttft[i] as number;
      const p = this.tpot[i] as number;
      if (Number.isFinite(t)) ttftMs.push(t);
      if (Number.isFinite(p)) tpotMs.push(p);
      latencyMs.push(this.latency[i] as number);
      errors += this.error[i] as number;
      outputTokens += this.tokens[i] as number;
      oldest = Math.min(oldest, (this.at[i] as number) - (this.latency[i] as number));
    }
    const quality: number[] = [];
    const cutoff = now - this.maxAgeMs;
    const qs = (this.qHead - this.qSize + this.capacity) % this.capacity;
    for (let k = 0; k < this.qSize; k++) {
      const i = (qs + k) % this.capacity;
      if ((this.qAt[i] as number) >= cutoff) quality.push(this.qScore[i] as number);
    }
    const durationS = idx.length === 0 ? 0 : Math.max((now - oldest) / 1000, 1e-3);
    return { ttftMs, tpotMs, latencyMs, requests: idx.length, errors, durationS, outputTokens, quality };
  }

  stats(now: number = Date.now()): WindowStats {
    const s = this.samples(now);
    return {
      requests: s.requests,
      errors: s.errors,
      errorRate: s.requests > 0 ? s.errors / s.requests : NaN,
      ttftMs: summarize(s.ttftMs),
      tpotMs: summarize(s.tpotMs),
      latencyMs: summarize(s.latencyMs),
      rps: s.durationS > 0 ? s.requests / s.durationS : 0,
      tokensPerS: s.durationS > 0 ? s.outputTokens / s.durationS : 0,
      spanS: s.durationS,
    };
  }
}
