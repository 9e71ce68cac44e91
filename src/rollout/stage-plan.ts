// Canary stage timing for `plan --to V`: how long each stage must last to collect the samples the
// sequential judge needs to see a given regression, from the model's live request rate.
import { canarySamplesNeeded } from '../analysis/stats/index.js';
import { judgeConfig, statisticalCheckCount } from '../analysis/judge.js';
import { DEFAULTS } from '../defaults.js';
import { judgeOverrides } from './canary-state.js';
import type { ControllerPorts } from './ports.js';

export interface StagePlanRow {
  percent: number;
  /** Canary samples needed at this share to detect the effect with the configured power. */
  samplesNeeded: number;
  /** Canary requests per second at this share (live rate × share). */
  canaryRps: number;
  /** Time to collect them; Infinity without traffic. */
  collectMs: number;
  /** What the stage will take: max(configured stage duration, collect time). */
  durationMs: number;
}

export interface StagePlan {
  /** Requests per second the model serves now (all versions, from the telemetry windows). */
  liveRps: number;
  /** Standardized effect planned for (Cohen's d on log latency: 0.35 ≈ a 20 % p99 slowdown at σ 0.5). */
  effect: number;
  alphaPerCheck: number;
  power: number;
  stageDurationMs: number;
  stages: StagePlanRow[];
  totalMs: number;
  note: string;
}

/** Effect the plan is sized for: the latency gate (20 % slower) on a lognormal with σ ≈ 0.5. */
export const PLAN_EFFECT = Math.log(1 + DEFAULTS.canary.latency.maxP99Increase) / 0.5;
export const PLAN_POWER = 0.8;

export function planStages(
  liveRps: number,
  stages: readonly number[],
  stageDurationMs: number,
  alphaPerCheck: number,
  effect = PLAN_EFFECT,
  power = PLAN_POWER,
): StagePlan {
  const rows: StagePlanRow[] = [];
  let total = 0;
  for (const p of stages) {
    if (p >= 100) break;
    const share = p / 100;
    const samplesNeeded = canarySamplesNeeded(effect, share, alphaPerCheck, power);
    const canaryRps = liveRps * share;
    const collectMs = canaryRps > 0 ? (samplesNeeded / canaryRps) * 1000 : Infinity;
    const durationMs = Math.max(stageDurationMs, collectMs);
    rows.push({ percent: p, samplesNeeded, canaryRps, collectMs, durationMs });
    total += durationMs;
  }
  return {
    liveRps,
    effect,
    alphaPerCheck,
    power,
    stageDurationMs,
    stages: rows,
    totalMs: total,
    note:
      liveRps > 0
        ? `sized to detect a ${Math.round(DEFAULTS.canary.latency.maxP99Increase * 100)} % latency regression (d=${effect.toFixed(2)}) with power ${power} at α ${alphaPerCheck.toPrecision(2)} per check, always valid under repeated looks`
        : 'no live traffic: stage times cannot be estimated from the request rate (each stage waits for its samples)',
  };
}

/** The stage plan for a model from its config (or a canary's own stages) and live windows. */
export function stagePlanFor(
  ports: Pick<ControllerPorts, 'models' | 'routes' | 'telemetry'>,
  model: string,
  own: { stages?: readonly number[]; stageDurationMs?: number } = {},
): StagePlan {
  const m = ports.models.config(model);
  const route = ports.routes.current(model);
  let rps = 0;
  for (const v of route.versions) rps += ports.telemetry.stats(model, v.id).rps;
  const cfg = judgeConfig(judgeOverrides(m.canary));
  const alphaPerCheck = cfg.alpha / statisticalCheckCount(cfg);
  return planStages(
    rps,
    own.stages ?? m.canary?.stages ?? [...DEFAULTS.rollout.stages],
    own.stageDurationMs ?? m.canary?.stageDurationMs ?? DEFAULTS.rollout.stageDurationMs,
    alphaPerCheck,
  );
}
