// Per-metric rules of the canary judge: for each metric, the summaries of both versions, the
// relative check (significant in the bad direction AND beyond tolerance) and the absolute gate.

import type {
  CheckTest,
  CheckVerdict,
  ErrorsConfig,
  LatencyConfig,
  MetricSamples,
  MetricVerdict,
  QualityConfig,
  ThroughputConfig,
  VersionSummary,
} from './judge-types.js';
import { finite, mean, quantileSorted, sortedCopy } from './stats/describe.js';
import { fisherExact, binomialTestGreater } from './stats/proportions.js';
import { hodgesLehmannSorted, type HodgesLehmannResult } from './stats/hodgeslehmann.js';
import { mannWhitneyUSorted, type Alternative } from './stats/mannwhitney.js';
import { alwaysValidBinomialPValue, binomialUpperBound } from './stats/binomial-sequential.js';
import { alwaysValidPValue, twoSampleInformation, zFromPValue } from './stats/sequential.js';

/** What every check needs to know about the look. */
export interface CheckContext {
  sequential: 'msprt' | 'none';
  tau: number;
  /** Level per statistical check. */
  alpha: number;
  hlConfLevel: number;
  gateQuantile: number;
  tailQuantile: number;
  previous: Record<string, number>;
  /** Always-valid p-values of this look, filled in by the checks. */
  out: Record<string, number>;
}

const fmt = (v: number, digits = 3): string => (Number.isFinite(v) ? Number(v.toPrecision(digits)).toString() : String(v));
const pct = (v: number): string => `${fmt(v * 100)} %`;

/** Records the sequential p-value of a check and decides significance at this look. */
function decide(ctx: CheckContext, id: string, p: number, z: number, information: number, alt: Alternative): { pSeq: number; significant: boolean } {
  if (Number.isNaN(p)) {
    const kept = ctx.previous[id] ?? 1;
    ctx.out[id] = kept;
    return { pSeq: kept, significant: kept <= ctx.alpha };
  }
  let pSeq = p;
  if (ctx.sequential === 'msprt') {
    pSeq = alwaysValidPValue(z, information, { tau: ctx.tau, alternative: alt }, ctx.previous[id] ?? 1);
  }
  ctx.out[id] = pSeq;
  return { pSeq, significant: pSeq <= ctx.alpha };
}

function check(id: string, kind: 'relative' | 'absolute', test: CheckTest, fields: Omit<CheckVerdict, 'id' | 'kind' | 'test'>): CheckVerdict {
  return { id, kind, test, ...fields };
}

function worst(checks: CheckVerdict[]): 'pass' | 'fail' | 'inconclusive' {
  if (checks.some((c) => c.outcome === 'fail')) return 'fail';
  if (checks.some((c) => c.outcome === 'inconclusive')) return 'inconclusive';
  return 'pass';
}

function nodata(
  name: MetricVerdict['name'],
  cfg: { weight: number; critical: boolean },
  stable: VersionSummary,
  canary: VersionSummary,
  measured: boolean,
  reason: string,
  checks: CheckVerdict[] = [],
): MetricVerdict {
  return { name, outcome: 'nodata', critical: cfg.critical, weight: cfg.weight, measured, stable, canary, checks, reason };
}

/** The Hodges-Lehmann shift canary - stable as reported, also relative to stable's median. */
function shiftOf(hl: HodgesLehmannResult, stableMedian: number): NonNullable<MetricVerdict['shift']> {
  return {
    estimate: hl.estimate,
    lower: hl.lower,
    upper: hl.upper,
    confLevel: hl.confLevel,
    relativeToStableMedian: stableMedian > 0 ? hl.estimate / stableMedian : NaN,
  };
}

/** How many values exceed `limit`. */
function countAbove(a: Float64Array, limit: number): number {
  return a.reduce((k, v) => (v > limit ? k + 1 : k), 0);
}

/** n, mean and median of a sorted sample, and its q-quantile (reported as p99) when q is given. */
function summarize(sorted: Float64Array, q?: number): VersionSummary {
  const s: VersionSummary = { n: sorted.length, mean: mean(sorted), median: quantileSorted(sorted, 0.5) };
  if (q !== undefined) s.p99 = quantileSorted(sorted, q);
  return s;
}

/**
 * Absolute gate "the q-quantile is at most `limit`", tested as: the share of values above the limit
 * is significantly larger than 1 - q (exact binomial test). A breach by the canary fails, unless the
 * stable version breaches it too (then the fleet, not the canary, is the problem: inconclusive).
 */
