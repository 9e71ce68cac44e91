// The error count's sequential test: exact (the closed form equals the integral it stands for), valid
// under a look after every request (equal rates rarely, and at most alpha of the time, ever reject),
// and fast on a clearly worse canary (so this test can fail both ways).
import { describe, expect, it } from 'vitest';
import { alwaysValidBinomialPValue, binomialMixtureLogLR, binomialUpperBound } from '../../../src/analysis/stats/index.js';
import { rng } from './random.js';

describe('binomial mixture sequential test', () => {
  it('its likelihood ratio is the mixture integral (midpoint rule, 200 000 steps)', () => {
    for (const [e, n, p0] of [
      [3, 20, 0.05],
      [0, 50, 0.01],
      [12, 40, 0.2],
    ] as const) {
      const K = 200_000;
      let sum = 0;
      for (let i = 0; i < K; i++) {
        const t = p0 + ((1 - p0) * (i + 0.5)) / K;
        sum += t ** e * (1 - t) ** (n - e);
      }
      const lr = sum / K / (p0 ** e * (1 - p0) ** (n - e));
      expect(binomialMixtureLogLR(e, n, p0)).toBeCloseTo(Math.log(lr), 6);
    }
  });

  it("the Clopper-Pearson upper bound equals SciPy's (beta.ppf(1 - alpha, e + 1, n - e))", () => {
    expect(binomialUpperBound(5, 100, 0.05)).toBeCloseTo(0.10225337764327642, 10);
    expect(binomialUpperBound(0, 300, 0.005)).toBeCloseTo(1 - 0.005 ** (1 / 300), 12);
    expect(binomialUpperBound(7, 7, 0.05)).toBe(1);
  });

  it('a rate at the null, looked at after every one of 300 requests, is ever rejected at most alpha of the time', () => {
    const r = rng(20261124);
    const alpha = 0.05;
    for (const [p, p0] of [
      [0.02, 0.02],
      [0.1, 0.1],
      [0.01, 0.02],
    ] as const) {
      const runs = 1000;
      let rejected = 0;
      for (let run = 0; run < runs; run++) {
        let e = 0;
        let pv = 1;
        for (let n = 1; n <= 300; n++) {
          if (r.uniform() < p) e++;
          pv = alwaysValidBinomialPValue(e, n, p0, pv);
          if (pv <= alpha) break;
        }
        if (pv <= alpha) rejected++;
      }
      // one-sided 99 % binomial margin over alpha
      expect(rejected / runs, `p=${p}, p0=${p0}`).toBeLessThanOrEqual(alpha + 2.33 * Math.sqrt((alpha * (1 - alpha)) / runs));
    }
  });

  it('a 20 % error rate against a bound of 1 % is decided within about twenty requests', () => {
    const r = rng(7);
    const at: number[] = [];
    for (let run = 0; run < 200; run++) {
      let e = 0;
      let pv = 1;
      for (let n = 1; n <= 200; n++) {
        if (r.uniform() < 0.2) e++;
        pv = alwaysValidBinomialPValue(e, n, 0.01, pv);
        if (pv <= 0.05 / 12) {
          at.push(n);
          break;
        }
      }
    }
    expect(at).toHaveLength(200);
    const median = [...at].sort((a, b) => a - b)[100]!;
    expect(median).toBeLessThanOrEqual(25);
  });
});
