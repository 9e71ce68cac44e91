// The strategy planner: seed 000's comparison table (extra GPUs, downtime, capacity drop, rollback
// and deploy time) computed for this cluster from the real inventory and measured load times, seed
// 001's risk level, and a recommendation. `planStrategies` and `assessRisk` are pure.
import { DEFAULTS } from '../defaults.js';
import type { Version } from '../domain/version.js';
import { ConflictError } from '../errors.js';
import type { ControllerPorts } from './ports.js';
import { stagePlanFor } from './stage-plan.js';
import type { StagePlan } from './stage-plan.js';
import { takesTurns } from '../config/time-sharing.js';

export type RiskLevel = 'low' | 'medium' | 'high' | 'critical';
export type StrategyKind = 'blue-green' | 'canary' | 'rolling' | 'stop-start' | 'time-shared-blue-green';

/** What the planner needs of a version (a registry `Version` fits). */
export interface PlanVersion {
  id: string;
  tp: number;
  replicas: number;
  /** GB of weights for one replica (the version's `gpu_memory_gb`). */
  gpuMemoryGb: number;
  baseModel: string;
  weightHash?: string | undefined;
  /** Measured wall time of its last load; undefined when never loaded. */
  loadTimeMs?: number | undefined;
}

export interface PlanCluster {
  totalGpus: number;
  /** Free GPUs with enough memory for one TP rank of the target. */
  freeGpus: number;
}

export interface PlanOptions {
  /** Canary analysis time; default: max(DEFAULTS planCanaryAnalysisMs, the risk policy's evaluation duration). */
  canaryAnalysisMs?: number | undefined;
  /** Measured wake time of the current version from sleep (time-shared rollback). */
  wakeMs?: number | undefined;
  /**
   * The model's versions take turns on the same GPUs (`time_shared_standby`, a time-share group's
   * member): the time-shared row is what it does; a second copy beside it, a canary or a rolling
   * update are refused.
   */
  timeShared?: boolean | undefined;
}

export interface Risk {
  level: RiskLevel;
  reason: string;
  /** Seed 001's policy for this level. */
  strategy: 'rolling' | 'canary';
  canaryShare: number;
  evalDurationS: number;
}

export interface StrategyRow {
  strategy: StrategyKind;
  /** Human label, e.g. `Rolling (2 groups)`. */
  label: string;
  /** Rolling only: number of steps; each step replaces replicas / groups workers. */
  groups?: number | undefined;
  /** GPUs needed beyond the ones the current version holds, during the deploy. */
  extraGpus: number;
  /** extraGpus as a percentage of the current version's GPUs. */
  extraGpusPct: number;
  /** GPUs kept busy after the deploy for a fast rollback, % of the target's (seed 000's cost table). */
  steadyOverheadPct: number;
  downtimeMs: number;
  maxCapacityDropPct: number;
  rollbackMs: number;
  rollbackHow: string;
  totalDeployMs: number;
  feasible: boolean;
  /** Why it is infeasible, or a caveat. */
  note?: string | undefined;
}

export interface StrategyPlan {
  current: { id: string; gpus: number; tp: number; replicas: number; loadTimeMs: number; loadTimeEstimated: boolean };
  target: { id: string; gpus: number; tp: number; replicas: number; loadTimeMs: number; loadTimeEstimated: boolean };
  cluster: PlanCluster;
  risk: Risk;
  rows: StrategyRow[];
  recommendation: { strategy: StrategyKind; label: string; canaryShare?: number | undefined; evalDurationS?: number | undefined; reason: string };
  /** Canary stage durations from the live request rate and the power analysis (planFor only). */
  canaryStages?: StagePlan | undefined;
}

const C = DEFAULTS.control;

function normHash(h: string | undefined): string | undefined {
  if (h === undefined || h.trim() === '') return undefined;
  return h
    .trim()
    .toLowerCase()
    .replace(/^sha256:/, '');
}

const known = (b: string): boolean => b.trim() !== '' && b.trim().toLowerCase() !== 'unknown';
const family = (b: string): string => b.trim().toLowerCase().split('-')[0] ?? '';

/**
 * Seed 001's risk of moving from `current` to `target`: low when the weights are the same (same
 * weight hash: a config change), medium for the same base model (a fine-tune), high for the same
 * family (the base model's prefix before the first `-`: another size or generation), critical
 * otherwise. An unknown base model never counts as "the same".
 */
