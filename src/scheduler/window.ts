// A model's recent traffic as the scheduler judges it: TTFT and TPOT of its last requests (bounded by
// age and count), their rate, the completion tokens each worker served (what a replica is measured
// to be worth), and when it last had one. Fed by the telemetry's request records.
import { quantileSorted } from '../domain/quantile.js';

interface Sample {
  at: number;
  ttftMs: number;
  tpotMs: number;
  latencyMs: number;
  /** Completion tokens, and the worker that served them ('' when none did). */
  tokens: number;
  worker: string;
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
  /** Completion tokens/s served over the window. */
  tokensPerS: number;
  /** Completion tokens per request that produced any, on average (NaN without one): what a refused request would have asked for too. */
  tokensPerRequest: number;
  /**
   * What one worker served, in completion tokens/s, measured over the window: each worker's tokens
   * over the time it was seen serving in it (from the window's start, or later for one that started
   * since), the median over workers; NaN without samples.
   */
  workerTokensPerS: number;
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

  /** First time each worker served in this window's life (bounded: workers seen in the kept samples). */
  private readonly firstAt = new Map<string, number>();

  add(at: number, ttftMs: number, tpotMs: number, latencyMs: number, tokens = 0, worker = ''): void {
    this.samples.push({ at, ttftMs, tpotMs, latencyMs, tokens, worker });
    // a worker's time serving starts with its first request (its start time, at the latest)
    if (worker !== '' && !this.firstAt.has(worker)) this.firstAt.set(worker, at - latencyMs);
    // trimmed in batches (at twice the bound), not one shift per request
    if (this.samples.length > 2 * this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
    if (at > this.lastAt) this.lastAt = at;
  }

  /**
   * The window's numbers at `now`. `live`: the workers serving now — what one worker serves is measured
   * on them only (one stopped since, a preempted or replaced one, would dilute it), and on those whose
   * requests produced tokens (a failing worker is no measure of what a replica can serve).
   */
  stats(now: number, live?: ReadonlySet<string>): LoadStats {
    const from = now - this.maxAgeMs;
    if (this.samples.length > this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
    let drop = 0;
    while (drop < this.samples.length && (this.samples[drop] as Sample).at < from) drop++;
    if (drop > 0) this.samples.splice(0, drop);
    const s = this.samples;
    // the count bound cut the window short (a busy model): its rates are over the time the samples cover
    const spanMs = s.length >= this.maxSamples ? Math.min(this.maxAgeMs, Math.max(1, now - (s[0] as Sample).at)) : this.maxAgeMs;
    const start = now - spanMs;
    let tokens = 0;
    let producing = 0;
    const byWorker = new Map<string, number>();
    for (const x of s) {
      tokens += x.tokens;
      if (x.tokens > 0) producing++;
      if (x.worker !== '') byWorker.set(x.worker, (byWorker.get(x.worker) ?? 0) + x.tokens);
    }
    for (const w of this.firstAt.keys()) if (!byWorker.has(w)) this.firstAt.delete(w);
    const rates = [...byWorker]
      .filter(([w, n]) => n > 0 && (live === undefined || live.has(w)))
      .map(([w, n]) => n / (Math.max(1, now - Math.max(start, this.firstAt.get(w) ?? start)) / 1000))
      .sort((a, b) => a - b);
    return {
      ttftP99Ms: p99(s.map((x) => x.ttftMs)),
      tpotP99Ms: p99(s.map((x) => x.tpotMs)),
      rps: s.length / (spanMs / 1000),
      samples: s.length,
      inFlight: s.reduce((a, x) => a + (Number.isFinite(x.latencyMs) ? x.latencyMs : 0), 0) / spanMs,
      tokensPerRequest: producing === 0 ? Number.NaN : tokens / producing,
      tokensPerS: tokens / (spanMs / 1000),
      workerTokensPerS: quantileSorted(rates, 0.5),
      lastAt: this.lastAt,
    };
  }
}
