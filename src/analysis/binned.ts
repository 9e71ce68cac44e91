// Histogram bucket counts as the canary judge's samples: a window of Prometheus histograms (binned
// observations, not raw values) turned into tied samples at each bucket's upper bound, so the same
// judge — Mann-Whitney with its tie correction, the tail and gate tests, the proportions tests on
// the counts — runs on them unchanged. What this costs in resolution is in docs/cluster.md.
import type { Binned, VersionReading } from '../telemetry/prometheus-source.js';
import type { PackedSamples } from './judge-packed.js';

/** Observations above the last finite bound stand at this multiple of it: ranked above every other, their size unknown. */
export const OVERFLOW_FACTOR = 2;

/**
 * Counts scaled to at most `cap` in all, in proportion (largest remainders), so that a long window
 * keeps its shape within the judge's per-version sample bound.
 */
export function capCounts(counts: readonly number[], cap: number): number[] {
  const total = counts.reduce((s, c) => s + c, 0);
  if (total <= cap) return counts.map((c) => Math.round(c));
  const exact = counts.map((c) => (c * cap) / total);
  const out = exact.map(Math.floor);
  let left = cap - out.reduce((s, c) => s + c, 0);
  const order = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    out[i] = (out[i] as number) + 1;
    left--;
  }
  return out;
}

/** The value that stands for every observation of bucket `i`: its upper bound, or past the last finite one OVERFLOW_FACTOR times it. */
function standIn(bounds: readonly number[], i: number): number {
  const b = bounds[i] as number;
  if (Number.isFinite(b)) return b;
  for (let j = i - 1; j >= 0; j--) if (Number.isFinite(bounds[j])) return (bounds[j] as number) * OVERFLOW_FACTOR;
  return NaN; // only a +Inf bucket: nothing to rank by
}

/** Tied samples (× `scale`: seconds to ms by default), at most `cap`; NaN stand-ins are left out. */
export function expandBinned(b: Binned, cap: number, scale = 1000): Float64Array {
  const counts = capCounts(b.counts, cap);
  const out = new Float64Array(counts.reduce((s, c) => s + c, 0));
  let k = 0;
  for (let i = 0; i < counts.length; i++) {
    const v = standIn(b.bounds, i) * scale;
    if (Number.isNaN(v)) continue;
    out.fill(v, k, k + (counts[i] as number));
    k += counts[i] as number;
  }
  return k === out.length ? out : out.slice(0, k);
}

/**
 * The q-quantile of binned observations as Prometheus's histogram_quantile computes it: linear
 * interpolation inside the bucket (the first from 0), the last finite bound when it falls in +Inf;
 * NaN without observations.
 */
export function binnedQuantile(b: Binned, q: number): number {
  const total = b.counts.reduce((s, c) => s + c, 0);
  if (total <= 0) return NaN;
  const rank = q * total;
  let cum = 0;
  for (let i = 0; i < b.counts.length; i++) {
    const c = b.counts[i] as number;
    if (cum + c >= rank && c > 0) {
      const hi = b.bounds[i] as number;
      const lo = i === 0 ? 0 : (b.bounds[i - 1] as number);
      if (!Number.isFinite(hi)) return lo;
      return lo + ((hi - lo) * (rank - cum)) / c;
    }
    cum += c;
  }
  return b.bounds.filter(Number.isFinite).at(-1) ?? NaN;
}

/** A version the source had no series of: nothing measured. */
export const NO_READING: VersionReading = Object.freeze({
  requests: 0,
  errors: 0,
  ttft: { bounds: [], counts: [] },
  tpot: { bounds: [], counts: [] },
  latency: { bounds: [], counts: [] },
  busyS: 0,
  outputTokens: 0,
  replicas: 0,
});

/** A version's reading as the judge's packed samples; `quality` comes from elsewhere (the LLM judge's scores are not in Prometheus). */
export function packReading(r: VersionReading, cap: number, quality: Float64Array | undefined): PackedSamples {
  return {
    ttftMs: expandBinned(r.ttft, cap),
    tpotMs: expandBinned(r.tpot, cap),
    latencyMs: expandBinned(r.latency, cap),
    quality,
    requests: Math.round(r.requests),
    errors: Math.round(r.errors),
    durationS: r.busyS,
    outputTokens: r.outputTokens,
  };
}
