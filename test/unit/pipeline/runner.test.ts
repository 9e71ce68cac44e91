// The runner's bounds and failure paths, with a fake admin API and tiny node commands.
import { describe, expect, it } from 'vitest';
import type { AdminApi } from '../../../src/rollout/pipeline/observe.js';
import { runPipeline } from '../../../src/rollout/pipeline/runner.js';
import type { Reporter, RunnerDeps } from '../../../src/rollout/pipeline/runner.js';
import { parsePipelineText } from '../../../src/rollout/pipeline/spec.js';

const NODE = process.execPath;

function reporter(): Reporter & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (l) => lines.push(l), output: (stage, l) => lines.push(`[${stage}] ${l}`) };
}

const statusWith = (errorRate: number | null) => ({
  ready: { ready: true, problems: [] },
  models: [
    {
      model: 'm',
      active: 'v1',
      route: { stable: 'v1', weights: { v1: 1 } },
      versions: [
        { version: 'v1', status: 'active', window: { requests: errorRate === null ? 0 : 100, error_rate: errorRate, latency_ms: { p50: 10, p99: 20 } } },
      ],
    },
  ],
});

function api(fn: (path: string) => unknown): AdminApi & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    get<T>(path: string): Promise<T> {
      calls.push(path);
      try {
        return Promise.resolve(fn(path) as T);
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    },
  };
}

function run(yaml: string, deps: Partial<RunnerDeps> & { api: AdminApi }) {
  const p = parsePipelineText(yaml, 't.yaml', { vars: { NODE }, env: {} });
  const rep = reporter();
  return runPipeline(p, { model: 'm', env: { ...process.env, NODE }, reporter: rep, pollMs: 5, ...deps }).then((r) => ({ r, lines: rep.lines }));
}

const say = (t: string) => `$NODE -e "console.log('${t}')"`;

describe('pipeline runner', () => {
  it('the pipeline timeout stops a waiting step, and on_failure still runs', async () => {
    const yaml = `pipeline:\n  timeout: 150ms\n  stages:\n    - name: a\n      steps:\n        - wait_for: green_ready\n          version: v2\n        - on_failure: ${say('cleanup')}\n`;
    const { r, lines } = await run(yaml, { api: api(() => ({ status: 'loading' })) });
    expect(r).toMatchObject({ ok: false, outcome: 'failed', failedStage: 'a' });
    expect(r.reason).toBe('wait_for green_ready (version v2): pipeline timeout (150 ms) reached: stopped while waiting (last: v2 is loading)');
    expect(lines).toContain('[a] cleanup');
    expect(r.stages[0]!.onFailure).toMatchObject([{ status: 'ok' }]);
  });

  it('a stage timeout kills a running command', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: slow\n      timeout: 200ms\n      steps:\n        - run: $NODE -e "setTimeout(() => {}, 60000)"\n`;
    const t0 = Date.now();
    const { r } = await run(yaml, { api: api(() => ({})) });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.reason).toMatch(/: stage timeout \(200 ms\) reached: stopped \(pipeline timeout or interrupt\) after \d+ ms$/);
  });

  it('an interrupt stops the current step; later stages do not run', async () => {
    const ac = new AbortController();
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: $NODE -e "console.log('started'); setTimeout(() => {}, 60000)"\n    - name: b\n      steps:\n        - run: ${say('never')}\n`;
    const rep = reporter();
    const p = parsePipelineText(yaml, 't.yaml', { vars: { NODE }, env: {} });
    const done = runPipeline(p, {
      api: api(() => ({})),
      model: 'm',
      env: process.env,
      reporter: { info: (l) => rep.info(l), output: (s, l) => (rep.output(s, l, 'stdout'), l === 'started' && ac.abort()) },
      signal: ac.signal,
    });
    const r = await done;
    expect(r.reason).toMatch(/interrupted: stopped/);
    expect(r.stages.map((s) => s.status)).toEqual(['failed', 'not_run']);
  });

  it('on_failure has its own timeout', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: $NODE -e "process.exit(1)"\n        - on_failure: $NODE -e "setTimeout(() => {}, 60000)"\n          timeout: 100ms\n`;
    const { r } = await run(yaml, { api: api(() => ({})) });
    expect(r.stages[0]!.onFailure).toMatchObject([{ status: 'failed', detail: expect.stringMatching(/^timed out after 100 ms and was killed/) }]);
  });

  it('a command that cannot start fails its step with the reason', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: no-such-command-xyz --flag\n`;
    const { r } = await run(yaml, { api: api(() => ({})) });
    expect(r.reason).toMatch(/^run no-such-command-xyz --flag: command not found: no-such-command-xyz after \d+ ms$/);
  });

  it('monitor: three API failures in a row fail the step (not the trigger), and on_failure runs', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - monitor: health_gates\n          for: 10s\n          every: 5ms\n        - on_failure: ${say('cleanup')}\nrollback:\n  trigger: error_rate > 0.01\n  action: ${say('rollback')}\n`;
    const a = api(() => {
      throw new Error('connection refused');
    });
    const { r, lines } = await run(yaml, { api: a });
    expect(r).toMatchObject({ outcome: 'failed', reason: 'monitor health_gates: 3 admin API calls in a row failed: connection refused' });
    expect(a.calls).toHaveLength(3);
    expect(lines).toContain('[a] cleanup');
    expect(lines).not.toContain('[a] rollback');
  });

  it('monitor: an isolated API failure is retried; no data never fires', async () => {
    let n = 0;
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - monitor: health_gates\n          for: 40ms\n          every: 5ms\nrollback:\n  trigger: error_rate > 0.01\n`;
    const { r } = await run(yaml, {
      api: api(() => {
        if (++n === 2) throw new Error('blip');
        return statusWith(null);
      }),
    });
    expect(r.ok).toBe(true);
    expect(r.stages[0]!.steps[0]!.detail).toMatch(
      /^health gates held for 40 ms \(\d+ checks; last: not fired, no data: error_rate > 0.01 \(no data for error_rate\)\)$/,
    );
  });

  it('a fired trigger without rollback.action runs the stage on_failure instead', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - monitor: health_gates\n          for: 1s\n          every: 5ms\n        - on_failure: ${say('cleanup')}\nrollback:\n  trigger: error_rate > 0.01\n`;
    const { r, lines } = await run(yaml, { api: api(() => statusWith(0.2)) });
    expect(r).toMatchObject({ outcome: 'rolled_back', reason: 'rollback trigger fired: error_rate > 0.01 (measured 0.2)' });
    expect(r.rollback).toMatchObject({ stage: 'a', action: undefined, notify: undefined, versions: { active: 'v1', stable: 'v1' } });
    expect(lines).toContain('[a] cleanup');
  });

  it('variables reach commands through argv and the environment', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: a\n      steps:\n        - run: $NODE -e "console.log(process.argv[1], process.env.GREETING)" "$GREETING world"\n`;
    const p = parsePipelineText(yaml, 't.yaml', { vars: { NODE, GREETING: 'hello' }, env: {} });
    const rep = reporter();
    const r = await runPipeline(p, { api: api(() => ({})), model: undefined, env: { ...process.env, NODE, GREETING: 'hello' }, reporter: rep });
    expect(r.ok).toBe(true);
    expect(rep.lines).toContain('[a] hello world hello');
  });
});

