// Sample-size planning: observations per group needed to detect an effect with a given alpha and power.

import { normIsf, normPpf, normSf } from './normal.js';

export interface SampleSizeOptions {
  /** Significance level (default 0.05). */
  alpha?: number;
  /** Probability of detecting the effect when it is real (default 0.8). */
  power?: number;
  /** Two-sided (alpha split over both tails, default) or one-sided. */
  sides?: 1 | 2;
}

function zSum(opts: SampleSizeOptions): number {
  const alpha = opts.alpha ?? 0.05;
  const power = opts.power ?? 0.8;
  const sides = opts.sides ?? 2;
  return normIsf(alpha / sides) + normPpf(power);
}

/**
 * Seed 001's formula, n = ceil(((z_{1-alpha/2} + z_power) / effect)^2) per group, with `effect` the
 * difference in units of the standard deviation of a paired difference (equivalently a one-sample
 * test). With exact z values it gives 78489, 19623, 3140, 785, 349, 197 for effects 1, 2, 5, 10, 15,
 * 20 %; the seed's table prints 78400, 19600 (z rounded to 1.96 + 0.84 = 2.8) and 3137 for the
 * first three and the same values for the last three. For two independent groups use
 * `requiredSampleSizeTwoSample`, which is twice as large.
 */
export function requiredSampleSize(effect: number, opts: SampleSizeOptions = {}): number {
  if (!(effect > 0)) return Infinity;
  const n = (zSum(opts) / effect) ** 2;
  return Math.ceil(n - 1e-9);
}

/**
 * Observations per group for a two-sample comparison of means of two independent groups:
 * n = ceil(2 ((z_{1-alpha/sides} + z_power) sd / delta)^2). `delta` is the difference to detect in
 * the metric's units and `sd` the metric's standard deviation (pass sd = 1 for Cohen's d).
 * For normally distributed data the Mann-Whitney test needs about pi/3 ~ 1.047 times as many
 * (its asymptotic relative efficiency is 3/pi).
 */
export function requiredSampleSizeTwoSample(delta: number, sd: number, opts: SampleSizeOptions = {}): number {
  if (!(delta > 0) || !(sd > 0)) return delta > 0 && sd === 0 ? 2 : Infinity;
  const n = 2 * ((zSum(opts) * sd) / delta) ** 2;
  return Math.ceil(n - 1e-9);
}

/** Power of the one- or two-sided two-sample z-test with n per group for a standardized effect d = delta / sd. */
export function powerTwoSample(n: number, d: number, opts: Omit<SampleSizeOptions, 'power'> = {}): number {
  const alpha = opts.alpha ?? 0.05;
  const sides = opts.sides ?? 2;
  if (!(n > 0)) return 0;
  return normSf(normIsf(alpha / sides) - Math.abs(d) * Math.sqrt(n / 2));
}
