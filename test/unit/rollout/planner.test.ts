// planStrategies / assessRisk: seed 000's table and seed 001's risk policy with exact numbers.
import { describe, expect, it } from 'vitest';
import { assessRisk, loadTime, planStrategies } from '../../../src/rollout/planner.js';
import type { StrategyRow } from '../../../src/rollout/planner.js';
import { planVersion } from '../../helpers/plan.js';

const v = planVersion;

const row = (rows: StrategyRow[], label: string): StrategyRow => {
  const r = rows.find((x) => x.label === label);
  if (!r) throw new Error(`no row ${label} in ${rows.map((x) => x.label).join(', ')}`);
  return r;
};

describe('planStrategies: seed 000 cluster (8 GPUs, Llama 70B TP 4, 4 free)', () => {
  const cur = v();
  const tgt = v({ id: 'v2.3.1', weightHash: 'b'.repeat(64) });
  const p = planStrategies({ totalGpus: 8, freeGpus: 4 }, cur, tgt);

  it('blue-green: 4 extra GPUs (100%), no downtime, route-switch rollback, one load', () => {
    expect(row(p.rows, 'Blue-green')).toEqual({
      strategy: 'blue-green',
      label: 'Blue-green',
      extraGpus: 4,
      extraGpusPct: 100,
      steadyOverheadPct: 100,
      downtimeMs: 0,
      maxCapacityDropPct: 0,
      rollbackMs: 1,
      rollbackHow: 'route switch to the standby (< 1 ms)',
      totalDeployMs: 120_000,
      feasible: true,
      note: undefined,
    });
  });

  it('canary: load + the risk policy evaluation (medium: 1 h > the 30 min default)', () => {
    const r = row(p.rows, 'Canary');
    expect([r.extraGpus, r.downtimeMs, r.maxCapacityDropPct, r.rollbackMs, r.totalDeployMs, r.feasible]).toEqual([4, 0, 0, 1, 120_000 + 3_600_000, true]);
  });

  it('one TP group cannot roll: the rolling row says why', () => {
    const r = row(p.rows, 'Rolling');
    expect(r.feasible).toBe(false);
    expect(r.note).toBe('the current version runs 1 worker (TP 4); rolling needs at least 2 (it would be stop-start)');
  });

  it('stop-start: downtime = load, 100% drop, rollback = reload', () => {
    const r = row(p.rows, 'Stop-start');
    expect([r.extraGpus, r.downtimeMs, r.maxCapacityDropPct, r.rollbackMs, r.totalDeployMs, r.feasible]).toEqual([0, 120_000, 100, 120_000, 120_000, true]);
  });

  it('time-shared: no GPU beyond the current version’s, requests held for a wake at the swap, rollback = wake (140 GB / 7 GB/s = 20 s) + switch', () => {
    const shared = planStrategies({ totalGpus: 8, freeGpus: 0 }, cur, tgt, { timeShared: true });
    const r = row(shared.rows, 'Blue-green (time-shared)');
    expect([r.extraGpus, r.steadyOverheadPct, r.downtimeMs, r.maxCapacityDropPct, r.rollbackMs, r.totalDeployMs, r.feasible]).toEqual([
      0,
      0,
      20_000,
      100,
      20_001,
      140_000,
      true,
    ]);
    // what such a model refuses is not offered; the time-shared swap is the recommendation
    expect(shared.rows.filter((x) => x.feasible).map((x) => x.label)).toEqual(['Stop-start', 'Blue-green (time-shared)']);
    expect(shared.recommendation).toMatchObject({ strategy: 'time-shared-blue-green', reason: expect.stringContaining('deploy green') as unknown });
    // a model without it: the row says how to get it
    expect(row(p.rows, 'Blue-green (time-shared)')).toMatchObject({ feasible: false, note: expect.stringContaining('set time_shared_standby') as unknown });
    const wider = planStrategies({ totalGpus: 8, freeGpus: 4 }, cur, { ...tgt, tp: 2, replicas: 2 }, { timeShared: true });
    expect(row(wider.rows, 'Blue-green (time-shared)')).toMatchObject({
      feasible: false,
      note: expect.stringContaining('take turns on the same GPUs') as unknown,
    });
  });

  it('medium risk (same base, new weights) → canary at 10% for 1 h', () => {
    expect(p.risk).toMatchObject({ level: 'medium', strategy: 'canary', canaryShare: 0.1, evalDurationS: 3600 });
    expect(p.recommendation).toMatchObject({ strategy: 'canary', canaryShare: 0.1, evalDurationS: 3600 });
    expect(p.recommendation.reason).toContain('10% of traffic for 1 h');
  });

  it('a measured wake time replaces the estimate', () => {
    const q = planStrategies({ totalGpus: 8, freeGpus: 4 }, cur, tgt, { wakeMs: 5_000, canaryAnalysisMs: 600_000 });
    expect(row(q.rows, 'Blue-green (time-shared)').rollbackMs).toBe(5_001);
    expect(row(q.rows, 'Canary').totalDeployMs).toBe(720_000);
  });
});

