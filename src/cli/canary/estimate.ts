// What `canary start` says about the stages it starts, from the answer's `stage_plan`: the expected
// total from the power analysis at the live rate, and a warning past DEFAULTS.rollout.canaryLongWarnMs.
import type { StagePlanView } from '../../api/types.js';
import { DEFAULTS } from '../../defaults.js';
import { fmtMs } from '../../rollout/planner.js';

/** The plan's times are null when the fleet has no traffic to time the stages by. */
export function formatCanaryEstimate(sp: StagePlanView): { lines: string[]; warning?: string } {
  const first = sp.stages[0];
  if (sp.total_ms === null) {
    const need = first ? ` (${first.samples_needed} at ${first.percent} %)` : '';
    return { lines: [`expected duration: unknown, the model has no live traffic yet: each stage waits for its canary samples${need}`] };
  }
  if (sp.stages.length === 0) return { lines: ['expected duration: none, no stage below 100 %: it promotes at once'] };
  // a finite total means every stage had traffic to time it by: their times are numbers too
  const ms = (x: number | null): number => x ?? Infinity;
  const per = sp.stages.map((r) => `${r.percent} % ${fmtMs(ms(r.duration_ms))}`).join(', ');
  const lines = [`expected duration: ${fmtMs(sp.total_ms)} at ${sp.live_rps.toFixed(2)} req/s live (${per}), then promotion`];
  if (sp.total_ms <= DEFAULTS.rollout.canaryLongWarnMs) return { lines };
  const slowest = [...sp.stages].sort((a, b) => ms(b.duration_ms) - ms(a.duration_ms))[0];
  const why =
    slowest && ms(slowest.collect_ms) > sp.stage_duration_ms
      ? `at ${slowest.percent} % the canary gets ${slowest.canary_rps.toFixed(2)} req/s and needs ${slowest.samples_needed} samples`
      : 'the stage durations add up';
  return {
    lines,
    warning: `warning: this canary is expected to take ${fmtMs(sp.total_ms)} (${why}); more traffic, fewer or larger stages (--stages), or --shadow-share shorten it`,
  };
}