export function assessRisk(current: Pick<PlanVersion, 'baseModel' | 'weightHash'>, target: Pick<PlanVersion, 'baseModel' | 'weightHash'>): Risk {
  const policy = (level: RiskLevel, reason: string): Risk => ({ level, reason, ...C.planRisk[level] });
  const hc = normHash(current.weightHash);
  const ht = normHash(target.weightHash);
  if (hc !== undefined && hc === ht) return policy('low', 'same weight hash: only the configuration changes');
  const bc = current.baseModel.trim().toLowerCase();
  const bt = target.baseModel.trim().toLowerCase();
  if (!known(bc) || !known(bt)) return policy('critical', `base model unknown (${current.baseModel} → ${target.baseModel}): treated as a new model family`);
  if (bc === bt) return policy('medium', `same base model ${target.baseModel}, different weights: a fine-tuned variant`);
  if (family(bc) === family(bt)) return policy('high', `same family ${family(bt)} but a different base model (${current.baseModel} → ${target.baseModel})`);
  return policy('critical', `different model family (${current.baseModel} → ${target.baseModel})`);
}

/** Measured load time, else the estimate weights GB / DEFAULTS planLoadGbPerS. */
export function loadTime(v: PlanVersion): { ms: number; estimated: boolean } {
  if (v.loadTimeMs !== undefined && Number.isFinite(v.loadTimeMs) && v.loadTimeMs > 0) return { ms: v.loadTimeMs, estimated: false };
  return { ms: (v.gpuMemoryGb / C.planLoadGbPerS) * 1000, estimated: true };
}

function divisors(n: number): number[] {
  const out: number[] = [];
  for (let d = 2; d <= n; d++) if (n % d === 0) out.push(d);
  return out;
}

const pct = (part: number, whole: number): number => (whole > 0 ? (part / whole) * 100 : 0);

/**
 * The comparison table for moving one model from `current` to `target` on this cluster.
 * Load times: a version's measured `loadTimeMs` (workers of a version load in parallel, so one
 * load ≈ one TP group's load); never loaded → estimated from its weight size. Rolling steps use the
 * target's load time; rollbacks that reload use the current's.
 */
