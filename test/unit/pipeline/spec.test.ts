// Pipeline file validation: every problem at once, each with its line and path; variables.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import type { ConfigIssue } from '../../../src/errors.js';
import { parsePipelineText } from '../../../src/rollout/pipeline/spec.js';
import type { SpecOptions } from '../../../src/rollout/pipeline/spec.js';

const ROOT = join(import.meta.dirname, '../../..');

function issues(src: string, opts: SpecOptions = { env: {} }): ConfigIssue[] {
  try {
    parsePipelineText(src, 'test.yaml', opts);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return [...(e as ConfigError).issues];
  }
  throw new Error('expected the file to be invalid');
}
const lines = (src: string, opts?: SpecOptions) => issues(src, opts).map((i) => `line ${i.line}: ${i.path}: ${i.message}`);

const SEED = `pipeline:
  stages:
    - name: validate
      steps:
        - run: python validate_model.py --model $MODEL_PATH
        - run: python check_quant_compatibility.py --model $MODEL_PATH
    - name: cache_weights
      steps:
        - run: dynamo cache download --model $MODEL_PATH --version $VERSION
    - name: load_green
      steps:
        - run: dynamo deploy green --model $MODEL_PATH --version $VERSION
        - wait_for: green_ready
    - name: canary
      steps:
        - run: dynamo canary start --version $VERSION --stages 1,5,25,50,100
        - monitor: health_gates
        - on_failure: dynamo rollback --instant
    - name: promote
      steps:
        - run: dynamo swap --confirm
        - run: dynamo notify --channel ops --message "Promoted $VERSION"
rollback:
  trigger: error_rate > 0.001 OR p99_latency > 500ms
  action: dynamo rollback --instant
  notify: pagerduty
`;

