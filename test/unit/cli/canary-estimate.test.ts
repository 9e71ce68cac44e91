// Regression: `canary start` with the defaults at the example's traffic needed hours and said
// nothing. It prints the expected duration from the stage plan's power analysis (the one `plan`
// shows) and warns past DEFAULTS.rollout.canaryLongWarnMs.
import { describe, expect, it } from 'vitest';
import { stagePlanView } from '../../../src/api/rollout-views.js';
import type { StagePlanView } from '../../../src/api/types.js';
import { formatCanaryEstimate } from '../../../src/cli/canary/estimate.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { planStages } from '../../../src/rollout/stage-plan.js';
import type { StagePlan } from '../../../src/rollout/stage-plan.js';

const STAGES = [...DEFAULTS.rollout.stages];
const FIVE_MIN = DEFAULTS.rollout.stageDurationMs;
const ALPHA = 0.005;
/** The plan as the CLI gets it: the API's view (Infinity is null), through JSON. */
const viaJson = (p: StagePlan): StagePlanView => JSON.parse(JSON.stringify(stagePlanView(p))) as StagePlanView;

describe('canary start with defaults at low traffic needs hours and says nothing', () => {
  it('at 0.8 req/s the default stages take hours: the total, each stage, and a warning naming the slow stage', () => {
    const p = planStages(0.8, STAGES, FIVE_MIN, ALPHA);
    expect(p.totalMs).toBeGreaterThan(DEFAULTS.rollout.canaryLongWarnMs);
    const e = formatCanaryEstimate(viaJson(p));
    expect(e.lines).toHaveLength(1);
    expect(e.lines[0]).toMatch(
      /^expected duration: ~\d+(\.\d)? h at 0\.80 req\/s live \(2 % ~\d+ min, 5 % ~\d+ min, 10 % ~\d+ min, 25 % ~\d+ min, 50 % ~\d+ min\), then promotion$/,
    );
    expect(e.warning).toMatch(
      /^warning: this canary is expected to take ~\d+(\.\d)? h \(at 2 % the canary gets 0\.02 req\/s and needs \d+ samples\); more traffic, fewer or larger stages \(--stages\), or --shadow-share shorten it$/,
    );
  });

  it('at 200 req/s the stages take their 5 min floor: the total and no warning', () => {
    const e = formatCanaryEstimate(viaJson(planStages(200, STAGES, FIVE_MIN, ALPHA)));
    expect(e.lines).toEqual([
      'expected duration: ~25 min at 200.00 req/s live (2 % ~300 s, 5 % ~300 s, 10 % ~300 s, 25 % ~300 s, 50 % ~300 s), then promotion',
    ]);
    expect(e.warning).toBeUndefined();
  });

  it('long stage durations alone also warn, saying the durations add up', () => {
    const e = formatCanaryEstimate(viaJson(planStages(200, [10, 50, 100], 45 * 60_000, ALPHA)));
    expect(e.warning).toMatch(/expected to take ~90 min \(the stage durations add up\)/);
  });

  it('without traffic: unknown, the samples the first stage waits for, no warning', () => {
    const p = planStages(0, STAGES, FIVE_MIN, ALPHA);
    const e = formatCanaryEstimate(viaJson(p));
    expect(e.lines).toEqual([
      `expected duration: unknown, the model has no live traffic yet: each stage waits for its canary samples (${p.stages[0]!.samplesNeeded} at 2 %)`,
    ]);
    expect(e.warning).toBeUndefined();
  });
});
