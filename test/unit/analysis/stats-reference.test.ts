// Checks src/analysis/stats against reference values computed with SciPy (test/fixtures/stats).
// Tolerance: relative 1e-6 of the reference, with an absolute floor of 1e-15 for references that
// are exactly 0 (p-values span 1e-300..1, so a relative criterion is the meaningful one).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  alwaysValidPValue,
  betaInc,
  binomialSf,
  cohensD,
  cohensDAverageVariance,
  fisherExact,
  hodgesLehmann,
  logGamma,
  mannWhitneyU,
  mean,
  normCdf,
  quantileSorted,
  normIsf,
  normPpf,
  normSf,
  requiredSampleSize,
  requiredSampleSizeTwoSample,
  std,
  studentTSf,
  welchTTest,
  type Alternative,
  type MwuMethod,
} from '../../../src/analysis/stats/index.js';

type Num = number | 'NaN' | 'Infinity' | '-Infinity';
const num = (v: Num): number => (typeof v === 'number' ? v : Number(v));

interface Reference {
  normal: { cdf: { z: number; cdf: Num; sf: Num }[]; ppf: { p: number; ppf: Num; isf: Num }[] };
  mannwhitneyu: { x: number[]; y: number[]; alternative: Alternative; method: MwuMethod; continuity: boolean; u: Num; p: Num }[];
  hodgesLehmann: { x: number[]; y: number[]; confLevel: number; method: 'exact' | 'asymptotic'; estimate: number; lower: number; upper: number }[];
  fisher: { table: [[number, number], [number, number]]; alternative: Alternative; oddsRatio: Num; p: Num }[];
  sampleSize: { effect: number; alpha: number; power: number; sides: 1 | 2; seedFormula: number; twoSample: number }[];
  effect: {
    a: number[];
    b: number[];
    meanA: number;
    meanB: number;
    stdA: number;
    stdB: number;
    cohensD: number;
    cohensDAverageVariance: number;
    welch: Record<Alternative, { t: number; p: number; df: number }>;
  }[];
  special: {
    tsf: { t: number; df: number; sf: number }[];
    binomSf: { k: number; n: number; p: number; sf: number }[];
    lgamma: { x: number; lgamma: number }[];
    betainc: { x: number; a: number; b: number; value: number }[];
  };
  msprt: { z: number; information: number; tau: number; pTwoSided: number; pGreater: number }[];
  quantile: { x: number[]; q: number[]; quantile: number[] }[];
}

const ref = JSON.parse(readFileSync(new URL('../../fixtures/stats/reference.json', import.meta.url), 'utf8')) as Reference;

const REL = 1e-6;
function close(actual: number, expected: number, what: string): void {
  if (Number.isNaN(expected)) {
    expect(actual, what).toBeNaN();
    return;
  }
  if (!Number.isFinite(expected)) {
    expect(actual, what).toBe(expected);
    return;
  }
  const err = Math.abs(actual - expected);
  const ok = err <= REL * Math.max(Math.abs(expected), Math.abs(actual)) || err <= 1e-15;
  if (!ok) expect.fail(`${what}: got ${actual}, SciPy ${expected} (diff ${err})`);
}

describe('normal distribution vs scipy.stats.norm', () => {
  it.each(ref.normal.cdf)('cdf/sf at z=$z', ({ z, cdf, sf }) => {
    close(normCdf(z), num(cdf), 'cdf');
    close(normSf(z), num(sf), 'sf');
  });
  it.each(ref.normal.ppf)('ppf/isf at p=$p', ({ p, ppf, isf }) => {
    close(normPpf(p), num(ppf), 'ppf');
    close(normIsf(p), num(isf), 'isf');
  });
});

describe('Mann-Whitney U vs scipy.stats.mannwhitneyu', () => {
  it(`matches ${ref.mannwhitneyu.length} cases (exact, asymptotic, ties, one- and two-sided, n = 1..120)`, () => {
    for (const [i, c] of ref.mannwhitneyu.entries()) {
      const r = mannWhitneyU(c.x, c.y, { alternative: c.alternative, method: c.method, continuity: c.continuity });
      const what = `case ${i} n=(${c.x.length},${c.y.length}) ${c.alternative} ${c.method} cont=${String(c.continuity)} -> ${r.method}`;
      close(r.u, num(c.u), `${what} U`);
      close(r.p, num(c.p), `${what} p`);
    }
  });
});

