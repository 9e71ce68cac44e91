// Types of the canary judge (inputs, configuration, verdict) and the default configuration built
// from DEFAULTS.canary, with a deep merge for per-model overrides.

import { DEFAULTS } from '../defaults.js';

/** One version's telemetry for the judged period: the telemetry windows' own shape. */
export type { MetricSamples } from '../telemetry/window.js';

export type MetricName = 'latency' | 'ttft' | 'tpot' | 'errors' | 'quality' | 'throughput';
export const METRIC_NAMES: readonly MetricName[] = ['latency', 'ttft', 'tpot', 'errors', 'quality', 'throughput'];

export type Outcome = 'pass' | 'fail' | 'inconclusive' | 'nodata';
/** What the rollout should do with a verdict. */
export type Action = 'advance' | 'rollback' | 'pause' | 'wait';

export interface MetricConfigBase {
  /** false: the metric is not judged at all (Kayenta's "muted" also drops it from the score). */
  enabled?: boolean;
  /** Share of the score. */
  weight: number;
  /** A failure fails the whole verdict. */
  critical: boolean;
  /** No data counts as a failure instead of "nodata" (Kayenta's mustHaveData). */
  mustHaveData: boolean;
}
export interface LatencyConfig extends MetricConfigBase {
  minSamples: number;
  /** Largest allowed relative p99 increase over stable (0.2 = +20 %). */
  maxP99Increase: number;
  /** Absolute gate on the canary's p99 (ms); absent or null: none. */
  maxP99Ms?: number | null;
}
export interface ErrorsConfig extends MetricConfigBase {
  minRequests: number;
  /** Largest allowed (canary - stable) / max(stable, rateFloor). */
  maxRelativeIncrease: number;
  rateFloor: number;
  /** Absolute gate on the canary's error rate; null: none. */
  maxRate: number | null;
}
export interface QualityConfig extends MetricConfigBase {
  minSamples: number;
  /** Largest allowed drop of the mean score (stable - canary) on the 0-1 scale. */
  maxDecrease: number;
}
export interface ThroughputConfig extends MetricConfigBase {
  minRequests: number;
  /** Smallest allowed canary / stable throughput ratio. */
  minRatio: number;
}

export interface JudgeConfig {
  alpha: number;
  sequential: 'msprt' | 'none';
  msprtTau: number;
  hlConfLevel: number;
  scorePass: number;
  scoreMarginal: number;
  nodataWaitShare: number;
  gateQuantile: number;
  tailQuantile: number;
  latency: LatencyConfig;
  ttft: LatencyConfig;
  tpot: LatencyConfig;
  errors: ErrorsConfig;
  quality: QualityConfig;
  throughput: ThroughputConfig;
}

/** Partial overrides, one level deep per metric. */
export type JudgeConfigOverrides = Partial<Omit<JudgeConfig, MetricName>> & {
  [K in MetricName]?: Partial<JudgeConfig[K]>;
};

/** The defaults from src/defaults.ts with `overrides` applied (per metric, field by field). */
export function judgeConfig(overrides: JudgeConfigOverrides = {}): JudgeConfig {
  const d = DEFAULTS.canary;
  const base: JudgeConfig = {
    alpha: d.alpha,
    sequential: d.sequential,
    msprtTau: d.msprtTau,
    hlConfLevel: d.hlConfLevel,
    scorePass: d.scorePass,
    scoreMarginal: d.scoreMarginal,
    nodataWaitShare: d.nodataWaitShare,
    gateQuantile: d.gateQuantile,
    tailQuantile: d.tailQuantile,
    latency: { ...d.latency, maxP99Ms: null },
    ttft: { ...d.ttft },
    tpot: { ...d.tpot },
    errors: { ...d.errors },
    quality: { ...d.quality },
    throughput: { ...d.throughput },
  };
  const { latency, ttft, tpot, errors, quality, throughput, ...top } = overrides;
  return {
    ...base,
    ...top,
    latency: { ...base.latency, ...latency },
    ttft: { ...base.ttft, ...ttft },
    tpot: { ...base.tpot, ...tpot },
    errors: { ...base.errors, ...errors },
    quality: { ...base.quality, ...quality },
    throughput: { ...base.throughput, ...throughput },
  };
}

/**
 * Where this look stands in the sequence of looks at the same sample stream. The mSPRT needs no
 * schedule; `previous` (the `sequentialPValues` of the last verdict on the same stream) makes the
 * always-valid p-values running minima. Leave it out, or reset it, when the samples restart.
 */
export interface LookInfo {
  /** 0-based look number, recorded in the verdict. */
  index: number;
  previous?: Record<string, number>;
}

export type CheckTest = 'mann-whitney' | 'fisher' | 'binomial' | 'binomial-sequential' | 'ratio';

/** One statistical or threshold check inside a metric. */
export interface CheckVerdict {
  /** e.g. "latency.relative", "ttft.absolute". */
  id: string;
  kind: 'relative' | 'absolute';
  test: CheckTest;
  outcome: Outcome;
  /** Fixed-sample p-value of the one-sided test in the bad direction (NaN: not computed). */
  pValue: number;
  /** Always-valid p-value (equals pValue when sequential = 'none'). */
  pValueSequential: number;
  /** Level the p-value is compared with (alpha / number of statistical checks). */
  alpha: number;
  significant: boolean;
  /** The effect in the bad direction (relative increase, rate increase, score drop, ratio, p99). */
  effect: number;
  /** The tolerance `effect` is compared with. */
  threshold: number;
  reason: string;
}

export interface VersionSummary {
  n: number;
  mean?: number;
  median?: number;
  p99?: number;
  rate?: number;
  throughput?: number;
}

export interface MetricVerdict {
  name: MetricName;
  outcome: Outcome;
  critical: boolean;
  weight: number;
  /** false when the telemetry has no such series at all (e.g. no quality judge configured). */
  measured: boolean;
  stable: VersionSummary;
  canary: VersionSummary;
  /** Hodges-Lehmann shift canary - stable with its confidence interval (sample metrics only). */
  shift?: { estimate: number; lower: number; upper: number; confLevel: number; relativeToStableMedian: number };
  checks: CheckVerdict[];
  reason: string;
}

export interface Verdict {
  outcome: Outcome;
  action: Action;
  /** Weighted score 0-100 (NaN when there is nothing to score). */
  score: number;
  reasons: string[];
  metrics: MetricVerdict[];
  look: { index: number; method: 'msprt' | 'none'; alpha: number; alphaPerCheck: number; checks: number };
  /** Always-valid p-values by check id; pass back as LookInfo.previous at the next look. */
  sequentialPValues: Record<string, number>;
}
