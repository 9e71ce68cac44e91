// The canary judge: a pure function from both versions' telemetry, the configuration and the look
// to a verdict (pass / fail / inconclusive / nodata) with every metric's numbers and reasons.
//
// Rules (docs/analysis.md has the long form):
// - A check FAILS only when the difference is significant in the bad direction (one-sided test,
//   always-valid under repeated looks, at alpha / number of checks) AND beyond its tolerance.
// - A metric's outcome is its worst check; too few samples -> nodata; mustHaveData turns nodata
//   into fail. A critical metric failing fails the verdict (score 0).
// - Score = 100 * weight(pass) / weight(pass + fail + inconclusive). Verdict: nodata when a critical
//   metric or >= nodataWaitShare of the measured weight has no data; else pass >= scorePass,
//   inconclusive (marginal) >= scoreMarginal, fail below.
// - A failing metric does not wait for the others: a critical one fails the verdict at once, and a
//   non-critical one as soon as the score would stay below scoreMarginal even if every metric
//   without data passed. The error count's sequential test fails a clearly worse canary from its
//   first requests, long before the `minRequests` a pass needs.

import { judgeErrors, judgeLatency, judgeQuality, judgeThroughput, type CheckContext } from './judge-metrics.js';
import type { Action, JudgeConfig, LookInfo, MetricName, MetricSamples, MetricVerdict, Outcome, Verdict } from './judge-types.js';
import { METRIC_NAMES } from './judge-types.js';

export * from './judge-types.js';

const ACTIONS: Record<Outcome, Action> = { pass: 'advance', fail: 'rollback', inconclusive: 'pause', nodata: 'wait' };

function enabled(cfg: JudgeConfig, name: MetricName): boolean {
  return cfg[name].enabled !== false;
}

/** Number of statistical checks the configuration enables; alpha is split evenly over them. */
export function statisticalCheckCount(cfg: JudgeConfig): number {
  let m = 0;
  for (const name of ['latency', 'ttft', 'tpot'] as const) {
    if (!enabled(cfg, name)) continue;
    m += 2; // location (Mann-Whitney) and tail (exceedance) tests
    const gate = cfg[name].maxP99Ms;
    if (gate !== null && gate !== undefined) m += 1;
  }
  if (enabled(cfg, 'errors')) m += cfg.errors.maxRate === null ? 2 : 3; // the sequential count test, Fisher, the binomial gate
  if (enabled(cfg, 'quality')) m += 1;
  return Math.max(1, m);
}

function judgeMetric(name: MetricName, stable: MetricSamples, canary: MetricSamples, cfg: JudgeConfig, ctx: CheckContext): MetricVerdict {
  switch (name) {
    case 'latency':
      return judgeLatency('latency', stable.latencyMs, canary.latencyMs, cfg.latency, ctx);
    case 'ttft':
      return judgeLatency('ttft', stable.ttftMs, canary.ttftMs, cfg.ttft, ctx);
    case 'tpot':
      return judgeLatency('tpot', stable.tpotMs, canary.tpotMs, cfg.tpot, ctx);
    case 'errors':
      return judgeErrors(stable, canary, cfg.errors, ctx);
    case 'quality':
      return judgeQuality(stable.quality, canary.quality, cfg.quality, ctx);
    case 'throughput':
      return judgeThroughput(stable, canary, cfg.throughput);
  }
}

/** Applies mustHaveData: a measured metric without data counts as a failure. */
function applyMustHaveData(m: MetricVerdict, mustHaveData: boolean): MetricVerdict {
  if (m.outcome !== 'nodata' || !mustHaveData) return m;
  return { ...m, outcome: 'fail', reason: `${m.reason}; mustHaveData` };
}

/**
 * Judges the canary against the stable version at one look.
 * Pure: the same inputs give the same verdict; pass `verdict.sequentialPValues` as `look.previous`
 * at the next look on the same (cumulative) sample stream.
 */
export function judgeCanary(stable: MetricSamples, canary: MetricSamples, cfg: JudgeConfig, look: LookInfo): Verdict {
  const checks = statisticalCheckCount(cfg);
  const alphaPerCheck = cfg.alpha / checks;
  const ctx: CheckContext = {
    sequential: cfg.sequential,
    tau: cfg.msprtTau,
    alpha: alphaPerCheck,
    hlConfLevel: cfg.hlConfLevel,
    gateQuantile: cfg.gateQuantile,
    tailQuantile: cfg.tailQuantile,
    previous: look.previous ?? {},
    out: {},
  };
  const metrics = METRIC_NAMES.filter((n) => enabled(cfg, n)).map((n) => applyMustHaveData(judgeMetric(n, stable, canary, cfg, ctx), cfg[n].mustHaveData));
  const { outcome, score, reasons } = combine(metrics, cfg);
  return {
    outcome,
    action: ACTIONS[outcome],
    score,
    reasons,
    metrics,
    look: { index: look.index, method: cfg.sequential, alpha: cfg.alpha, alphaPerCheck, checks },
    // Checks without data at this look keep their earlier always-valid p-values.
    sequentialPValues: cfg.sequential === 'msprt' ? { ...ctx.previous, ...ctx.out } : ctx.out,
  };
}

