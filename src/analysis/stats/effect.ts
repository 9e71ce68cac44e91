// Effect sizes and parametric two-sample comparisons: Cohen's d (two pooled-SD conventions),
// the common-language effect size from U, and Welch's unequal-variance t-test.

import type { Alternative } from './mannwhitney.js';
import { finite, mean, variance } from './describe.js';
import { studentTSf } from './special.js';

/**
 * Cohen's d of b over a, (mean(b) - mean(a)) / s, with the standard pooled SD
 * s = sqrt(((n_a - 1) s_a^2 + (n_b - 1) s_b^2) / (n_a + n_b - 2)).
 * Returns 0 when s = 0 and the means are equal, +-Infinity when only the means differ.
 */
export function cohensD(aIn: readonly number[], bIn: readonly number[]): number {
  const a = finite(aIn);
  const b = finite(bIn);
  if (a.length < 2 || b.length < 2) return NaN;
  return ratio(mean(b) - mean(a), pooledSd(a, b));
}

/** The standard pooled SD of two NaN-free samples (NaN when either has fewer than 2 values). */
export function pooledSd(a: ArrayLike<number>, b: ArrayLike<number>): number {
  return Math.sqrt(((a.length - 1) * variance(a) + (b.length - 1) * variance(b)) / (a.length + b.length - 2));
}

/**
 * Cohen's d as seed 001 computes it: s = sqrt((s_a^2 + s_b^2) / 2), the root mean of the two sample
 * variances. It equals `cohensD` when the groups have the same size and weighs a small group as much
 * as a large one otherwise; kept so numbers can be compared with the seed.
 */
export function cohensDAverageVariance(aIn: readonly number[], bIn: readonly number[]): number {
  const a = finite(aIn);
  const b = finite(bIn);
  if (a.length < 2 || b.length < 2) return NaN;
  const s = Math.sqrt((variance(a) + variance(b)) / 2);
  return ratio(mean(b) - mean(a), s);
}

function ratio(num: number, den: number): number {
  if (den > 0) return num / den;
  if (num === 0) return 0;
  return num > 0 ? Infinity : -Infinity;
}

/**
 * Probability that a random value of the first sample exceeds one of the second, ties counting
 * half: U / (n1 n2) (the common-language effect size, Kayenta's "cles"). It uses every pair, not
 * the seed's index pairing of a[i] with b[i].
 */
export function winProbability(u: number, n1: number, n2: number): number {
  return n1 > 0 && n2 > 0 ? u / (n1 * n2) : NaN;
}

export interface WelchResult {
  /** t of mean(x) - mean(y), as scipy.stats.ttest_ind(x, y, equal_var=False). */
  t: number;
  df: number;
  p: number;
  meanDiff: number;
}

/** Welch's t-test. 'greater': mean(x) > mean(y). */
export function welchTTest(xIn: readonly number[], yIn: readonly number[], alternative: Alternative = 'two-sided'): WelchResult {
  const x = finite(xIn);
  const y = finite(yIn);
  const nx = x.length;
  const ny = y.length;
  if (nx < 2 || ny < 2) return { t: NaN, df: NaN, p: NaN, meanDiff: NaN };
  const vx = variance(x) / nx;
  const vy = variance(y) / ny;
  const meanDiff = mean(x) - mean(y);
  const se = Math.sqrt(vx + vy);
  const t = meanDiff / se;
  const df = ((vx + vy) * (vx + vy)) / ((vx * vx) / (nx - 1) + (vy * vy) / (ny - 1));
  if (!Number.isFinite(t)) return { t, df, p: NaN, meanDiff };
  let p: number;
  if (alternative === 'greater') p = studentTSf(t, df);
  else if (alternative === 'less') p = studentTSf(-t, df);
  else p = Math.min(1, 2 * studentTSf(Math.abs(t), df));
  return { t, df, p, meanDiff };
}
