// Tests for two rates (errors, hallucinations): Fisher's exact test as scipy.stats.fisher_exact,
// the normal-approximation two-proportion z-test, and the exact binomial test against a fixed rate.

import type { Alternative } from './mannwhitney.js';
import { normCdf, normSf } from './normal.js';
import { binomialSf, logChoose } from './special.js';

export interface FisherResult {
  /** Sample odds ratio a d / (b c) (SciPy's statistic); Infinity when b c = 0, NaN for an empty margin. */
  oddsRatio: number;
  p: number;
}

/** SciPy's relative tolerance when comparing table probabilities in the two-sided test. */
const FISHER_GAMMA = 1 + 1e-14;

/**
 * Fisher's exact test on the 2x2 table [[a, b], [c, d]]. 'greater': the odds in the first row
 * (a / b) are larger than in the second (c / d). Two-sided p sums the probabilities of all tables
 * with the same margins that are no more likely than the observed one (SciPy's definition).
 */
export function fisherExact(a: number, b: number, c: number, d: number, alternative: Alternative = 'two-sided'): FisherResult {
  for (const v of [a, b, c, d]) {
    if (!Number.isInteger(v) || v < 0) return { oddsRatio: NaN, p: NaN };
  }
  const row1 = a + b;
  const row2 = c + d;
  const col1 = a + c;
  const total = row1 + row2;
  if (row1 === 0 || row2 === 0 || col1 === 0 || b + d === 0) return { oddsRatio: NaN, p: 1 };
  const oddsRatio = c > 0 && b > 0 ? (a * d) / (b * c) : Infinity;
  // a ~ Hypergeometric(total, row1, col1).
  const lo = Math.max(0, col1 - row2);
  const hi = Math.min(row1, col1);
  const logDen = logChoose(total, col1);
  const pmf = (k: number): number => Math.exp(logChoose(row1, k) + logChoose(row2, col1 - k) - logDen);
  let p = 0;
  if (alternative === 'less') {
    for (let k = lo; k <= a; k++) p += pmf(k);
  } else if (alternative === 'greater') {
    for (let k = a; k <= hi; k++) p += pmf(k);
  } else {
    const pObs = pmf(a) * FISHER_GAMMA;
    for (let k = lo; k <= hi; k++) {
      const q = pmf(k);
      if (q <= pObs) p += q;
    }
  }
  return { oddsRatio, p: Math.min(1, p) };
}

export interface TwoProportionResult {
  /** z of p1 - p2 with the pooled standard error. */
  z: number;
  p: number;
  p1: number;
  p2: number;
}

/**
 * Two-proportion z-test (pooled variance, no continuity correction) for x1/n1 against x2/n2.
 * Valid when every expected cell count is at least about 5; use `fisherExact` otherwise.
 * 'greater': p1 > p2.
 */
export function twoProportionZTest(x1: number, n1: number, x2: number, n2: number, alternative: Alternative = 'two-sided'): TwoProportionResult {
  const p1 = x1 / n1;
  const p2 = x2 / n2;
  if (!(n1 > 0 && n2 > 0)) return { z: NaN, p: NaN, p1, p2 };
  const pooled = (x1 + x2) / (n1 + n2);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2));
  const z = se > 0 ? (p1 - p2) / se : 0;
  let p: number;
  if (alternative === 'greater') p = normSf(z);
  else if (alternative === 'less') p = normCdf(z);
  else p = Math.min(1, 2 * normSf(Math.abs(z)));
  return { z, p, p1, p2 };
}

/** Exact one-sided binomial test: P(X >= k) for X ~ Binomial(n, p0) (scipy.stats.binomtest, 'greater'). */
export function binomialTestGreater(k: number, n: number, p0: number): number {
  return binomialSf(k, n, p0);
}
