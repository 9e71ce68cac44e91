// `glidepath plan`'s text, from the API's snake_case answer (the planner's plan through
// strategyPlanView and JSON, as the CLI gets it): seed 000's columns, the recommendation, the
// canary stages (with and without traffic to time them by).
import { describe, expect, it } from 'vitest';
import { strategyPlanView } from '../../../src/api/rollout-views.js';
import type { StrategyPlanView } from '../../../src/api/types.js';
import { formatPlan } from '../../../src/cli/plan/format.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { planStrategies } from '../../../src/rollout/planner.js';
import type { StrategyPlan } from '../../../src/rollout/planner.js';
import { planVersion } from '../../helpers/plan.js';
import { planStages } from '../../../src/rollout/stage-plan.js';

const v = planVersion;

const viaJson = (p: StrategyPlan): StrategyPlanView => JSON.parse(JSON.stringify(strategyPlanView(p))) as StrategyPlanView;
const seed000 = (): StrategyPlan => planStrategies({ totalGpus: 8, freeGpus: 4 }, v(), v({ id: 'v2.3.1', weightHash: 'b'.repeat(64) }));

describe('the plan as the API answers it', () => {
  it('maps every field to snake_case, absent ones to null', () => {
    const p = viaJson(seed000());
    expect(p.current).toEqual({ id: 'v2.3.0', gpus: 4, tp: 4, replicas: 1, load_time_ms: 120_000, load_time_estimated: false });
    expect(p.cluster).toEqual({ total_gpus: 8, free_gpus: 4 });
    expect(p.risk).toMatchObject({ level: 'medium', strategy: 'canary', canary_share: 0.1, eval_duration_s: 3600 });
    expect(p.rows.find((r) => r.strategy === 'blue-green')).toEqual({
      strategy: 'blue-green',
      label: 'Blue-green',
      groups: null,
      extra_gpus: 4,
      extra_gpus_pct: 100,
      steady_overhead_pct: 100,
      downtime_ms: 0,
      max_capacity_drop_pct: 0,
      rollback_ms: DEFAULTS.control.planRouteSwitchMs,
      rollback_how: 'route switch to the standby (< 1 ms)',
      total_deploy_ms: 120_000,
      feasible: true,
      note: null,
    });
    expect(p.recommendation).toMatchObject({ strategy: 'canary', canary_share: 0.1, eval_duration_s: 3600 });
    expect(p.canary_stages).toBeNull();
  });
});

describe('formatPlan', () => {
  it('prints seed 000 columns, one line per row, and the recommendation', () => {
    const text = formatPlan(viaJson(seed000()));
    const lines = text.split('\n');
    expect(lines[0]).toBe('v2.3.0 → v2.3.1: 4 of 8 GPU(s) free; load ~120 s');
    expect(lines[2]).toMatch(/^STRATEGY\s+EXTRA GPUS\s+OVERHEAD\s+DOWNTIME\s+MAX CAPACITY DROP\s+ROLLBACK\s+TOTAL DEPLOY\s+FEASIBLE$/);
    expect(lines.find((l) => l.startsWith('Blue-green '))).toMatch(/^Blue-green\s+4 \(100%\)\s+100%\s+0\s+0%\s+< 1 ms\s+~120 s\s+yes$/);
    expect(lines.find((l) => l.startsWith('Canary'))).toMatch(/~62 min/);
    expect(lines.find((l) => l.startsWith('Rolling'))).toMatch(/no: the current version runs 1 worker/);
    expect(lines.at(-1)).toMatch(/^recommended: Canary — medium risk/);
  });

  it('a never-loaded target says its load time is estimated', () => {
    const text = formatPlan(viaJson(planStrategies({ totalGpus: 8, freeGpus: 4 }, v(), v({ id: 'new', loadTimeMs: undefined }))));
    expect(text.split('\n')[0]).toBe('v2.3.0 → new: 4 of 8 GPU(s) free; load ~127 s (estimated)');
  });

  it('the canary stages: each with its samples, rate and time, then the total', () => {
    const stages = planStages(10, [10, 50, 100], 300_000, 0.005);
    const text = formatPlan(viaJson({ ...seed000(), canaryStages: stages }));
    const tail = text.split('\n').slice(-4);
    expect(tail[0]).toBe(`canary stages at 10.0 req/s live: ${stages.note}`);
    expect(tail[1]).toMatch(/^ {2} 10 % {2}\d+ samples {2}1\.00 req\/s {2}→ ~\d+ (s|min)$/);
    expect(tail[2]).toMatch(/^ {2} 50 % {2}\d+ samples {2}5\.00 req\/s {2}→ /);
    expect(tail[3]).toMatch(/^ {2}total ~\d+ (s|min), then promotion$/);
  });

  it('without traffic the stages wait and the total is unknown (null times in the answer)', () => {
    const p = viaJson({ ...seed000(), canaryStages: planStages(0, [10, 50, 100], 300_000, 0.005) });
    expect(p.canary_stages?.total_ms).toBeNull();
    const lines = formatPlan(p).split('\n');
    expect(lines.filter((l) => l.endsWith('→ waits for traffic'))).toHaveLength(2);
    expect(lines.at(-1)).toBe('  total unknown (no traffic), then promotion');
  });
});
