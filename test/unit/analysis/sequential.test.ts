// The sequential method keeps the false-alarm rate at alpha when the same canary is tested at every
// look, and naive repeated testing does not (so this test can fail).
import { describe, expect, it } from 'vitest';
import {
  alwaysValidPValue,
  canarySamplesNeeded,
  fisherExact,
  mannWhitneyU,
  msprtBoundary,
  normIsf,
  proportionEffect,
  sequentialInformationNeeded,
  twoSampleInformation,
  zFromPValue,
} from '../../../src/analysis/stats/index.js';
import { rng } from './random.js';

const ALPHA = 0.05;
const RUNS = 2000;
const LOOKS = 20;
const PER_LOOK = 10; // new observations per version between two looks

/** Simulates canaries; returns the share that were ever flagged "worse" by each rule. */
function simulate(shift: number, runs = RUNS): { sequential: number; naive: number } {
  const r = rng(20261121);
  let sequential = 0;
  let naive = 0;
  for (let run = 0; run < runs; run++) {
    const stable: number[] = [];
    const canary: number[] = [];
    let seqHit = false;
    let naiveHit = false;
    let pPrev = 1;
    for (let look = 0; look < LOOKS; look++) {
      for (let i = 0; i < PER_LOOK; i++) {
        stable.push(r.lognormal(5, 0.5));
        canary.push(r.lognormal(5 + shift, 0.5));
      }
      // One-sided: is the canary's latency larger?
      const t = mannWhitneyU(canary, stable, { alternative: 'greater', method: 'asymptotic' });
      if (t.p <= ALPHA) naiveHit = true;
      pPrev = alwaysValidPValue(t.z, twoSampleInformation(canary.length, stable.length), { alternative: 'greater' }, pPrev);
      if (pPrev <= ALPHA) seqHit = true;
    }
    if (seqHit) sequential++;
    if (naiveHit) naive++;
  }
  return { sequential: sequential / runs, naive: naive / runs };
}

describe('always-valid sequential test (mSPRT) under repeated looks', () => {
  it(`keeps the false-alarm rate <= alpha over ${RUNS} null canaries x ${LOOKS} looks; naive testing does not`, () => {
    const { sequential, naive } = simulate(0);
    // Binomial SD of an observed rate near 0.05 over 2000 runs is ~0.005: margin = 2 SD.
    expect(sequential).toBeLessThanOrEqual(ALPHA + 0.01);
    expect(naive).toBeGreaterThan(ALPHA + 0.05);
  });

  it('still detects a real 20 % slowdown (power ~0.83 by 200 samples per version)', () => {
    const { sequential } = simulate(Math.log(1.2), 400);
    expect(sequential).toBeGreaterThan(0.75);
  });

  it('its boundary is above the fixed-sample critical value and grows slowly with information', () => {
    const fixed = normIsf(ALPHA);
    const b100 = msprtBoundary(100, ALPHA, { alternative: 'greater' });
    const b10000 = msprtBoundary(10_000, ALPHA, { alternative: 'greater' });
    expect(b100).toBeGreaterThan(fixed);
    expect(b10000).toBeGreaterThan(b100);
    expect(b10000).toBeLessThan(5);
    expect(alwaysValidPValue(b100, 100, { alternative: 'greater' })).toBeCloseTo(ALPHA, 9);
  });
});

describe('always-valid sequential test for error rates (Fisher -> z -> mSPRT)', () => {
  /** Both versions fail 2 % of requests (null) or the canary fails `canaryRate`; 25 requests each per look. */
  function errorsSim(canaryRate: number, runs: number): { sequential: number; naive: number } {
    const r = rng(77);
    let sequential = 0;
    let naive = 0;
    for (let run = 0; run < runs; run++) {
      let n = 0;
      let es = 0;
      let ec = 0;
      let pPrev = 1;
      let seqHit = false;
      let naiveHit = false;
      for (let look = 0; look < LOOKS; look++) {
        for (let i = 0; i < 25; i++) {
          if (r.bernoulli(0.02)) es++;
          if (r.bernoulli(canaryRate)) ec++;
        }
        n += 25;
        const f = fisherExact(ec, n - ec, es, n - es, 'greater');
        if (f.p <= ALPHA) naiveHit = true;
        pPrev = alwaysValidPValue(zFromPValue(f.p), twoSampleInformation(n, n), { alternative: 'greater' }, pPrev);
        if (pPrev <= ALPHA) seqHit = true;
      }
      if (seqHit) sequential++;
      if (naiveHit) naive++;
    }
    return { sequential: sequential / runs, naive: naive / runs };
  }

  it(`keeps the false-alarm rate <= alpha over ${RUNS} null canaries x ${LOOKS} looks; naive Fisher testing does not`, () => {
    const { sequential, naive } = errorsSim(0.02, RUNS);
    expect(sequential).toBeLessThanOrEqual(ALPHA + 0.01);
    // Fisher is conservative (discrete), so naive repeated testing inflates less than for Mann-Whitney,
    // but still ~5 binomial SDs above alpha.
    expect(naive).toBeGreaterThan(ALPHA + 0.015);
  });

  it('detects a canary failing 8 % of requests instead of 2 %', () => {
    expect(errorsSim(0.08, 300).sequential).toBeGreaterThan(0.85);
  });
});

describe('planning: canary samples the sequential judge needs', () => {
  it('is monotone in the effect and the share', () => {
    expect(sequentialInformationNeeded(0.2, 0.05, 0.8)).toBeGreaterThan(sequentialInformationNeeded(0.4, 0.05, 0.8));
    expect(canarySamplesNeeded(0.3, 0.1, 0.05, 0.8)).toBeGreaterThan(canarySamplesNeeded(0.3, 0.02, 0.05, 0.8));
    expect(canarySamplesNeeded(0, 0.05, 0.05, 0.8)).toBe(Infinity);
  });

  it('plans enough quality scores for 14 % vs 3 % hallucinations at a 5 % canary share (at least the planned power)', () => {
    const alpha = 0.05 / 11; // the judge's per-check level with the default 11 checks
    const nc = canarySamplesNeeded(proportionEffect(0.03, 0.14), 0.05, alpha, 0.8);
    const ns = Math.round((nc * 0.95) / 0.05);
    const r = rng(5);
    let hits = 0;
    const runs = 200;
    for (let i = 0; i < runs; i++) {
      const stable = Array.from({ length: ns }, () => (r.bernoulli(0.03) ? 0 : 1));
      const canary = Array.from({ length: nc }, () => (r.bernoulli(0.14) ? 0 : 1));
      const t = mannWhitneyU(canary, stable, { alternative: 'less' });
      if (alwaysValidPValue(t.z, twoSampleInformation(nc, ns), { alternative: 'less' }) <= alpha) hits++;
    }
    expect(nc).toBeGreaterThan(100);
    expect(nc).toBeLessThan(200);
    // Planned for 0.8; the pooled-rate standardization is conservative when the canary's variance is larger.
    expect(hits / runs).toBeGreaterThan(0.75);
  });
});