function quantileGate(id: string, canary: Float64Array, stable: Float64Array, limit: number, ctx: CheckContext): CheckVerdict {
  const q = ctx.gateQuantile;
  const kc = countAbove(canary, limit);
  const p = binomialTestGreater(kc, canary.length, 1 - q);
  const { pSeq, significant } = decide(ctx, id, p, zFromPValue(p), canary.length, 'greater');
  const observed = quantileSorted(canary, q);
  const breach = significant && observed > limit;
  let outcome: CheckVerdict['outcome'] = 'pass';
  let reason = `p${q * 100} ${fmt(observed)} ms vs gate ${limit} ms: within (p=${fmt(pSeq)})`;
  if (breach) {
    const ps = binomialTestGreater(countAbove(stable, limit), stable.length, 1 - q);
    const stableBreach = ps <= ctx.alpha && quantileSorted(stable, q) > limit;
    outcome = stableBreach ? 'inconclusive' : 'fail';
    reason = stableBreach
      ? `p${q * 100} ${fmt(observed)} ms breaches ${limit} ms, but stable breaches it too`
      : `p${q * 100} ${fmt(observed)} ms breaches ${limit} ms (${kc}/${canary.length} above, p=${fmt(pSeq)})`;
  }
  return check(id, 'absolute', 'binomial', {
    outcome,
    pValue: p,
    pValueSequential: pSeq,
    alpha: ctx.alpha,
    significant,
    effect: observed,
    threshold: limit,
    reason,
  });
}

/** Merges two ascending arrays into one ascending array. */
function mergeSorted(a: Float64Array, b: Float64Array): Float64Array {
  const out = new Float64Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = (a[i] as number) <= (b[j] as number) ? (a[i++] as number) : (b[j++] as number);
  while (i < a.length) out[k++] = a[i++] as number;
  while (j < b.length) out[k++] = b[j++] as number;
  return out;
}

/**
 * Tail test: is the canary's share above the pooled `tailQuantile` larger than stable's? Under H0 the
 * versions are exchangeable, so given the pooled threshold the canary's count above it is exactly
 * hypergeometric: Fisher's one-sided test is exact. Fails with the p99 increase beyond tolerance.
 */
function tailCheck(id: string, c: Float64Array, s: Float64Array, effect: number, tolerance: number, ctx: CheckContext): CheckVerdict {
  const pooled = mergeSorted(c, s);
  const threshold = quantileSorted(pooled, ctx.tailQuantile);
  const kc = countAbove(c, threshold);
  const ks = countAbove(s, threshold);
  const f = fisherExact(kc, c.length - kc, ks, s.length - ks, 'greater');
  const { pSeq, significant } = decide(ctx, id, f.p, zFromPValue(f.p), twoSampleInformation(c.length, s.length), 'greater');
  const fail = significant && effect > tolerance;
  const share = `${pct(kc / c.length)} of canary vs ${pct(ks / s.length)} of stable above the pooled p${ctx.tailQuantile * 100} ${fmt(threshold)}`;
  const reason = fail ? `slower tail: ${share} (p=${fmt(pSeq)}), p99 +${pct(effect)} > ${pct(tolerance)}` : `${share} (p=${fmt(pSeq)})`;
  return check(id, 'relative', 'fisher', {
    outcome: fail ? 'fail' : 'pass',
    pValue: f.p,
    pValueSequential: pSeq,
    alpha: ctx.alpha,
    significant,
    effect,
    threshold: tolerance,
    reason,
  });
}

