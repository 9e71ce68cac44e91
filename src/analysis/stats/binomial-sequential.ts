// A sequential test on an error count that is exact at any sample size: is the canary's error rate
// above p0? The mixture likelihood ratio of "rate = theta" against "rate = p0", theta uniform on
// [p0, 1], is a non-negative supermartingale under any rate <= p0 (each factor's expectation,
// p theta / p0 + (1 - p)(1 - theta) / (1 - p0), is at most 1 when p <= p0 <= theta), so by Ville's
// inequality rejecting when it reaches 1 / alpha, at any look or every look, keeps the chance of
// ever rejecting a true null at or below alpha. Unlike the normal-approximation mSPRT it needs no
// minimum sample: a canary failing 20 % of its requests against a stable version failing none is
// decided after about twenty requests (test/unit/analysis/binomial-sequential.test.ts).

import { betaInc, logGamma } from './special.js';

/**
 * log of the mixture likelihood ratio after `errors` errors in `n` requests:
 *   Lambda = [ integral over [p0, 1] of theta^e (1 - theta)^(n - e) d theta / (1 - p0) ] / [ p0^e (1 - p0)^(n - e) ]
 *          = B(e + 1, n - e + 1) (1 - I_p0(e + 1, n - e + 1)) / ((1 - p0) p0^e (1 - p0)^(n - e)).
 */
export function binomialMixtureLogLR(errors: number, n: number, p0: number): number {
  if (!(n > 0) || !(p0 > 0) || p0 >= 1 || errors < 0 || errors > n) return 0;
  const a = errors + 1;
  const b = n - errors + 1;
  const tail = 1 - betaInc(p0, a, b);
  if (!(tail > 0)) return -Infinity;
  const logBeta = logGamma(a) + logGamma(b) - logGamma(a + b);
  return logBeta + Math.log(tail) - Math.log1p(-p0) - errors * Math.log(p0) - (n - errors) * Math.log1p(-p0);
}

/**
 * Always-valid p-value of "the error rate is at most p0" after `errors` in `n`: min(1, 1 / Lambda),
 * and the running minimum with `previous` (the value of the last look on the same growing sample).
 */
export function alwaysValidBinomialPValue(errors: number, n: number, p0: number, previous = 1): number {
  const logLr = binomialMixtureLogLR(errors, n, p0);
  return Math.min(previous, 1, Math.exp(-logLr));
}

/** One-sided Clopper-Pearson upper bound of a rate: the p with P(X <= errors | n, p) = alpha. */
export function binomialUpperBound(errors: number, n: number, alpha: number): number {
  if (!(n > 0)) return 1;
  if (errors >= n) return 1;
  // P(X <= e) = 1 - I_p(e + 1, n - e), decreasing in p: bisect for 1 - I = alpha
  let lo = errors / n;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (1 - betaInc(mid, errors + 1, n - errors) > alpha) lo = mid;
    else hi = mid;
  }
  return hi;
}
