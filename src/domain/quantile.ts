// What a percentile means everywhere in Glidepath: window summaries (/status, logs), the canary's
// gates and tail test, A/B reports and the benchmarks. One definition, NumPy's default (method
// 'linear', Hyndman & Fan type 7), computed as NumPy computes it, so a p99 here is the p99 that
// numpy.quantile gives on the same samples, to the last bit (test/fixtures/stats pins it).

/**
 * Quantile q ∈ [0, 1] of an ascending sorted array: the value at position (n − 1)·q, linearly
 * interpolated between its two neighbours. q = 0 is the minimum, q = 1 the maximum, one sample is
 * every quantile; an empty array gives NaN. The caller sorts (and drops NaN): windows and the
 * judge sort once and ask several quantiles.
 */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const a = sorted[lo] as number;
  const b = sorted[Math.min(lo + 1, n - 1)] as number;
  const t = h - lo;
  // NumPy's _lerp: from the nearer end, which keeps the result monotone in q and exact at the ends
  return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}
