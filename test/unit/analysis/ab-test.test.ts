// A/B analysis: decisions in both directions, every-pair win rate, and that a 10 % quality difference
// becomes significant at about the sample size the power analysis predicts.
import { describe, expect, it } from 'vitest';
import { analyzeExperiment, sequentialSampleSize } from '../../../src/analysis/ab-test.js';
import { draw, rng } from './random.js';

describe('analyzeExperiment', () => {
  it('says B is better when B scores higher (higher is better) and reports every number', () => {
    const r = rng(1);
    const a = draw(400, () => r.normal(0.7, 0.2));
    const b = draw(400, () => r.normal(0.8, 0.2));
    const res = analyzeExperiment(a, b, { direction: 'higher', minDetectableEffect: 0.05 });
    expect(res.status).toBe('analyzed');
    expect(res.decision).toBe('b_better');
    expect(res.significant).toBe(true);
    expect(res.effect_size).toBeGreaterThan(0.3);
    expect(res.win_rate).toBeGreaterThan(0.55); // expected Phi(0.1 / (0.2 sqrt 2)) = 0.64
    expect(res.hl_ci[0]).toBeLessThan(res.hl_shift);
    expect(res.hl_shift).toBeGreaterThan(0);
    expect(res.samples_needed_for_power).toBe(
      Math.ceil(2 * (((1.959963984540054 + 0.8416212335729143) * Math.sqrt((399 * res.std_a ** 2 + 399 * res.std_b ** 2) / 798)) / 0.05) ** 2),
    );
    expect(res.samples_needed_sequential).toBeGreaterThan(res.samples_needed_for_power);
    expect(res.method).toBe('msprt');
  });

  it('for latency (lower is better) a slower B makes A better', () => {
    const r = rng(2);
    const a = draw(300, () => r.lognormal(Math.log(200), 0.3));
    const b = draw(300, () => r.lognormal(Math.log(260), 0.3));
    expect(analyzeExperiment(a, b, { direction: 'lower' }).decision).toBe('a_better');
  });

  it('equal versions: no difference; tiny samples: insufficient data with the samples still needed', () => {
    const r = rng(3);
    const res = analyzeExperiment(
      draw(500, () => r.normal(0.7, 0.2)),
      draw(500, () => r.normal(0.7, 0.2)),
      { direction: 'higher', minDetectableEffect: 0.05 },
    );
    expect(res.decision).toBe('no_difference');
    const few = analyzeExperiment([0.5, 0.6], [0.7, 0.8], { direction: 'higher', minDetectableEffect: 0.1 });
    expect(few.status).toBe('insufficient_data');
    expect(few.additional_samples_needed).toBeGreaterThan(0);
  });

  it('sequential analysis keeps the running minimum of the always-valid p-value', () => {
    const r = rng(5);
    const a = draw(200, () => r.normal(0.7, 0.2));
    const b = draw(200, () => r.normal(0.7, 0.2));
    const res = analyzeExperiment(a, b, { direction: 'higher', previousPValue: 0.001 });
    expect(res.p_value_sequential).toBe(0.001);
    expect(res.p_value_decision).toBe(res.p_value_sequential); // the sequential analysis decides on the always-valid p-value
    expect(res.p_value_sequential).toBeLessThan(res.p_value); // the carried minimum, not this look's fixed-sample p
    const fixed = analyzeExperiment(a, b, { direction: 'higher', sequential: false });
    expect(fixed.method).toBe('fixed');
    expect(fixed.p_value_decision).toBe(fixed.p_value);
  });

  it('win rate uses all pairs, not the seed index pairing', () => {
    // Index pairing (b[i] > a[i]) gives 0 here; B wins 3 of 4 pairs.
    const res = analyzeExperiment([1, 3], [2, 4], { direction: 'higher', minSamples: 1, sequential: false });
    expect(res.win_rate).toBe(0.75);
  });

  it('a 10 % quality difference is significant at the predicted sample size about as often as the power says', () => {
    // Scores 0.70 vs 0.77 (10 % better), SD 0.2: d = 0.35.
    const d = 0.07 / 0.2;
    const runs = 300;
    const fixedN = Math.ceil(2 * ((1.959963984540054 + 0.8416212335729143) / d) ** 2);
    const seqN = sequentialSampleSize(d, 0.05, 0.8);
    let fixedHits = 0;
    let seqHits = 0;
    const r = rng(4);
    for (let i = 0; i < runs; i++) {
      const a = draw(seqN, () => r.normal(0.7, 0.2));
      const b = draw(seqN, () => r.normal(0.77, 0.2));
      const fixed = analyzeExperiment(a.slice(0, fixedN), b.slice(0, fixedN), { direction: 'higher', minDetectableEffect: 0.07, sequential: false });
      if (fixed.decision === 'b_better') fixedHits++;
      if (i === 0) expect(fixed.samples_needed_for_power).toBeGreaterThan(fixedN * 0.8);
      const seq = analyzeExperiment(a, b, { direction: 'higher', minDetectableEffect: 0.07 });
      if (seq.decision === 'b_better') seqHits++;
    }
    // Mann-Whitney's efficiency on normal data is 0.955, so its power is a little under 0.8.
    expect(fixedHits / runs).toBeGreaterThan(0.7);
    expect(fixedHits / runs).toBeLessThan(0.9);
    expect(seqHits / runs).toBeGreaterThan(0.7);
  });
});
