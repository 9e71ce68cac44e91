// Properties of the statistics that the SciPy fixtures do not cover: selection against brute force,
// the seed's sample-size table, the exact U distribution, and NaN handling.
import { describe, expect, it } from 'vitest';
import {
  finite,
  hodgesLehmann,
  kthPairwiseDifference,
  mannWhitneyU,
  medianPairwiseDifference,
  mwuFrequencies,
  powerTwoSample,
  quantile,
  requiredSampleSize,
  requiredSampleSizeTwoSample,
  sortedCopy,
  twoProportionZTest,
  winProbability,
} from '../../../src/analysis/stats/index.js';
import { draw, rng } from './random.js';

function allDifferences(x: ArrayLike<number>, y: ArrayLike<number>): Float64Array {
  const d = new Float64Array(x.length * y.length);
  let c = 0;
  for (let i = 0; i < x.length; i++) for (let j = 0; j < y.length; j++) d[c++] = (x[i] as number) - (y[j] as number);
  return d.sort();
}

describe('k-th pairwise difference by selection', () => {
  it('equals the brute-force order statistic for every k on small samples, with ties', () => {
    const r = rng(1);
    for (const [n1, n2] of [
      [1, 1],
      [1, 7],
      [6, 1],
      [5, 5],
      [13, 9],
    ] as const) {
      const x = sortedCopy(draw(n1, () => Math.round(r.normal(0, 2))));
      const y = sortedCopy(draw(n2, () => Math.round(r.normal(0, 2))));
      const all = allDifferences(x, y);
      for (let k = 1; k <= all.length; k++) expect(kthPairwiseDifference(x, y, k)).toBe(all[k - 1]);
    }
  });

  it('equals the brute-force order statistic when the candidate set is partitioned (300 x 250)', () => {
    const r = rng(2);
    const x = sortedCopy(draw(300, () => r.lognormal(5, 0.6)));
    const y = sortedCopy(draw(250, () => Math.round(r.lognormal(5, 0.6)))); // ties in y
    const all = allDifferences(x, y);
    for (const k of [1, 2, 17, 999, 37_500, 37_501, 60_000, 74_999, 75_000]) expect(kthPairwiseDifference(x, y, k)).toBe(all[k - 1]);
    expect(medianPairwiseDifference(x, y)).toBe(((all[37_499] as number) + (all[37_500] as number)) / 2);
  });

  it('the median of an even number of differences (one selection for both middle values) equals brute force', () => {
    const r = rng(4);
    for (const [n1, n2, round] of [
      [2, 3, false],
      [40, 30, true],
      [64, 50, false],
      [120, 90, true],
      [700, 8, true],
    ] as const) {
      const gen = (): number => (round ? Math.round(r.normal(0, 1.5)) : r.normal(0, 10));
      const x = sortedCopy(draw(n1, gen));
      const y = sortedCopy(draw(n2, gen));
      const all = allDifferences(x, y);
      const mid = all.length / 2;
      expect(medianPairwiseDifference(x, y)).toBe(((all[mid - 1] as number) + (all[mid] as number)) / 2);
    }
  });

  it('handles 1000 x 1000 samples without materialising 10^6 differences', () => {
    const r = rng(3);
    const x = draw(1000, () => r.lognormal(5, 0.5) * 1.1);
    const y = draw(1000, () => r.lognormal(5, 0.5));
    const hl = hodgesLehmann(x, y, { confLevel: 0.98 });
    expect(hl.method).toBe('asymptotic');
    expect(hl.lower).toBeLessThan(hl.estimate);
    expect(hl.estimate).toBeLessThan(hl.upper);
    expect(hl.estimate).toBeGreaterThan(0);
  });

  it('returns NaN for out-of-range k and empty samples', () => {
    expect(kthPairwiseDifference([1], [2], 0)).toBeNaN();
    expect(kthPairwiseDifference([1], [2], 2)).toBeNaN();
    expect(hodgesLehmann([], [1, 2]).estimate).toBeNaN();
  });
});

describe('sample size (seed 001 table: 1%->78400, 2%->19600, 5%->3137, 10%->785, 15%->349, 20%->197)', () => {
  it('reproduces the rows for 10, 15 and 20 % exactly', () => {
    expect([0.1, 0.15, 0.2].map((d) => requiredSampleSize(d))).toEqual([785, 349, 197]);
  });
  it('differs from the 1, 2 and 5 % rows only by the seed rounding z to 1.96 + 0.84 (< 0.12 %)', () => {
    const seed: [number, number][] = [
      [0.01, 78400],
      [0.02, 19600],
      [0.05, 3137],
    ];
    for (const [d, n] of seed) {
      const ours = requiredSampleSize(d);
      expect(Math.abs(ours - n) / n).toBeLessThan(0.0012);
      // With z rounded to 2.8 the formula gives the seed's first two rows exactly.
      if (d < 0.05) expect(Math.round((2.8 / d) ** 2)).toBe(n);
    }
    expect([0.01, 0.02, 0.05].map((d) => requiredSampleSize(d))).toEqual([78489, 19623, 3140]);
  });
  it('the two-sample formula is twice the seed formula and gives 80 % power', () => {
    const n = requiredSampleSizeTwoSample(0.1, 0.25); // detect 0.1 on a 0..1 score with SD 0.25
    expect(n).toBe(99);
    expect(powerTwoSample(n, 0.1 / 0.25)).toBeGreaterThanOrEqual(0.8);
    expect(powerTwoSample(n - 1, 0.1 / 0.25)).toBeLessThan(0.8);
    expect(requiredSampleSize(0.05, { sides: 1 })).toBeLessThan(requiredSampleSize(0.05));
  });
});

describe('Mann-Whitney details', () => {
  it('exact frequencies sum to C(m+n, m) and are symmetric', () => {
    const f = mwuFrequencies(4, 6, 24);
    const total = f.reduce((a, b) => a + b, 0);
    expect(total).toBe(210);
    for (let u = 0; u <= 24; u++) expect(f[u]).toBe(f[24 - u]);
  });
  it('removes NaN and infinities before testing (NaN policy: remove)', () => {
    const clean = mannWhitneyU([1, 2, 3, 4], [5, 6, 7]);
    const dirty = mannWhitneyU([1, NaN, 2, 3, Infinity, 4], [5, 6, -Infinity, 7, NaN]);
    expect(dirty).toEqual(clean);
    expect(finite([1, null, undefined, NaN, 2])).toEqual([1, 2]);
  });
  it('win probability is U / (n1 n2) over all pairs', () => {
    const r = mannWhitneyU([2, 4], [1, 3, 5]);
    expect(winProbability(r.u, 2, 3)).toBeCloseTo(3 / 6, 12);
  });
  it('quantiles use linear interpolation like numpy.percentile', () => {
    expect(quantile([1, 2, 3, 4], 0.99)).toBeCloseTo(3.97, 12);
    expect(quantile([5], 0.99)).toBe(5);
  });
  it('two-proportion z-test agrees in direction with the rates', () => {
    const r = twoProportionZTest(30, 1000, 10, 1000, 'greater');
    expect(r.z).toBeGreaterThan(3);
    expect(r.p).toBeLessThan(0.001);
  });
});
