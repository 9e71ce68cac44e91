import { describe, expect, it } from 'vitest';
import { planStages, PLAN_EFFECT } from '../../../src/rollout/stage-plan.js';
import { canarySamplesNeeded } from '../../../src/analysis/stats/index.js';

describe('canary stage plan (plan --to V)', () => {
  it('sizes each stage from the live rate and the sequential power analysis', () => {
    const p = planStages(100, [2, 5, 10, 25, 50, 100], 60_000, 0.005);
    expect(p.stages.map((s) => s.percent)).toEqual([2, 5, 10, 25, 50]);
    for (const s of p.stages) {
      const need = canarySamplesNeeded(PLAN_EFFECT, s.percent / 100, 0.005, 0.8);
      expect(s.samplesNeeded).toBe(need);
      expect(s.canaryRps).toBeCloseTo(s.percent, 9);
      expect(s.collectMs).toBeCloseTo((need / s.percent) * 1000, 6);
      expect(s.durationMs).toBe(Math.max(60_000, s.collectMs));
    }
    // the 2 % stage needs more time than its floor at 100 req/s; the later ones do not
    expect(p.stages[0]!.durationMs).toBeGreaterThan(60_000);
    expect(p.stages[4]!.durationMs).toBe(60_000);
    expect(p.totalMs).toBeCloseTo(
      p.stages.reduce((a, s) => a + s.durationMs, 0),
      6,
    );
  });

  it('says so when there is no traffic instead of inventing a time', () => {
    const p = planStages(0, [5, 50, 100], 1_000, 0.005);
    expect(p.stages.every((s) => s.durationMs === Infinity)).toBe(true);
    expect(p.note).toMatch(/no live traffic/);
  });

  it('needs more canary samples at a larger share (fewer stable samples per canary sample)', () => {
    const p = planStages(10, [2, 50], 0, 0.005);
    expect(p.stages[0]!.samplesNeeded).toBeLessThan(p.stages[1]!.samplesNeeded);
  });
});
