// The Mann-Whitney U test as scipy.stats.mannwhitneyu (SciPy 1.17): U, p-value for two-sided and
// one-sided alternatives, tie and continuity corrections, the exact null distribution, 'auto' rule.

import { finite, sortedCopy } from './describe.js';
import { normSf } from './normal.js';

/** 'greater': the first sample tends to be larger than the second (SciPy's convention). */
export type Alternative = 'two-sided' | 'less' | 'greater';
export type MwuMethod = 'auto' | 'exact' | 'asymptotic';

export interface MwuOptions {
  alternative?: Alternative;
  method?: MwuMethod;
  /** Continuity correction of the normal approximation (SciPy's `use_continuity`, default true). */
  continuity?: boolean;
}

export interface MwuResult {
  /** U of the first sample: number of pairs (x_i, y_j) with x_i > y_j, ties counting 1/2 (SciPy's statistic). */
  u: number;
  p: number;
  method: 'exact' | 'asymptotic';
  n1: number;
  n2: number;
  /** (U - n1 n2 / 2) / sigma with the tie correction and no continuity correction; > 0 when x tends larger. */
  z: number;
  /** Whether the pooled sample had ties. */
  ties: boolean;
}

/** SciPy's 'auto' rule: exact when one sample has at most 8 values and there are no ties. */
export function chooseMwuMethod(n1: number, n2: number, ties: boolean): 'exact' | 'asymptotic' {
  if (n1 > 8 && n2 > 8) return 'asymptotic';
  if (ties) return 'asymptotic';
  return 'exact';
}

/** C(m + n, m) as a float, by the multiplicative formula (relative error ~1e-15). */
function binomialCoefficient(n: number, k: number): number {
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

/**
 * Frequencies of U = 0..maxU under H0 for sample sizes (m, n): the coefficients of the Gaussian
 * binomial [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), truncated at degree maxU.
 * Low-order coefficients (the tail a small p-value depends on) stay exact integers.
 */
export function mwuFrequencies(m: number, n: number, maxU: number): Float64Array {
  const small = Math.min(m, n);
  const large = Math.max(m, n);
  const g = new Float64Array(maxU + 1);
  g[0] = 1;
  for (let i = 1; i <= small; i++) {
    const up = large + i;
    for (let k = maxU; k >= up; k--) g[k] = (g[k] as number) - (g[k - up] as number);
    for (let k = i; k <= maxU; k++) g[k] = (g[k] as number) + (g[k - i] as number);
  }
  return g;
}

/** P(U <= k) under H0 for sizes (m, n). */
export function mwuCdf(k: number, m: number, n: number): number {
  if (k < 0) return 0;
  const total = m * n;
  if (k >= total) return 1;
  const half = Math.floor(total / 2);
  if (k > half) return 1 - mwuCdf(total - k - 1, m, n); // symmetry: P(U <= k) = 1 - P(U <= mn-k-1)
  const f = mwuFrequencies(m, n, k);
  let s = 0;
  for (let i = 0; i <= k; i++) s += f[i] as number;
  return s / binomialCoefficient(m + n, Math.min(m, n));
}

/** P(U >= k) under H0 for sizes (m, n), computed from the lower tail as SciPy does. */
export function mwuSf(k: number, m: number, n: number): number {
  const kc = m * n - k;
  if (k < kc) {
    const f = mwuFrequencies(m, n, k);
    let s = 0;
    for (let i = 0; i <= k; i++) s += f[i] as number;
    return 1 - (s - (f[k] as number)) / binomialCoefficient(m + n, Math.min(m, n));
  }
  return mwuCdf(kc, m, n);
}

/**
 * Mann-Whitney U test of x against y. NaNs and infinities are removed first (NaN policy "remove").
 * Returns p = NaN when either sample is empty.
 */
export function mannWhitneyU(xIn: ArrayLike<number>, yIn: ArrayLike<number>, opts: MwuOptions = {}): MwuResult {
  return mannWhitneyUSorted(sortedCopy(finite(xIn)), sortedCopy(finite(yIn)), opts);
}

/** `mannWhitneyU` for samples already free of NaN and sorted ascending (no copies, no sorting). */
export function mannWhitneyUSorted(x: Float64Array, y: Float64Array, opts: MwuOptions = {}): MwuResult {
  const alternative = opts.alternative ?? 'two-sided';
  const continuity = opts.continuity ?? true;
  const n1 = x.length;
  const n2 = y.length;
  if (n1 === 0 || n2 === 0) {
    return { u: NaN, p: NaN, method: 'asymptotic', n1, n2, z: NaN, ties: false };
  }
  // U1 = sum of average ranks of x - n1(n1+1)/2 = #{y < x} + #{y = x}/2 over all x, found by merging
  // the two sorted samples; the same sweep yields the pooled tie groups.
  let u1 = 0;
  let tieSum = 0;
  let i = 0;
  let j = 0;
  while (i < n1 || j < n2) {
    const v = Math.min(i < n1 ? (x[i] as number) : Infinity, j < n2 ? (y[j] as number) : Infinity);
    let a = 0;
    while (i < n1 && x[i] === v) {
      a++;
      i++;
    }
    let b = 0;
    while (j < n2 && y[j] === v) {
      b++;
      j++;
    }
    u1 += a * (j - b) + 0.5 * a * b;
    const t = a + b;
    if (t > 1) tieSum += t * t * t - t;
  }
  const u2 = n1 * n2 - u1;
  const hasTies = tieSum > 0;
  const method = (opts.method ?? 'auto') === 'auto' ? chooseMwuMethod(n1, n2, hasTies) : (opts.method as 'exact' | 'asymptotic');

  const n = n1 + n2;
  const sigma = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieSum / (n * (n - 1))));
  const mu = (n1 * n2) / 2;
  const z = sigma > 0 ? (u1 - mu) / sigma : 0;

  let u: number;
  let factor: number;
  if (alternative === 'greater') [u, factor] = [u1, 1];
  else if (alternative === 'less') [u, factor] = [u2, 1];
  else [u, factor] = [Math.max(u1, u2), 2];

  let p: number;
  if (method === 'exact') {
    // SciPy truncates a tied (half-integer) U to an integer before using the exact distribution.
    p = mwuSf(Math.trunc(u), n1, n2);
  } else {
    let num = u - mu;
    if (continuity) num -= 0.5;
    // All values equal: sigma = 0 and U = mu. Like SciPy: p = 1 with the continuity correction
    // (-0.5 / 0 = -inf), NaN (0 / 0) without it; callers treat NaN as "no evidence".
    p = sigma > 0 ? normSf(num / sigma) : num < 0 ? 1 : NaN;
  }
  p = Math.min(1, Math.max(0, p * factor));
  return { u: u1, p, method, n1, n2, z, ties: hasTies };
}
