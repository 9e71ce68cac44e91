// A/B experiment analysis: is version B better than version A on one metric, with how much
// confidence, how large the effect is, and how many more samples the configured power needs.
// Pure; seed 001's ABTestManager.analyze, with every-pair win rate, Hodges-Lehmann shift, and an
// always-valid p-value so the experiment can be analysed as often as wanted.

import { finite, mean, quantileSorted, sortedCopy, std } from './stats/describe.js';
import { cohensD, cohensDAverageVariance, pooledSd, welchTTest, winProbability } from './stats/effect.js';
import { hodgesLehmannSorted } from './stats/hodgeslehmann.js';
import { mannWhitneyUSorted } from './stats/mannwhitney.js';
import { requiredSampleSizeTwoSample } from './stats/power.js';
import { alwaysValidPValue, DEFAULT_MSPRT_TAU, sequentialInformationNeeded, twoSampleInformation } from './stats/sequential.js';

export interface ExperimentConfig {
  /** Which direction is better: 'higher' for quality scores, 'lower' for latencies. */
  direction: 'higher' | 'lower';
  /** Significance level (default 0.05, two-sided). */
  alpha?: number;
  /** Power the sample-size advice is for (default 0.8). */
  power?: number;
  /**
   * Smallest difference of means worth detecting, in the metric's units (e.g. 0.05 on a 0-1 score).
   * Default: the observed |mean_b - mean_a| (how many samples would confirm what is seen).
   */
  minDetectableEffect?: number;
  /** Always-valid p-values (mSPRT) so repeated analysis keeps alpha; default true. false: one fixed-sample look. */
  sequential?: boolean;
  /** mSPRT mixing SD of the standardized effect (default 0.3). */
  tau?: number;
  /** Fewest samples per group before analysing (seed 001: 30). */
  minSamples?: number;
  /** Confidence level of the Hodges-Lehmann interval (default 0.95). */
  confLevel?: number;
  /** `p_value_sequential` of the previous analysis of the same experiment (running minimum). */
  previousPValue?: number;
}

export type ExperimentDecision = 'b_better' | 'a_better' | 'no_difference' | 'insufficient_data';

export interface ExperimentResult {
  status: 'analyzed' | 'insufficient_data';
  n_a: number;
  n_b: number;
  mean_a: number;
  mean_b: number;
  std_a: number;
  std_b: number;
  median_a: number;
  median_b: number;
  /** Two-sided Mann-Whitney p-value (fixed-sample; valid for one look). */
  p_value: number;
  /** Always-valid two-sided p-value (mSPRT); equals p_value when sequential = false. */
  p_value_sequential: number;
  /** The p-value the decision used. */
  p_value_decision: number;
  alpha: number;
  significant: boolean;
  decision: ExperimentDecision;
  /** Cohen's d of B over A with the standard pooled SD. */
  effect_size: number;
  /** Cohen's d as seed 001 computes it (root mean of the two variances). */
  effect_size_seed: number;
  /** P(B > A) over all pairs, ties counting half: U_B / (n_a n_b). */
  win_rate: number;
  /** Hodges-Lehmann shift B - A with its confidence interval. */
  hl_shift: number;
  hl_ci: [number, number];
  hl_conf_level: number;
  welch: { t: number; df: number; p: number };
  /** Samples per group a fixed-sample test needs for `power` at the minimum detectable effect. */
  samples_needed_for_power: number;
  /** The same under sequential monitoring (mSPRT boundary instead of z_{1-alpha/2}). */
  samples_needed_sequential: number;
  /** Per group, beyond the smaller group's current size, for the method in use. */
  additional_samples_needed: number;
  min_detectable_effect: number;
  method: 'msprt' | 'fixed';
}

/** Samples per group for the mSPRT to detect a standardized effect d with `power` (balanced groups: n = 2 t). */
export function sequentialSampleSize(d: number, alpha: number, power: number, tau = DEFAULT_MSPRT_TAU): number {
  return Math.ceil(2 * sequentialInformationNeeded(d, alpha, power, { tau }));
}