/** Latency-like metric: canary must not be significantly slower by more than maxP99Increase at p99. */
export function judgeLatency(
  name: 'latency' | 'ttft' | 'tpot',
  stableIn: readonly number[],
  canaryIn: readonly number[],
  cfg: LatencyConfig,
  ctx: CheckContext,
): MetricVerdict {
  const s = sortedCopy(finite(stableIn));
  const c = sortedCopy(finite(canaryIn));
  const stable = summarize(s, ctx.gateQuantile);
  const canary = summarize(c, ctx.gateQuantile);
  if (s.length < cfg.minSamples || c.length < cfg.minSamples) {
    return nodata(name, cfg, stable, canary, true, `too few samples: stable ${s.length}, canary ${c.length} < ${cfg.minSamples}`);
  }
  const id = `${name}.relative`;
  const mw = mannWhitneyUSorted(c, s, { alternative: 'greater' });
  const { pSeq, significant } = decide(ctx, id, mw.p, mw.z, twoSampleInformation(c.length, s.length), 'greater');
  const sp = stable.p99 as number;
  const cp = canary.p99 as number;
  const hl = hodgesLehmannSorted(c, s, { confLevel: ctx.hlConfLevel });
  const med = stable.median as number;
  // The tolerance is judged on the larger of the p99 increase and the Hodges-Lehmann shift relative
  // to stable's median: a small canary sample's p99 is a noisy point estimate (a 30 % slower canary
  // read as +8 % at p99 in the e2e runs); the shift is robust at small n and measures the same thing
  // for a uniformly slower version.
  const p99Increase = sp > 0 ? cp / sp - 1 : cp > 0 ? Infinity : 0;
  const shiftRel = med > 0 ? hl.estimate / med : 0;
  const effect = Math.max(p99Increase, shiftRel);
  const fail = significant && effect > cfg.maxP99Increase;
  const reason = fail
    ? `p99 ${fmt(cp)} ms vs ${fmt(sp)} ms (+${pct(p99Increase)}), shift +${pct(shiftRel)} of the median; > ${pct(cfg.maxP99Increase)}, canary significantly slower (p=${fmt(pSeq)})`
    : significant
      ? `slower (p=${fmt(pSeq)}) but p99 change ${pct(effect)} within ${pct(cfg.maxP99Increase)}`
      : `no significant slowdown (p=${fmt(pSeq)}; p99 change ${pct(effect)})`;
  const checks = [
    check(id, 'relative', 'mann-whitney', {
      outcome: fail ? 'fail' : 'pass',
      pValue: mw.p,
      pValueSequential: pSeq,
      alpha: ctx.alpha,
      significant,
      effect,
      threshold: cfg.maxP99Increase,
      reason,
    }),
    tailCheck(`${name}.tail`, c, s, effect, cfg.maxP99Increase, ctx),
  ];
  if (cfg.maxP99Ms !== null && cfg.maxP99Ms !== undefined) checks.push(quantileGate(`${name}.absolute`, c, s, cfg.maxP99Ms, ctx));
  const outcome = worst(checks);
  return {
    name,
    outcome,
    critical: cfg.critical,
    weight: cfg.weight,
    measured: true,
    stable,
    canary,
    shift: shiftOf(hl, med),
    checks,
    reason: checks
      .filter((k) => k.outcome === outcome)
      .map((k) => k.reason)
      .join('; '),
  };
}

/**
 * The error count's sequential test, decisive from the first requests: is the canary's error rate
 * above (1 + maxRelativeIncrease) x the stable's (its one-sided upper confidence bound at the same
 * level, floored at rateFloor)? An exact, always-valid mixture test on the count
 * (stats/binomial-sequential.ts), so it may fail a canary long before `minRequests`; it never passes
 * one (passing still needs `minRequests`). The stable's bound moves as its sample grows, so validity
 * rests on that bound being conservative: the false-rollback Monte-Carlo
 * (test/unit/rollout/canary-false-rollback.test.ts) measures it with equal canaries at every look.
 */
function errorCountCheck(s: { n: number; e: number }, c: { n: number; e: number }, cfg: ErrorsConfig, ctx: CheckContext): CheckVerdict | undefined {
  if (s.n === 0 || c.n === 0) return undefined;
  const id = 'errors.sequential';
  const bound = Math.min(1 - 1e-9, (1 + cfg.maxRelativeIncrease) * Math.max(binomialUpperBound(s.e, s.n, ctx.alpha), cfg.rateFloor));
  const pSeq = alwaysValidBinomialPValue(c.e, c.n, bound, ctx.sequential === 'msprt' ? (ctx.previous[id] ?? 1) : 1);
  ctx.out[id] = pSeq;
  const significant = pSeq <= ctx.alpha;
  const reason = significant
    ? `${c.e} errors in ${c.n} canary requests (${pct(c.e / c.n)}): decisively above ${pct(bound)} (stable ${pct(s.e / s.n)} + ${pct(cfg.maxRelativeIncrease)}; sequential count test, p=${fmt(pSeq)})`
    : `${c.e} errors in ${c.n} canary requests: not decisively above ${pct(bound)} (sequential count test, p=${fmt(pSeq)})`;
  return check(id, 'relative', 'binomial-sequential', {
    outcome: significant ? 'fail' : 'pass',
    pValue: pSeq,
    pValueSequential: pSeq,
    alpha: ctx.alpha,
    significant,
    effect: c.e / c.n,
    threshold: bound,
    reason,
  });
}