describe('pipeline spec', () => {
  it("accepts seed 000's deployment.yaml as written", () => {
    const p = parsePipelineText(SEED, 'seed.yaml', { vars: { MODEL_PATH: '/models/llama 70b', VERSION: 'v2.3.1' }, env: {} });
    expect(p.stages.map((s) => s.name)).toEqual(['validate', 'cache_weights', 'load_green', 'canary', 'promote']);
    const canary = p.stages[3]!;
    expect(canary.steps.map((s) => s.kind)).toEqual(['run', 'monitor']);
    expect(canary.onFailure.map((c) => c.argv)).toEqual([['dynamo', 'rollback', '--instant']]);
    // a value never splits a word; quotes group
    expect(p.stages[0]!.steps[0]).toMatchObject({ kind: 'run', command: { argv: ['python', 'validate_model.py', '--model', '/models/llama 70b'], line: 5 } });
    expect(p.stages[4]!.steps[1]).toMatchObject({ command: { argv: ['dynamo', 'notify', '--channel', 'ops', '--message', 'Promoted v2.3.1'] } });
    expect(p.stages[3]!.steps[1]).toEqual({ kind: 'monitor', forMs: 300_000, everyMs: 5_000, line: 17 });
    expect(p.rollback).toMatchObject({
      triggerText: 'error_rate > 0.001 OR p99_latency > 500ms',
      notify: 'pagerduty',
      action: { argv: ['dynamo', 'rollback', '--instant'], line: 25 },
    });
    expect(p.variables).toEqual([
      { name: 'MODEL_PATH', lines: [5, 6, 9, 12], set: true },
      { name: 'VERSION', lines: [9, 12, 16, 22], set: true },
    ]);
  });

  it('an unset variable is an error naming it and its line; check mode only lists it', () => {
    expect(lines(SEED, { vars: { VERSION: 'v2' }, env: {} })).toEqual([
      'line 5: pipeline.stages[0].steps[0].run: variable $MODEL_PATH is not set (pass --var MODEL_PATH=… or set it in the environment)',
      'line 6: pipeline.stages[0].steps[1].run: variable $MODEL_PATH is not set (pass --var MODEL_PATH=… or set it in the environment)',
      'line 9: pipeline.stages[1].steps[0].run: variable $MODEL_PATH is not set (pass --var MODEL_PATH=… or set it in the environment)',
      'line 12: pipeline.stages[2].steps[0].run: variable $MODEL_PATH is not set (pass --var MODEL_PATH=… or set it in the environment)',
    ]);
    const p = parsePipelineText(SEED, 'seed.yaml', { env: {}, requireVars: false });
    expect(p.variables.map((v) => [v.name, v.set])).toEqual([
      ['MODEL_PATH', false],
      ['VERSION', false],
    ]);
  });

  it('--var wins over the environment; ${NAME}, $$ and single quotes', () => {
    const src = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: echo \${A}x $B '$A' "$A" $$A \\$A costs $5\n`;
    const p = parsePipelineText(src, 't', { vars: { A: 'var' }, env: { A: 'env', B: 'b' } });
    expect(p.stages[0]!.steps[0]).toMatchObject({ command: { argv: ['echo', 'varx', 'b', '$A', 'var', '$A', '$A', 'costs', '$5'] } });
  });

  it('reports every problem at once, in line order, with its path', () => {
    const src = `pipeline:
  timeout: forever
  stages:
    - name: build
      steps:
        - run: make | tee log
        - wait_for: gren_ready
    - name: deploy
      steps:
        - runn: glidepath deploy green
        - run: echo $UNSET_X
          every: 5s
        - run: a
          wait_for: green_ready
        - 5
    - name: build
      steps:
        - monitor: health_gates
          for: 1s
          every: 5s
        - on_failure: echo 'oops
    - nme: x
rollback:
  trigger: error_rate > OR p99_latency > 500ms
  notify: pagerduty
  extra: 1
`;
    expect(lines(src)).toEqual([
      'line 2: pipeline.timeout: expected a duration such as 500ms, 30s, 5m or 1h',
      'line 6: pipeline.stages[0].steps[0].run: column 6: shell syntax "|" is not supported: run steps execute without a shell (quote it to pass it as an argument, or use `sh -c \'…\'`)',
      'line 7: pipeline.stages[0].steps[1].wait_for: unknown condition "gren_ready"; expected one of green_ready, version_ready, healthy, canary_succeeded, rollout_done, rolling_succeeded, rolling_done',
      'line 10: pipeline.stages[1].steps[0]: unknown step kind "runn"; expected run, wait_for, monitor or on_failure',
      'line 11: pipeline.stages[1].steps[1].run: variable $UNSET_X is not set (pass --var UNSET_X=… or set it in the environment)',
      'line 12: pipeline.stages[1].steps[1].every: "every" does not apply to a run step (it takes timeout)',
      'line 13: pipeline.stages[1].steps[2]: a step has exactly one kind; this one has run and wait_for (write them as separate "- " items)',
      'line 15: pipeline.stages[1].steps[3]: expected a step (a mapping such as "run: …"), got number 5',
      'line 16: pipeline.stages[2].name: duplicate stage name "build" (also stages[0])',
      'line 20: pipeline.stages[2].steps[0].every: every (5s) is longer than for (1s): the gates would never be checked',
      "line 21: pipeline.stages[2].steps[1].on_failure: column 6: unterminated single quote (')",
      'line 22: pipeline.stages[3].name: required',
      'line 22: pipeline.stages[3].steps: required',
      'line 22: pipeline.stages[3].nme: unknown key "nme"',
      'line 24: rollback.trigger: column 14: expected a number after \'>\', got "OR"',
      'line 26: rollback.extra: unknown key "extra"',
    ]);
  });

  it('names the step kind when a step has an unknown key beside a known kind', () => {
    const src = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: x\n          timout: 5s\n`;
    expect(lines(src)).toEqual([
      'line 6: pipeline.stages[0].steps[0].timout: unknown key "timout" in a step; expected run, wait_for, monitor, on_failure, timeout, for, every, until, version',
    ]);
  });

  it('monitor needs a rollback trigger; a stage needs a step besides on_failure', () => {
    const src = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - monitor: health_gates\n        - on_failure: x\n    - name: b\n      steps:\n        - on_failure: y\n`;
    expect(lines(src)).toEqual([
      'line 5: pipeline.stages[0].steps[0].monitor: monitor: health_gates evaluates rollback.trigger, and this file has none',
      'line 9: pipeline.stages[1].steps: a stage needs at least one run, wait_for or monitor step (on_failure only runs when one of them fails)',
    ]);
  });

  it('YAML syntax errors, empty files, top-level typos', () => {
    expect(lines('pipeline:\n  stages: [\n')[0]).toMatch(/^line \d+: : /);
    expect(issues('')).toEqual([{ path: '', message: 'the file is empty; expected a pipeline: section' }]);
    expect(lines('pipeline:\n  stages: []\nrollbak: {}\n')).toEqual([
      'line 2: pipeline.stages: a pipeline needs at least one stage',
      'line 3: rollbak: unknown key "rollbak"; expected pipeline, rollback',
    ]);
    expect(lines('stages: []\n')).toEqual([
      'line 1: stages: unknown key "stages"; expected pipeline, rollback',
      'line 1: pipeline: required: the file needs a pipeline: section with stages',
    ]);
  });

  it('reads durations, per-step timeouts, wait_for version with variables, pipeline.model', () => {
    const src = `pipeline:\n  model: $M\n  timeout: 90m\n  stages:\n    - name: a\n      timeout: 1h\n      steps:\n        - wait_for: green_ready\n          version: \${V}-rc\n          timeout: 1.5s\n        - monitor: health_gates\n          for: 250ms\n          every: 50ms\nrollback:\n  trigger: requests > 1\n`;
    const p = parsePipelineText(src, 't', { vars: { M: 'llama', V: 'v9' }, env: {} });
    expect(p).toMatchObject({ model: 'llama', timeoutMs: 5_400_000 });
    expect(p.stages[0]).toMatchObject({
      timeoutMs: 3_600_000,
      steps: [
        { kind: 'wait_for', condition: 'green_ready', version: 'v9-rc', timeoutMs: 1500 },
        { kind: 'monitor', forMs: 250, everyMs: 50 },
      ],
    });
  });

  it('monitor until: a wait condition, with for as its bound (default 2h) and an optional version', () => {
    const src = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - monitor: health_gates\n          until: canary_succeeded\n          version: $V\n        - monitor: health_gates\n          until: canary_done\n        - monitor: health_gates\n          version: v1\nrollback:\n  trigger: requests > 1\n`;
    expect(lines(src, { vars: { V: 'v2' }, env: {} })).toEqual([
      'line 9: pipeline.stages[0].steps[1].until: unknown condition "canary_done"; expected one of green_ready, version_ready, healthy, canary_succeeded, rollout_done, rolling_succeeded, rolling_done',
      'line 11: pipeline.stages[0].steps[2].version: "version" of a monitor step names the version its until: condition waits for; this step has no until',
    ]);
    const ok = parsePipelineText(src.replace('canary_done', 'rollout_done').replace('          version: v1\n', '          for: 10s\n'), 't', {
      vars: { V: 'v2' },
      env: {},
    });
    expect(ok.stages[0]!.steps).toEqual([
      { kind: 'monitor', forMs: 7_200_000, everyMs: 5000, until: 'canary_succeeded', version: 'v2', line: 5 },
      { kind: 'monitor', forMs: 7_200_000, everyMs: 5000, until: 'rollout_done', version: undefined, line: 8 },
      { kind: 'monitor', forMs: 10_000, everyMs: 5000, until: undefined, version: undefined, line: 10 },
    ]);
  });

  it('the rolling update conditions: wait_for and monitor until, with a version', () => {
    const src = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - wait_for: rolling_succeeded\n          version: $V\n        - monitor: health_gates\n          until: rolling_done\nrollback:\n  trigger: canary.error_rate > 1%\n`;
    expect(parsePipelineText(src, 't', { vars: { V: 'v2' }, env: {} }).stages[0]!.steps).toEqual([
      { kind: 'wait_for', condition: 'rolling_succeeded', version: 'v2', timeoutMs: 900_000, line: 5 },
      { kind: 'monitor', forMs: 7_200_000, everyMs: 5000, until: 'rolling_done', version: undefined, line: 7 },
    ]);
  });

  it('examples/rolling.yaml is valid: a rolling stage watched until rolling_succeeded, aborted on failure', () => {
    const text = readFileSync(join(ROOT, 'examples/rolling.yaml'), 'utf8');
    const p = parsePipelineText(text, 'examples/rolling.yaml', { vars: { MODEL: 'chat', VERSION: 'v3' }, env: {} });
    expect(p.stages.map((s) => s.name)).toEqual(['validate', 'rolling', 'verify']);
    const rolling = p.stages[1]!;
    expect(rolling.steps.map((s) => (s.kind === 'run' ? s.command.argv.slice(0, 7) : s.kind === 'monitor' ? s.until : s.condition))).toEqual([
      ['glidepath', 'rollout', 'rolling', '--model', 'chat', '--to', 'v3'],
      'rolling_succeeded',
    ]);
    expect(rolling.onFailure.map((c) => c.argv.slice(0, 3))).toEqual([['glidepath', 'rollout', 'abort']]);
    expect(p.rollback?.triggerText).toBe('canary.error_rate > 0.001 OR canary.p99_latency > 500ms');
    expect(p.rollback?.action?.argv.slice(0, 3)).toEqual(['glidepath', 'rollout', 'abort']);
  });

  it('examples/deployment.yaml is valid', () => {
    const text = readFileSync(join(ROOT, 'examples/deployment.yaml'), 'utf8');
    const p = parsePipelineText(text, 'examples/deployment.yaml', { vars: { MODEL: 'chat', VERSION: 'v2' }, env: {} });
    expect(p.stages.map((s) => s.name)).toEqual(['validate', 'canary', 'promote']);
    expect(p.rollback?.triggerText).toBe('canary.error_rate > 0.001 OR canary.p99_latency > 500ms');
  });
});