/** Analyses samples of one metric from versions A and B. NaNs are removed first. */
export function analyzeExperiment(aIn: readonly number[], bIn: readonly number[], cfg: ExperimentConfig): ExperimentResult {
  const alpha = cfg.alpha ?? 0.05;
  const power = cfg.power ?? 0.8;
  const sequential = cfg.sequential ?? true;
  const tau = cfg.tau ?? DEFAULT_MSPRT_TAU;
  const confLevel = cfg.confLevel ?? 0.95;
  const a = finite(aIn);
  const b = finite(bIn);
  // sorted once for the medians, Mann-Whitney and Hodges-Lehmann
  const as = sortedCopy(a);
  const bs = sortedCopy(b);
  const base = {
    n_a: a.length,
    n_b: b.length,
    mean_a: mean(a),
    mean_b: mean(b),
    std_a: std(a),
    std_b: std(b),
    median_a: quantileSorted(as, 0.5),
    median_b: quantileSorted(bs, 0.5),
  };
  const sd = pooledSd(a, b);
  const mde = cfg.minDetectableEffect ?? Math.abs(base.mean_b - base.mean_a);
  const d = sd > 0 ? mde / sd : NaN;
  const fixedN = Number.isFinite(d) ? requiredSampleSizeTwoSample(mde, sd, { alpha, power }) : NaN;
  const seqN = Number.isFinite(d) ? sequentialSampleSize(d, alpha, power, tau) : NaN;
  const method: 'msprt' | 'fixed' = sequential ? 'msprt' : 'fixed';
  const needed = sequential ? seqN : fixedN;
  const additional = Number.isFinite(needed) ? Math.max(0, needed - Math.min(a.length, b.length)) : needed;

  if (a.length < (cfg.minSamples ?? 30) || b.length < (cfg.minSamples ?? 30)) {
    return {
      status: 'insufficient_data',
      ...base,
      p_value: NaN,
      p_value_sequential: NaN,
      p_value_decision: NaN,
      alpha,
      significant: false,
      decision: 'insufficient_data',
      effect_size: NaN,
      effect_size_seed: NaN,
      win_rate: NaN,
      hl_shift: NaN,
      hl_ci: [NaN, NaN],
      hl_conf_level: confLevel,
      welch: { t: NaN, df: NaN, p: NaN },
      samples_needed_for_power: fixedN,
      samples_needed_sequential: seqN,
      additional_samples_needed: additional,
      min_detectable_effect: mde,
      method,
    };
  }

  // B against A: 'greater' direction means B's values tend to be larger.
  const mw = mannWhitneyUSorted(bs, as, { alternative: 'two-sided' });
  const pSeq = sequential ? alwaysValidPValue(mw.z, twoSampleInformation(a.length, b.length), { tau }, cfg.previousPValue ?? 1) : mw.p;
  // p_value_sequential is the fixed-sample p-value when sequential = false: the decision uses it either way
  const significant = pSeq <= alpha;
  const winRate = winProbability(mw.u, b.length, a.length);
  const bLarger = winRate > 0.5;
  const bBetter = cfg.direction === 'higher' ? bLarger : !bLarger;
  const decision: ExperimentDecision = !significant || winRate === 0.5 ? 'no_difference' : bBetter ? 'b_better' : 'a_better';
  const hl = hodgesLehmannSorted(bs, as, { confLevel });
  const welch = welchTTest(b, a);
  return {
    status: 'analyzed',
    ...base,
    p_value: mw.p,
    p_value_sequential: pSeq,
    p_value_decision: pSeq,
    alpha,
    significant,
    decision,
    effect_size: cohensD(a, b),
    effect_size_seed: cohensDAverageVariance(a, b),
    win_rate: winRate,
    hl_shift: hl.estimate,
    hl_ci: [hl.lower, hl.upper],
    hl_conf_level: confLevel,
    welch: { t: welch.t, df: welch.df, p: welch.p },
    samples_needed_for_power: fixedN,
    samples_needed_sequential: seqN,
    additional_samples_needed: additional,
    min_detectable_effect: mde,
    method,
  };
}