/**
 * Errors: the sequential count test (decides a clearly failing canary from its first requests), then,
 * from `minRequests` on, Fisher's exact test (one-sided, canary worse) with the seed's relative
 * tolerance and the exact binomial gate.
 */
export function judgeErrors(stableIn: MetricSamples, canaryIn: MetricSamples, cfg: ErrorsConfig, ctx: CheckContext): MetricVerdict {
  const counts = (m: MetricSamples): { n: number; e: number } => {
    const n = Number.isFinite(m.requests) && m.requests > 0 ? Math.floor(m.requests) : 0;
    const e = Number.isFinite(m.errors) && m.errors > 0 ? Math.min(n, Math.floor(m.errors)) : 0;
    return { n, e };
  };
  const s = counts(stableIn);
  const c = counts(canaryIn);
  const stable: VersionSummary = { n: s.n, rate: s.n > 0 ? s.e / s.n : NaN };
  const canary: VersionSummary = { n: c.n, rate: c.n > 0 ? c.e / c.n : NaN };
  const early = errorCountCheck(s, c, cfg, ctx);
  if (s.n < cfg.minRequests || c.n < cfg.minRequests) {
    if (early?.outcome === 'fail')
      return {
        name: 'errors',
        outcome: 'fail',
        critical: cfg.critical,
        weight: cfg.weight,
        measured: true,
        stable,
        canary,
        checks: [early],
        reason: early.reason,
      };
    return nodata('errors', cfg, stable, canary, true, `too few requests to pass: stable ${s.n}, canary ${c.n} < ${cfg.minRequests}`, early ? [early] : []);
  }
  const sr = stable.rate as number;
  const cr = canary.rate as number;
  const id = 'errors.relative';
  const fisher = fisherExact(c.e, c.n - c.e, s.e, s.n - s.e, 'greater');
  const { pSeq, significant } = decide(ctx, id, fisher.p, zFromPValue(fisher.p), twoSampleInformation(c.n, s.n), 'greater');
  const effect = (cr - sr) / Math.max(sr, cfg.rateFloor);
  const fail = significant && effect > cfg.maxRelativeIncrease;
  const reason = fail
    ? `error rate ${pct(cr)} vs ${pct(sr)} (+${pct(effect)} relative > ${pct(cfg.maxRelativeIncrease)}), significant (p=${fmt(pSeq)})`
    : `error rate ${pct(cr)} vs ${pct(sr)}: no significant increase beyond ${pct(cfg.maxRelativeIncrease)} (p=${fmt(pSeq)})`;
  const checks = [
    ...(early ? [early] : []),
    check(id, 'relative', 'fisher', {
      outcome: fail ? 'fail' : 'pass',
      pValue: fisher.p,
      pValueSequential: pSeq,
      alpha: ctx.alpha,
      significant,
      effect,
      threshold: cfg.maxRelativeIncrease,
      reason,
    }),
  ];
  if (cfg.maxRate !== null) {
    const limit = cfg.maxRate;
    const aid = 'errors.absolute';
    const p = binomialTestGreater(c.e, c.n, limit);
    const d = decide(ctx, aid, p, zFromPValue(p), c.n, 'greater');
    const breach = d.significant && cr > limit;
    const stableBreach = breach && binomialTestGreater(s.e, s.n, limit) <= ctx.alpha && sr > limit;
    const outcome = !breach ? 'pass' : stableBreach ? 'inconclusive' : 'fail';
    const why = !breach
      ? `error rate ${pct(cr)} not significantly above the ${pct(limit)} gate (p=${fmt(d.pSeq)})`
      : stableBreach
        ? `error rate ${pct(cr)} above the ${pct(limit)} gate, but stable (${pct(sr)}) is too`
        : `error rate ${pct(cr)} significantly above the ${pct(limit)} gate (p=${fmt(d.pSeq)})`;
    checks.push(
      check(aid, 'absolute', 'binomial', {
        outcome,
        pValue: p,
        pValueSequential: d.pSeq,
        alpha: ctx.alpha,
        significant: d.significant,
        effect: cr,
        threshold: limit,
        reason: why,
      }),
    );
  }
  const outcome = worst(checks);
  return {
    name: 'errors',
    outcome,
    critical: cfg.critical,
    weight: cfg.weight,
    measured: true,
    stable,
    canary,
    checks,
    reason: checks
      .filter((k) => k.outcome === outcome)
      .map((k) => k.reason)
      .join('; '),
  };
}