describe('pipeline runner: a rolling update watched by monitor until rolling_succeeded', () => {
  /** A rolling update v1 → v2 of 2 workers that takes one step, through `phases`, at each read of its view. */
  function rollingApi(phases: string[], v2ErrorRate: number) {
    let i = 0;
    const share = () => Math.min(1, i / 2);
    const view = () => {
      const phase = phases[Math.min(i, phases.length - 1)];
      return {
        from: 'v1',
        to: 'v2',
        phase,
        step: i,
        paused_reason: phase === 'paused' ? 'failure: worker m/v2/1 exited' : null,
        rollback_reason: phase === 'rolled_back' ? 'new worker crashed' : null,
        roles: { aggregated: { desired: 2, old: 2 - share() * 2, ready: share() * 2 } },
        weights: { v1: 1 - share(), v2: share() },
      };
    };
    // each check reads /status, then the update, which then moves on
    return api((path) => {
      if (path === '/models/m/rolling') {
        const v = view();
        i++;
        return v;
      }
      if (path !== '/status') throw new Error(`unexpected ${path}`);
      return {
        ready: { ready: true, problems: [] },
        models: [
          {
            model: 'm',
            active: 'v1',
            // as the rolling controller publishes it: stable stays the old version, the new pool's weight is its ready share
            route: { stable: 'v1', weights: { v1: 1 - share(), v2: share() } },
            versions: [
              { version: 'v1', status: 'active', window: { requests: 100, error_rate: 0, latency_ms: { p50: 10, p99: 20 } } },
              { version: 'v2', status: 'loading', window: { requests: share() > 0 ? 100 : 0, error_rate: v2ErrorRate, latency_ms: { p50: 10, p99: 20 } } },
            ],
          },
        ],
      };
    });
  }
  const yaml = (action = '') =>
    `pipeline:\n  stages:\n    - name: rolling\n      steps:\n        - monitor: health_gates\n          until: rolling_succeeded\n          version: v2\n          for: 10s\n          every: 5ms\n        - on_failure: ${say('abort')}\nrollback:\n  trigger: canary.error_rate > 0.05\n${action}`;

  it('ends when the update succeeds; a pause on the way keeps it waiting', async () => {
    const { r } = await run(yaml(), { api: rollingApi(['progressing', 'paused', 'progressing', 'succeeded'], 0) });
    expect(r.ok).toBe(true);
    expect(r.stages[0]!.steps[0]!.detail).toBe('rolling update to v2 succeeded; health gates held (4 checks; last: not fired)');
  });

  it('an update that ends rolled back fails the step at once, and on_failure runs', async () => {
    const { r, lines } = await run(yaml(), { api: rollingApi(['progressing', 'rolled_back'], 0) });
    expect(r).toMatchObject({
      outcome: 'failed',
      reason: 'monitor health_gates until rolling_succeeded (version v2): rolling update to v2 ended rolled_back: new worker crashed',
    });
    expect(lines).toContain('[rolling] abort');
  });

  it('canary. reads the new pool: its errors fire the trigger once it has traffic', async () => {
    const a = rollingApi(['progressing'], 0.2);
    const { r, lines } = await run(yaml(`  action: ${say('rollout abort')}\n`), { api: a });
    expect(r).toMatchObject({ outcome: 'rolled_back', reason: 'rollback trigger fired: canary.error_rate > 0.05 (measured 0.2)' });
    expect(r.rollback?.versions).toEqual({ active: 'v1', stable: 'v1', canary: 'v2' });
    // the first check, before a new worker was ready, had no canary to read: not fired, the update read; the second fired
    expect(a.calls).toEqual(['/status', '/models/m/rolling', '/status']);
    expect(lines).toContain('[rolling] rollout abort');
  });
});
