// The durations of a pipeline file that no timer can keep: checked when the file is read (spec.ts), before anything runs, each an issue naming its key.
import { DEFAULTS } from '../../defaults.js';
import type { ConfigIssue } from '../../errors.js';
import type { Command, Pipeline, Step } from './spec.js';
import { formatDuration } from './words.js';

const MAX = DEFAULTS.durations.timerMaxMs;

/** Why `ms` cannot be a timer's delay, or undefined when it can. */
function wrong(ms: number): string | undefined {
  // `0.4ms` is read as a duration and rounds to 0: the step would time out at once
  if (ms < 1) return 'a duration under 1ms rounds to 0: give at least 1ms';
  // past 2^31 - 1 ms Node's timer fires after 1 ms: the step, stage or run would time out at once
  if (ms > MAX) return `${formatDuration(ms)} is longer than a timer can wait: at most ${MAX} ms (~24.8 days)`;
  return undefined;
}

/**
 * Every duration of `p` that is shorter than 1 ms or longer than a timer waits, with its key's path
 * (and its step's line). A step's index counts its stage's steps in file order, on_failure included.
 */
export function timerIssues(p: Pipeline): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const check = (ms: number | undefined, path: string, line?: number) => {
    if (ms === undefined) return;
    const why = wrong(ms);
    if (why !== undefined) issues.push({ path, message: why, ...(line !== undefined ? { line } : {}) });
  };
  check(p.timeoutMs, 'pipeline.timeout');
  p.stages.forEach((stage, si) => {
    const at = `pipeline.stages[${si}]`;
    check(stage.timeoutMs, `${at}.timeout`);
    // steps and on_failure commands were split apart when compiled; their lines give back the file's order
    const items: (Step | (Command & { kind: 'on_failure' }))[] = [...stage.steps, ...stage.onFailure.map((c) => ({ ...c, kind: 'on_failure' as const }))];
    items.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
    items.forEach((s, i) => {
      const sp = `${at}.steps[${i}]`;
      if (s.kind === 'monitor') {
        check(s.forMs, `${sp}.for`, s.line);
        check(s.everyMs, `${sp}.every`, s.line);
      } else check(s.timeoutMs, `${sp}.timeout`, s.line);
    });
  });
  return issues;
}