describe('Hodges-Lehmann vs brute force and the inverted SciPy test', () => {
  it.each(ref.hodgesLehmann.map((c, i) => ({ ...c, i })))('case $i: n=($x.length,$y.length) conf=$confLevel $method', (c) => {
    const r = hodgesLehmann(c.x, c.y, { confLevel: c.confLevel });
    expect(r.method).toBe(c.method);
    close(r.estimate, c.estimate, 'estimate');
    close(r.lower, c.lower, 'lower');
    close(r.upper, c.upper, 'upper');
  });
});

describe('Fisher exact test vs scipy.stats.fisher_exact', () => {
  it.each(ref.fisher)('$table $alternative', ({ table, alternative, oddsRatio, p }) => {
    const [[a, b], [c, d]] = table;
    const r = fisherExact(a, b, c, d, alternative);
    close(r.oddsRatio, num(oddsRatio), 'odds ratio');
    close(r.p, num(p), 'p');
  });
});

describe('sample size', () => {
  it.each(ref.sampleSize)('effect $effect alpha $alpha power $power sides $sides', (c) => {
    const opts = { alpha: c.alpha, power: c.power, sides: c.sides };
    expect(requiredSampleSize(c.effect, opts)).toBe(c.seedFormula);
    expect(requiredSampleSizeTwoSample(c.effect, 1, opts)).toBe(c.twoSample);
  });
});

describe("effect sizes and Welch's t vs NumPy/SciPy", () => {
  it.each(ref.effect.map((c, i) => ({ ...c, i })))('case $i', (c) => {
    close(mean(c.a), c.meanA, 'mean a');
    close(mean(c.b), c.meanB, 'mean b');
    close(std(c.a), c.stdA, 'std a');
    close(std(c.b), c.stdB, 'std b');
    close(cohensD(c.a, c.b), c.cohensD, "Cohen's d");
    close(cohensDAverageVariance(c.a, c.b), c.cohensDAverageVariance, "seed's Cohen's d");
    for (const alt of ['two-sided', 'less', 'greater'] as const) {
      const w = welchTTest(c.a, c.b, alt);
      close(w.t, c.welch[alt].t, `welch t ${alt}`);
      close(w.df, c.welch[alt].df, `welch df ${alt}`);
      close(w.p, c.welch[alt].p, `welch p ${alt}`);
    }
  });
});

describe('special functions vs scipy.special / scipy.stats', () => {
  it('t survival function', () => {
    for (const c of ref.special.tsf) close(studentTSf(c.t, c.df), c.sf, `t=${c.t} df=${c.df}`);
  });
  it('binomial survival function', () => {
    for (const c of ref.special.binomSf) close(binomialSf(c.k, c.n, c.p), c.sf, `k=${c.k} n=${c.n} p=${c.p}`);
  });
  it('log-gamma and incomplete beta', () => {
    for (const c of ref.special.lgamma) close(logGamma(c.x), c.lgamma, `lgamma(${c.x})`);
    for (const c of ref.special.betainc) close(betaInc(c.x, c.a, c.b), c.value, `I_${c.x}(${c.a},${c.b})`);
  });
});

describe('always-valid p-value (mSPRT) vs the formula written out in Python', () => {
  it.each(ref.msprt)('z=$z t=$information tau=$tau', (c) => {
    close(alwaysValidPValue(c.z, c.information, { tau: c.tau }), c.pTwoSided, 'two-sided');
    close(alwaysValidPValue(c.z, c.information, { tau: c.tau, alternative: 'greater' }), c.pGreater, 'greater');
    close(alwaysValidPValue(-c.z, c.information, { tau: c.tau, alternative: 'less' }), c.pGreater, 'less mirrors greater');
  });
});

describe('quantiles vs numpy.quantile (its default, linear): the one definition of a percentile', () => {
  it.each(ref.quantile.map((c) => ({ ...c, n: c.x.length })))('n=$n', ({ x, q, quantile }) => {
    // bit for bit: the windows, the judge, the reports and the benchmarks all state these numbers
    expect(q.map((p) => quantileSorted(x, p))).toEqual(quantile);
  });
});