export function planStrategies(cluster: PlanCluster, current: PlanVersion, target: PlanVersion, opts: PlanOptions = {}): StrategyPlan {
  const curGpus = current.tp * current.replicas;
  const tgtGpus = target.tp * target.replicas;
  const lt = loadTime(target);
  const lc = loadTime(current);
  const risk = assessRisk(current, target);
  const canaryMs = opts.canaryAnalysisMs ?? Math.max(C.planCanaryAnalysisMs, risk.evalDurationS * 1000);
  const wakeMs = opts.wakeMs ?? (current.gpuMemoryGb / C.planWakeGbPerS) * 1000;
  const fullCopyFits = cluster.freeGpus >= tgtGpus;
  const fullCopyNote = fullCopyFits
    ? undefined
    : `needs ${tgtGpus} free GPU(s) for a second copy (${target.replicas} × TP ${target.tp}), ${cluster.freeGpus} free`;
  const switchMs = C.planRouteSwitchMs;
  const rows: StrategyRow[] = [];

  rows.push({
    strategy: 'blue-green',
    label: 'Blue-green',
    extraGpus: tgtGpus,
    extraGpusPct: pct(tgtGpus, curGpus),
    steadyOverheadPct: 100,
    downtimeMs: 0,
    maxCapacityDropPct: 0,
    rollbackMs: switchMs,
    rollbackHow: 'route switch to the standby (< 1 ms)',
    totalDeployMs: lt.ms,
    feasible: fullCopyFits,
    note: fullCopyNote,
  });
  rows.push({
    strategy: 'canary',
    label: 'Canary',
    extraGpus: tgtGpus,
    extraGpusPct: pct(tgtGpus, curGpus),
    steadyOverheadPct: 100,
    downtimeMs: 0,
    maxCapacityDropPct: 0,
    rollbackMs: switchMs,
    rollbackHow: 'route switch back to stable (< 1 ms)',
    totalDeployMs: lt.ms + canaryMs,
    feasible: fullCopyFits,
    note: fullCopyNote,
  });

  const groupCounts = divisors(current.replicas);
  if (groupCounts.length === 0) {
    rows.push({
      strategy: 'rolling',
      label: 'Rolling',
      extraGpus: 0,
      extraGpusPct: 0,
      steadyOverheadPct: 0,
      downtimeMs: lc.ms,
      maxCapacityDropPct: 100,
      rollbackMs: lc.ms,
      rollbackHow: 'reload the previous version',
      totalDeployMs: lt.ms,
      feasible: false,
      note: `the current version runs ${current.replicas} worker (TP ${current.tp}); rolling needs at least 2 (it would be stop-start)`,
    });
  }
  for (const n of groupCounts) {
    const sameShape = current.tp === target.tp;
    rows.push({
      strategy: 'rolling',
      label: `Rolling (${n} groups)`,
      groups: n,
      extraGpus: 0,
      extraGpusPct: 0,
      steadyOverheadPct: 0,
      downtimeMs: 0,
      maxCapacityDropPct: 100 / n,
      rollbackMs: lc.ms,
      rollbackHow: 'reload the previous version on the updated groups',
      totalDeployMs: n * lt.ms,
      feasible: sameShape,
      note: sameShape
        ? target.replicas !== current.replicas
          ? `replaces the ${current.replicas} current workers one for one (target asks for ${target.replicas})`
          : undefined
        : `TP sizes differ (${current.tp} → ${target.tp}): a step frees TP-${current.tp} groups but a new worker needs ${target.tp} GPU(s)`,
    });
  }

  const stopStartFits = tgtGpus <= curGpus + cluster.freeGpus;
  rows.push({
    strategy: 'stop-start',
    label: 'Stop-start',
    extraGpus: 0,
    extraGpusPct: 0,
    steadyOverheadPct: 0,
    downtimeMs: lt.ms,
    maxCapacityDropPct: 100,
    rollbackMs: lc.ms,
    rollbackHow: 'stop, then reload the previous version (downtime again)',
    totalDeployMs: lt.ms,
    feasible: stopStartFits,
    note: stopStartFits ? undefined : `needs ${tgtGpus} GPU(s), ${curGpus} held by ${current.id} + ${cluster.freeGpus} free`,
  });
  // `time_shared_standby` (docs/multi-model.md): green loads on the current version's GPUs and sleeps;
  // the swap holds requests while the current sleeps and green wakes; a rollback does the reverse
  const greenWakeMs = (target.gpuMemoryGb / C.planWakeGbPerS) * 1000;
  const sameSlots = target.tp === current.tp && target.replicas === current.replicas;
  rows.push({
    strategy: 'time-shared-blue-green',
    label: 'Blue-green (time-shared)',
    extraGpus: 0,
    extraGpusPct: 0,
    steadyOverheadPct: 0,
    downtimeMs: greenWakeMs,
    maxCapacityDropPct: 100,
    rollbackMs: wakeMs + switchMs,
    rollbackHow: `requests held while ${target.id} sleeps and ${current.id} wakes (weights CPU → GPU${opts.wakeMs === undefined ? ', estimated' : ''}), then route switch`,
    totalDeployMs: lt.ms + greenWakeMs,
    feasible: sameSlots && opts.timeShared === true,
    note: !sameSlots
      ? `needs ${current.id}'s TP (${current.tp}) and replicas (${current.replicas}): the two take turns on the same GPUs`
      : opts.timeShared === true
        ? `${target.id} loads on ${current.id}'s GPUs and sleeps; at the swap requests are held (not refused) for its wake`
        : 'the model does not share its GPUs between versions: set time_shared_standby on it',
  });
  if (opts.timeShared === true)
    for (const r of rows)
      if (r.strategy === 'blue-green' || r.strategy === 'canary' || r.strategy === 'rolling') {
        r.feasible = false;
        r.note = "refused: the model's versions take turns on the same GPUs (a second copy, a canary or a rolling update would need two awake)";
      }

  return {
    current: { id: current.id, gpus: curGpus, tp: current.tp, replicas: current.replicas, loadTimeMs: lc.ms, loadTimeEstimated: lc.estimated },
    target: { id: target.id, gpus: tgtGpus, tp: target.tp, replicas: target.replicas, loadTimeMs: lt.ms, loadTimeEstimated: lt.estimated },
    cluster: { ...cluster },
    risk,
    rows,
    recommendation: recommend(rows, risk, cluster, tgtGpus),
  };
}

const pcts = (x: number): string => `${Math.round(x * 100)}%`;

/**
 * Risk first (seed 001): above low, a canary when a second copy fits; otherwise the feasible rolling
 * split with the smallest capacity drop; otherwise stop-start. Low risk: rolling (no extra GPUs,
 * seed 001) when the fleet has groups to roll, else blue-green when it fits, else stop-start.
 */