describe('planStrategies: 16 GPUs, 4 workers of TP 4, none free', () => {
  const cur = v({ replicas: 4 });
  const same = v({ id: 'v2.3.1', replicas: 4, loadTimeMs: 100_000 });

  it('rolling rows for 2 and 4 groups with seed 000 numbers; blue-green infeasible with the reason', () => {
    const p = planStrategies({ totalGpus: 16, freeGpus: 0 }, cur, same);
    expect(p.rows.map((r) => r.label)).toEqual(['Blue-green', 'Canary', 'Rolling (2 groups)', 'Rolling (4 groups)', 'Stop-start', 'Blue-green (time-shared)']);
    const r2 = row(p.rows, 'Rolling (2 groups)');
    const r4 = row(p.rows, 'Rolling (4 groups)');
    expect([r2.groups, r2.extraGpus, r2.downtimeMs, r2.maxCapacityDropPct, r2.rollbackMs, r2.totalDeployMs, r2.feasible]).toEqual([
      2,
      0,
      0,
      50,
      120_000,
      200_000,
      true,
    ]);
    expect([r4.groups, r4.maxCapacityDropPct, r4.totalDeployMs]).toEqual([4, 25, 400_000]);
    const bg = row(p.rows, 'Blue-green');
    expect(bg.feasible).toBe(false);
    expect(bg.note).toBe('needs 16 free GPU(s) for a second copy (4 × TP 4), 0 free');
    expect(bg.extraGpusPct).toBe(100);
  });

  it('same weight hash (sha256: prefix vs bare hex) is low risk → rolling with the smallest drop', () => {
    const p = planStrategies({ totalGpus: 16, freeGpus: 0 }, cur, { ...same, weightHash: 'A'.repeat(64) });
    expect(p.risk.level).toBe('low');
    expect(p.recommendation).toMatchObject({ strategy: 'rolling', label: 'Rolling (4 groups)' });
  });

  it('high risk without room for a canary → rolling, saying the canary does not fit', () => {
    const p = planStrategies({ totalGpus: 16, freeGpus: 0 }, cur, v({ id: 'v3', replicas: 4, baseModel: 'llama-3-8b', weightHash: 'c'.repeat(64) }));
    expect(p.risk.level).toBe('high');
    expect(p.recommendation.strategy).toBe('rolling');
    expect(p.recommendation.label).toBe('Rolling (4 groups)');
    expect(p.recommendation.reason).toContain('a second copy needs 16 free GPU(s), 0 free');
  });

  it('different TP makes rolling infeasible; nothing but stop-start is left', () => {
    const p = planStrategies({ totalGpus: 16, freeGpus: 0 }, cur, v({ id: 'v3', tp: 8, replicas: 2, weightHash: 'd'.repeat(64) }));
    expect(row(p.rows, 'Rolling (2 groups)').note).toBe('TP sizes differ (4 → 8): a step frees TP-4 groups but a new worker needs 8 GPU(s)');
    expect(p.rows.filter((r) => r.feasible).map((r) => r.label)).toEqual(['Stop-start']);
    expect(p.recommendation.strategy).toBe('stop-start');
    expect(p.recommendation.reason).toContain('120 s of downtime');
  });

  it('a target larger than the cluster: nothing fits, and it says so', () => {
    const p = planStrategies({ totalGpus: 16, freeGpus: 0 }, cur, v({ id: 'huge', tp: 8, replicas: 4, weightHash: 'e'.repeat(64) }));
    expect(row(p.rows, 'Stop-start').note).toBe('needs 32 GPU(s), 16 held by v2.3.0 + 0 free');
    expect(p.recommendation.reason).toBe('nothing fits: the target needs 32 GPU(s) and the cluster has 16; free GPUs or shrink the target first');
  });
});

describe('load time', () => {
  it('never loaded → weights GB / 1.1 GB/s (seed 000 NFS), marked estimated', () => {
    expect(loadTime(v({ loadTimeMs: undefined, gpuMemoryGb: 11 }))).toEqual({ ms: 10_000, estimated: true });
    expect(loadTime(v({ loadTimeMs: 0, gpuMemoryGb: 2.2 }))).toEqual({ ms: 2_000, estimated: true });
    expect(loadTime(v({ loadTimeMs: 45_000 }))).toEqual({ ms: 45_000, estimated: false });
    const p = planStrategies({ totalGpus: 8, freeGpus: 4 }, v(), v({ id: 'new', loadTimeMs: undefined, gpuMemoryGb: 11, weightHash: undefined }));
    expect(p.target).toMatchObject({ loadTimeMs: 10_000, loadTimeEstimated: true });
    expect(row(p.rows, 'Blue-green').totalDeployMs).toBe(10_000);
  });
});

describe('assessRisk (seed 001)', () => {
  const h = (c: string) => c.repeat(64);
  it.each([
    ['same hash', { baseModel: 'llama-3-70b', weightHash: `sha256:${h('a')}` }, { baseModel: 'mistral-7b', weightHash: h('a') }, 'low', 'rolling', 0, 0],
    ['same base', { baseModel: 'llama-3-70b', weightHash: h('a') }, { baseModel: 'Llama-3-70B', weightHash: h('b') }, 'medium', 'canary', 0.1, 3600],
    ['same family', { baseModel: 'llama-3-70b', weightHash: h('a') }, { baseModel: 'llama-2-13b', weightHash: h('b') }, 'high', 'canary', 0.05, 14400],
    ['other family', { baseModel: 'llama-3-70b', weightHash: h('a') }, { baseModel: 'mistral-7b', weightHash: h('b') }, 'critical', 'canary', 0.02, 86400],
    ['unknown base', { baseModel: 'unknown', weightHash: h('a') }, { baseModel: 'unknown', weightHash: h('b') }, 'critical', 'canary', 0.02, 86400],
    ['no hashes, same base', { baseModel: 'qwen-2-7b' }, { baseModel: 'qwen-2-7b' }, 'medium', 'canary', 0.1, 3600],
  ])('%s', (_name, a, b, level, strategy, share, evalS) => {
    expect(assessRisk(a, b)).toMatchObject({ level, strategy, canaryShare: share, evalDurationS: evalS });
  });
});