describe('durations no timer keeps', () => {
  // they were checked by the CLI only: any other reader of the file took them
  it('are refused when the file is read, each naming its key and line', () => {
    const src = `pipeline:
  timeout: 700h
  stages:
    - name: s
      steps:
        - run: echo
          timeout: 0.4ms
`;
    expect(lines(src)).toEqual([
      'line 2: pipeline.timeout: 700h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
      'line 7: pipeline.stages[0].steps[0].timeout: a duration under 1ms rounds to 0: give at least 1ms',
    ]);
  });

  // the run's and the stages' durations were checked after the rest, with no line, and a stage with a
  // bad field hid its steps' problems: a second pass found what the first had not shown
  it("are reported at once with every other problem, a bad stage's steps included, each at its key's line", () => {
    const src = `pipeline:
  timeout: 900h
  stages:
    - name: one
      timeout: 0.2ms
      steps:
        - run: echo
          timeout: nope
    - name: two
      timeout: soon
      colour: blue
      steps:
        - wait_for: promoted
          timeout: 800h
        - monitor: health_gates
          for: 10m
          every: 0.4ms
rollback:
  trigger: canary.error_rate > 0.01
`;
    expect(lines(src)).toEqual([
      'line 2: pipeline.timeout: 900h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
      'line 5: pipeline.stages[0].timeout: a duration under 1ms rounds to 0: give at least 1ms',
      'line 8: pipeline.stages[0].steps[0].timeout: expected a duration such as 500ms, 30s, 5m or 1h',
      'line 10: pipeline.stages[1].timeout: expected a duration such as 500ms, 30s, 5m or 1h',
      'line 11: pipeline.stages[1].colour: unknown key "colour"',
      'line 13: pipeline.stages[1].steps[0].wait_for: unknown condition "promoted"; expected one of green_ready, version_ready, healthy, canary_succeeded, rollout_done, rolling_succeeded, rolling_done',
      'line 14: pipeline.stages[1].steps[0].timeout: 800h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
      'line 17: pipeline.stages[1].steps[1].every: a duration under 1ms rounds to 0: give at least 1ms',
    ]);
  });

  // a step whose duration was refused by its schema was left out, and its other problems with it
  it('do not hide the rest of their step: its command, its condition, a key its kind does not take', () => {
    const src = `pipeline:
  stages:
    - name: s
      steps:
        - run: echo a | b
          timeout: 0.4ms
        - monitor: health_gates
          timeout: 900h
        - run: 5
          timeout: 700h
`;
    expect(lines(src)).toEqual([
      'line 5: pipeline.stages[0].steps[0].run: column 8: shell syntax "|" is not supported: run steps execute without a shell (quote it to pass it as an argument, or use `sh -c \'…\'`)',
      'line 6: pipeline.stages[0].steps[0].timeout: a duration under 1ms rounds to 0: give at least 1ms',
      'line 7: pipeline.stages[0].steps[1].monitor: monitor: health_gates evaluates rollback.trigger, and this file has none',
      'line 8: pipeline.stages[0].steps[1].timeout: 900h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
      'line 8: pipeline.stages[0].steps[1].timeout: "timeout" does not apply to a monitor step (it takes for, every, until, version)',
      'line 9: pipeline.stages[0].steps[2].run: expected a string, got number 5',
      'line 10: pipeline.stages[0].steps[2].timeout: 700h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
    ]);
  });

  // a stage kept for its steps after its name was refused is named '': never a duplicate of another
  it('a stage whose name is refused is still checked, and not taken for a duplicate', () => {
    const src = `pipeline:
  stages:
    - name: ""
      timeout: 0.1ms
      steps:
        - run: echo
    - name: ""
      steps:
        - run: echo
          timeout: 800h
`;
    expect(lines(src)).toEqual([
      'line 3: pipeline.stages[0].name: must not be empty',
      'line 4: pipeline.stages[0].timeout: a duration under 1ms rounds to 0: give at least 1ms',
      'line 7: pipeline.stages[1].name: must not be empty',
      'line 10: pipeline.stages[1].steps[0].timeout: 800h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)',
    ]);
  });
});