function recommend(rows: StrategyRow[], risk: Risk, cluster: PlanCluster, tgtGpus: number): StrategyPlan['recommendation'] {
  const feasible = (s: StrategyKind) => rows.filter((r) => r.strategy === s && r.feasible);
  const timeShared = feasible('time-shared-blue-green')[0];
  if (timeShared)
    return {
      strategy: 'time-shared-blue-green',
      label: timeShared.label,
      reason: `the model's versions take turns on its GPUs: deploy green (it sleeps once loaded) and swap (requests held ~${Math.round(timeShared.downtimeMs / 1000)} s for its wake); a rollback wakes the standby (~${Math.round(timeShared.rollbackMs / 1000)} s)`,
    };
  const canary = feasible('canary')[0];
  const blueGreen = feasible('blue-green')[0];
  const rolling = feasible('rolling').sort((a, b) => a.maxCapacityDropPct - b.maxCapacityDropPct)[0];
  const stopStart = feasible('stop-start')[0];
  const noCopy = `a second copy needs ${tgtGpus} free GPU(s), ${cluster.freeGpus} free`;
  if (risk.level !== 'low') {
    if (canary) {
      return {
        strategy: 'canary',
        label: canary.label,
        canaryShare: risk.canaryShare,
        evalDurationS: risk.evalDurationS,
        reason: `${risk.level} risk (${risk.reason}): watch it on ${pcts(risk.canaryShare)} of traffic for ${risk.evalDurationS / 3600} h before promoting; rollback stays a route switch`,
      };
    }
    if (rolling)
      return {
        strategy: 'rolling',
        label: rolling.label,
        reason: `${risk.level} risk calls for a canary, but ${noCopy}; ${rolling.label} keeps ${100 - rolling.maxCapacityDropPct}% capacity, and a rollback reloads (${Math.round(rolling.rollbackMs / 1000)} s)`,
      };
  } else {
    if (rolling)
      return {
        strategy: 'rolling',
        label: rolling.label,
        reason: `low risk (${risk.reason}): seed 001 rolls it out without extra GPUs; capacity drops by at most ${rolling.maxCapacityDropPct}%`,
      };
    if (blueGreen)
      return {
        strategy: 'blue-green',
        label: blueGreen.label,
        reason: `low risk (${risk.reason}) but too few workers to roll; a second copy fits, so blue-green with instant rollback`,
      };
  }
  if (stopStart)
    return {
      strategy: 'stop-start',
      label: stopStart.label,
      reason: `the only feasible strategy: ${noCopy}, and there are no groups to roll; expect ${Math.round(stopStart.downtimeMs / 1000)} s of downtime`,
    };
  return {
    strategy: 'stop-start',
    label: 'Stop-start',
    reason: `nothing fits: the target needs ${tgtGpus} GPU(s) and the cluster has ${cluster.totalGpus}; free GPUs or shrink the target first`,
  };
}

/**
 * Plan for a model in a running control plane: the active version → `targetId`, free GPUs counted
 * from the inventory (those with enough memory for one TP rank of the target).
 */
export async function planFor(ports: ControllerPorts, model: string, targetId: string, opts: PlanOptions = {}): Promise<StrategyPlan> {
  const target = await ports.versions.get(model, targetId);
  const current: Version | undefined = await ports.versions.active(model);
  if (!current) throw new ConflictError('no_active_version', `model ${model} has no active version to plan from; deploy ${targetId} green and swap`);
  if (current.id === target.id) throw new ConflictError('already_active', `version ${model}/${targetId} is already active`);
  const perGpu = target.gpuMemoryGb / target.tp;
  const free = (await ports.gpus.free()).filter((g) => g.memoryGb >= perGpu).length;
  // a static version runs one worker per listed endpoint, whatever `replicas` says
  const shape = (v: Version): PlanVersion => (v.provider.kind === 'static' ? { ...v, replicas: v.provider.endpoints.length } : v);
  const timeShared = takesTurns(ports.models.config(model), ports.models.timeShared());
  return {
    ...planStrategies({ totalGpus: ports.gpus.total(), freeGpus: free }, shape(current), shape(target), { timeShared, ...opts }),
    canaryStages: stagePlanFor(ports, model),
  };
}

/** A planned duration, rounded as a plan is read: "< 40 ms", "~45 s", "~12 min", "~2.5 h". */
export function fmtMs(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1000) return `< ${Math.ceil(ms)} ms`;
  const s = ms / 1000;
  if (s < 600) return `~${Math.round(s)} s`;
  if (s < 3 * 3600) return `~${Math.round(s / 60)} min`;
  return `~${(s / 3600).toFixed(1)} h`;
}