/**
 * The verdict of a look that had nothing to judge because its metric source did not answer
 * (Prometheus down): no data, wait — never a pass, nor a failure by mustHaveData (the canary is not
 * at fault). The always-valid p-values of the earlier looks are kept.
 */
export function sourceDownVerdict(cfg: JudgeConfig, look: LookInfo, reason: string): Verdict {
  const checks = statisticalCheckCount(cfg);
  return {
    outcome: 'nodata',
    action: ACTIONS.nodata,
    score: NaN,
    reasons: [reason],
    metrics: [],
    look: { index: look.index, method: cfg.sequential, alpha: cfg.alpha, alphaPerCheck: cfg.alpha / checks, checks },
    sequentialPValues: { ...(look.previous ?? {}) },
  };
}

/** Kayenta-style weighted scoring with critical metrics, a marginal band and a no-data rule. */
export function combine(
  metrics: MetricVerdict[],
  cfg: Pick<JudgeConfig, 'scorePass' | 'scoreMarginal' | 'nodataWaitShare'>,
): { outcome: Outcome; score: number; reasons: string[] } {
  const measured = metrics.filter((m) => m.measured);
  const criticalFails = measured.filter((m) => m.critical && m.outcome === 'fail');
  if (criticalFails.length > 0) {
    return { outcome: 'fail', score: 0, reasons: criticalFails.map((m) => `critical metric ${m.name} failed: ${m.reason}`) };
  }
  const totalWeight = measured.reduce((s, m) => s + m.weight, 0);
  const noData = measured.filter((m) => m.outcome === 'nodata');
  const noDataWeight = noData.reduce((s, m) => s + m.weight, 0);
  const criticalNoData = noData.filter((m) => m.critical);
  const scored = measured.filter((m) => m.outcome !== 'nodata');
  const scoredWeight = scored.reduce((s, m) => s + m.weight, 0);
  const passWeight = scored.filter((m) => m.outcome === 'pass').reduce((s, m) => s + m.weight, 0);
  const score = scoredWeight > 0 ? (100 * passWeight) / scoredWeight : NaN;
  // A metric failing (significant and beyond tolerance) does not wait for the others' data once no
  // outcome of theirs could lift the score back to the marginal band: even if every metric without
  // data passed, the verdict would be a failure.
  const failing = scored.filter((m) => m.outcome === 'fail');
  if (failing.length > 0 && noData.length > 0) {
    const best = (100 * (passWeight + noDataWeight)) / (scoredWeight + noDataWeight);
    if (best < cfg.scoreMarginal) {
      return {
        outcome: 'fail',
        score,
        reasons: [
          `score ${Math.round(best * 100) / 100} < ${cfg.scoreMarginal} even if the ${noData.length} metric(s) without data pass`,
          ...failing.map((m) => `${m.name} fail: ${m.reason}`),
        ],
      };
    }
  }
  if (criticalNoData.length > 0 || totalWeight === 0 || scoredWeight === 0 || noDataWeight / totalWeight >= cfg.nodataWaitShare) {
    const why =
      criticalNoData.length > 0
        ? criticalNoData.map((m) => `critical metric ${m.name} has no data: ${m.reason}`)
        : [
            `${noData.length} of ${measured.length} measured metrics have no data (${Math.round((100 * noDataWeight) / Math.max(totalWeight, 1e-12))} % of the weight)`,
          ];
    return { outcome: 'nodata', score, reasons: why };
  }
  const notPassed = scored.filter((m) => m.outcome !== 'pass').map((m) => `${m.name} ${m.outcome}: ${m.reason}`);
  const s = Math.round(score * 100) / 100;
  if (score >= cfg.scorePass) return { outcome: 'pass', score, reasons: [`score ${s} >= ${cfg.scorePass}`, ...notPassed] };
  if (score >= cfg.scoreMarginal)
    return { outcome: 'inconclusive', score, reasons: [`marginal score ${s} (< ${cfg.scorePass}, >= ${cfg.scoreMarginal})`, ...notPassed] };
  return { outcome: 'fail', score, reasons: [`score ${s} < ${cfg.scoreMarginal}`, ...notPassed] };
}