/** Quality scores (higher is better): fail when significantly lower and the mean drops by more than maxDecrease. */
export function judgeQuality(stableIn: number[] | undefined, canaryIn: number[] | undefined, cfg: QualityConfig, ctx: CheckContext): MetricVerdict {
  // Scores for either version mean quality is being measured: the other version's missing scores are no data yet.
  const measured = stableIn !== undefined || canaryIn !== undefined;
  const s = sortedCopy(finite(stableIn ?? []));
  const c = sortedCopy(finite(canaryIn ?? []));
  const stable = summarize(s);
  const canary = summarize(c);
  if (!measured) return nodata('quality', cfg, stable, canary, false, 'not measured (no quality scores)');
  if (s.length < cfg.minSamples || c.length < cfg.minSamples) {
    return nodata('quality', cfg, stable, canary, true, `too few scores: stable ${s.length}, canary ${c.length} < ${cfg.minSamples}`);
  }
  const id = 'quality.relative';
  const mw = mannWhitneyUSorted(c, s, { alternative: 'less' });
  const { pSeq, significant } = decide(ctx, id, mw.p, mw.z, twoSampleInformation(c.length, s.length), 'less');
  const effect = (stable.mean as number) - (canary.mean as number);
  const fail = significant && effect > cfg.maxDecrease;
  const reason = fail
    ? `mean score ${fmt(canary.mean as number)} vs ${fmt(stable.mean as number)} (drop ${fmt(effect)} > ${cfg.maxDecrease}), significantly lower (p=${fmt(pSeq)})`
    : `mean score ${fmt(canary.mean as number)} vs ${fmt(stable.mean as number)}: no significant drop beyond ${cfg.maxDecrease} (p=${fmt(pSeq)})`;
  const checks = [
    check(id, 'relative', 'mann-whitney', {
      outcome: fail ? 'fail' : 'pass',
      pValue: mw.p,
      pValueSequential: pSeq,
      alpha: ctx.alpha,
      significant,
      effect,
      threshold: cfg.maxDecrease,
      reason,
    }),
  ];
  const hl = hodgesLehmannSorted(c, s, { confLevel: ctx.hlConfLevel });
  const med = stable.median as number;
  return {
    name: 'quality',
    outcome: checks[0]?.outcome ?? 'pass',
    critical: cfg.critical,
    weight: cfg.weight,
    measured,
    stable,
    canary,
    shift: shiftOf(hl, med),
    checks,
    reason,
  };
}

/**
 * Throughput ratio canary / stable of outputTokens / durationS. One number per version and window, so
 * there is no sample-level test: a ratio below minRatio with enough requests on both sides fails.
 */
export function judgeThroughput(stableIn: MetricSamples, canaryIn: MetricSamples, cfg: ThroughputConfig): MetricVerdict {
  const tp = (m: MetricSamples): number => (m.durationS > 0 && Number.isFinite(m.outputTokens) ? m.outputTokens / m.durationS : NaN);
  const st = tp(stableIn);
  const ct = tp(canaryIn);
  const stable: VersionSummary = { n: stableIn.requests, throughput: st };
  const canary: VersionSummary = { n: canaryIn.requests, throughput: ct };
  const measured = Number.isFinite(st) || Number.isFinite(ct);
  if (!measured) return nodata('throughput', cfg, stable, canary, false, 'not measured (no serving time)');
  if (!(stableIn.requests >= cfg.minRequests && canaryIn.requests >= cfg.minRequests) || !(st > 0) || !Number.isFinite(ct)) {
    return nodata(
      'throughput',
      cfg,
      stable,
      canary,
      true,
      `too few requests or no throughput: stable ${stableIn.requests}, canary ${canaryIn.requests} (min ${cfg.minRequests})`,
    );
  }
  const ratio = ct / st;
  const fail = ratio < cfg.minRatio;
  const reason = `throughput ${fmt(ct)} vs ${fmt(st)} tokens/s (ratio ${fmt(ratio)} ${fail ? '<' : '>='} ${cfg.minRatio})`;
  const c = check('throughput.absolute', 'absolute', 'ratio', {
    outcome: fail ? 'fail' : 'pass',
    pValue: NaN,
    pValueSequential: NaN,
    alpha: NaN,
    significant: fail,
    effect: ratio,
    threshold: cfg.minRatio,
    reason,
  });
  return { name: 'throughput', outcome: c.outcome, critical: cfg.critical, weight: cfg.weight, measured, stable, canary, checks: [c], reason };
}
