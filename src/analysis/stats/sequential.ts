// Always-valid sequential testing: the mixture sequential probability ratio test (mSPRT) turned into
// p-values that stay valid however often the same growing sample is looked at.
//
// Why: a canary is judged every tick on the data collected so far. Testing each look at level alpha
// raises the false-alarm rate far above alpha (about 4x over 20 looks). The mSPRT instead tracks a
// mixture likelihood ratio that, under the null, is a non-negative martingale with mean 1. Ville's
// inequality gives P(sup_t Lambda_t >= 1/alpha) <= alpha, so rejecting whenever Lambda >= 1/alpha,
// at any look or at every look, keeps the family-wise false-alarm rate at alpha. No look schedule,
// planned sample size or state is needed (Johari, Pekelis & Walsh 2017, "Always valid inference").
//
// Model: a standardized statistic Z observed with "information" t (the effective sample size,
// n1 n2 / (n1 + n2) for two samples) is treated as Brownian motion B(t) = Z sqrt(t) with drift
// theta t, theta being the effect in standard-deviation units per observation. This is exact for
// normal means and holds asymptotically for the Mann-Whitney and two-proportion z statistics.
// Mixing theta over N(0, tau^2) gives
//   Lambda_t = (1 + t tau^2)^(-1/2) exp(tau^2 B^2 / (2 (1 + t tau^2)))                (two-sided)
// and over the half-normal on theta > 0 (one-sided, 'greater')
//   Lambda_t = 2 (1 + t tau^2)^(-1/2) exp(tau^2 B^2 / (2 (1 + t tau^2))) Phi(tau B / sqrt(1 + t tau^2)).

import type { Alternative } from './mannwhitney.js';
import { normCdf, normIsf } from './normal.js';

export interface MsprtOptions {
  /**
   * Standard deviation tau of the mixing distribution of the standardized effect. The test is most
   * powerful around t tau^2 ~ 8 at the sample size where a decision is expected, so tau ~ the smallest
   * standardized effect worth detecting; default 0.3.
   */
  tau?: number;
  alternative?: Alternative;
}

export const DEFAULT_MSPRT_TAU = 0.3;

/**
 * z-equivalent of a one-sided p-value, z = Phi^-1(1 - p), so exact tests (Fisher, binomial) can feed
 * the mSPRT. Exact discrete p-values are conservative, so the z is stochastically no larger than N(0, 1).
 */
export function zFromPValue(p: number): number {
  return normIsf(Math.min(1 - 1e-15, Math.max(1e-300, p)));
}

/** Effective information of a two-sample comparison: n1 n2 / (n1 + n2). */
export function twoSampleInformation(n1: number, n2: number): number {
  return n1 > 0 && n2 > 0 ? (n1 * n2) / (n1 + n2) : 0;
}

/** log of the mixture likelihood ratio Lambda for statistic z at information t. */
export function msprtLogLikelihoodRatio(z: number, information: number, opts: MsprtOptions = {}): number {
  const tau = opts.tau ?? DEFAULT_MSPRT_TAU;
  const alternative = opts.alternative ?? 'two-sided';
  if (!Number.isFinite(z) || !(information > 0) || !(tau > 0)) return Number.isFinite(z) ? 0 : NaN;
  const zz = alternative === 'less' ? -z : z;
  const s = information * tau * tau; // t tau^2
  const b = zz * Math.sqrt(information);
  const base = -0.5 * Math.log1p(s) + (tau * tau * b * b) / (2 * (1 + s));
  if (alternative === 'two-sided') return base;
  const phi = normCdf((tau * b) / Math.sqrt(1 + s));
  return Math.LN2 + base + Math.log(phi);
}

/**
 * Always-valid p-value at this look: min(1, 1 / Lambda). Rejecting when it is <= alpha at any look
 * keeps the probability of ever rejecting a true null at or below alpha. Pass `previous` (the value
 * from the last look on the same data stream) to get the running minimum, which is what an
 * operator should see: once evidence was reached it is not "forgotten".
 */
export function alwaysValidPValue(z: number, information: number, opts: MsprtOptions = {}, previous = 1): number {
  const logLr = msprtLogLikelihoodRatio(z, information, opts);
  if (Number.isNaN(logLr)) return Math.min(previous, 1);
  const p = Math.min(1, Math.exp(-logLr));
  return Math.min(previous, p);
}

/**
 * The |z| the statistic must reach at information t for the always-valid p-value to reach alpha
 * (the two-sided boundary; the one-sided one is slightly lower). For planning and display.
 */
export function msprtBoundary(information: number, alpha: number, opts: MsprtOptions = {}): number {
  const tau = opts.tau ?? DEFAULT_MSPRT_TAU;
  const alternative = opts.alternative ?? 'two-sided';
  if (!(information > 0)) return Infinity;
  // Bisection on z >= 0: log Lambda is increasing in z there.
  const target = Math.log(1 / alpha);
  let lo = 0;
  let hi = 1;
  const f = (z: number): number => msprtLogLikelihoodRatio(alternative === 'less' ? -z : z, information, { tau, alternative }) - target;
  while (f(hi) < 0 && hi < 1e6) hi *= 2;
  for (let i = 0; i < 100; i++) {
    const mid = (lo + hi) / 2;
    if (f(mid) < 0) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * Information t (effective sample size) at which the mSPRT reaches its boundary with probability
 * `power` when the standardized effect is d: the smallest t with |d| sqrt(t) >= boundary(t) + z_power.
 */
export function sequentialInformationNeeded(d: number, alpha: number, power: number, opts: MsprtOptions = {}): number {
  if (!(Math.abs(d) > 0) || !(alpha > 0 && alpha < 1) || !(power > 0 && power < 1)) return Infinity;
  const zPower = -normIsf(power); // Phi^-1(power)
  const ok = (t: number): boolean => Math.abs(d) * Math.sqrt(t) >= msprtBoundary(t, alpha, opts) + zPower;
  let hi = 1;
  while (!ok(hi)) {
    hi *= 2;
    if (hi > 1e12) return Infinity;
  }
  let lo = hi / 2;
  while (hi - lo > 0.5) {
    const mid = (lo + hi) / 2;
    if (ok(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * Canary observations needed before the judge can detect a standardized effect d with `power`,
 * when the canary gets `canaryShare` of the traffic (stable the rest): the effective information of
 * n_c canary and n_c (1 - share) / share stable observations is n_c (1 - share). For stage planning.
 */
export function canarySamplesNeeded(d: number, canaryShare: number, alpha: number, power: number, opts: MsprtOptions = {}): number {
  if (!(canaryShare > 0 && canaryShare < 1)) return Infinity;
  return Math.ceil(sequentialInformationNeeded(d, alpha, power, opts) / (1 - canaryShare));
}

/** Standardized effect of a rate moving from p0 to p1: |p1 - p0| / sqrt(pbar (1 - pbar)). */
export function proportionEffect(p0: number, p1: number): number {
  const pbar = (p0 + p1) / 2;
  return pbar > 0 && pbar < 1 ? Math.abs(p1 - p0) / Math.sqrt(pbar * (1 - pbar)) : NaN;
}
