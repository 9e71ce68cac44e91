// What the runner reads from the admin API: trigger scopes from GET /status and the wait_for conditions.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { CanaryView, RollingView, StatusView, VersionDetail, WindowView } from '../../../src/api/types.js';
import { observe, pollCondition } from '../../../src/rollout/pipeline/observe.js';
import type { AdminApi, CanaryJson, RollingJson, StatusJson, VersionJson, WindowJson } from '../../../src/rollout/pipeline/observe.js';

describe('the bodies the runner reads are what the admin API declares', () => {
  // the runner (src/rollout/) may not import src/api/types.ts: its own narrow types must accept
  // the API's, or a renamed field would be read as missing (tsc checks these; vitest runs nothing)
  it('window, status, canary, rolling update and version', () => {
    expectTypeOf<WindowView>().toExtend<WindowJson>();
    expectTypeOf<StatusView>().toExtend<StatusJson>();
    expectTypeOf<CanaryView>().toExtend<CanaryJson>();
    expectTypeOf<RollingView>().toExtend<RollingJson>();
    expectTypeOf<VersionDetail>().toExtend<VersionJson>();
  });
});

describe('trigger scopes from GET /status', () => {
  const win = (requests: number, errorRate: number | null, p99: number | null) => ({
    requests,
    error_rate: errorRate,
    latency_ms: { p50: p99, p99 },
    ttft_ms: { p50: null, p99: null },
    tpot_ms: { p50: 1, p99: 2 },
  });
  it('active, stable (route.stable) and canary (largest other weight)', () => {
    const o = observe(
      {
        models: [
          {
            model: 'm',
            active: 'v1',
            route: { stable: 'v1', weights: { v1: 0.9, v2: 0.1, v3: 0 } },
            versions: [
              { version: 'v1', status: 'active', window: win(100, 0.01, 200) },
              { version: 'v2', status: 'ready', window: win(0, null, null) },
            ],
          },
        ],
      },
      'm',
    );
    expect(o.versions).toEqual({ active: 'v1', stable: 'v1', canary: 'v2' });
    expect(o.stats.active).toEqual({ requests: 100, error_rate: 0.01, p99_latency: 200, p50_latency: 200, p99_ttft: null, p99_tpot: 2 });
    // no requests: the error rate is no data, not 0
    expect(o.stats.canary?.error_rate).toBeNull();
  });

  it('no canary when the route has one version; unknown model is an error', () => {
    const st = { models: [{ model: 'm', active: 'v1', route: { weights: { v1: 1 } }, versions: [{ version: 'v1', status: 'active' }] }] };
    expect(observe(st, 'm').versions).toEqual({ active: 'v1', stable: 'v1' });
    expect(() => observe(st, 'x')).toThrow('the admin API does not know model "x" (it serves: m)');
  });
});

/** A fake admin API: path → answer; an Error with a status is thrown like the client's ApiError. */
function api(answers: Record<string, unknown>): AdminApi {
  return {
    get<T>(path: string): Promise<T> {
      const a = answers[path];
      if (a === undefined) return Promise.reject(Object.assign(new Error(`no route ${path}`), { status: 404 }));
      if (a instanceof Error) return Promise.reject(a);
      return Promise.resolve(a as T);
    },
  };
}

const V = '/models/m/versions/v2';
const C = '/models/m/canary';
const canary = (phase: string, extra: Record<string, unknown> = {}) => ({
  [C]: { canary: 'v2', phase, stages: [5, 25, 100], stage_index: 1, percent: 25, ...extra },
});
const R = '/models/m/rolling';
/** A rolling update v1 → v2 of 4 workers, 2 replaced, at step 3 (the fields GET …/rolling has that the conditions read). */
const rolling = (phase: string, extra: Record<string, unknown> = {}) => ({
  [R]: {
    from: 'v1',
    to: 'v2',
    phase,
    direction: 'forward',
    step: 3,
    paused_reason: null,
    rollback_reason: null,
    message: null,
    roles: { aggregated: { desired: 4, old: 2, ready: 2, starting: 1 } },
    weights: { v1: 0.5, v2: 0.5 },
    ...extra,
  },
});

describe('wait_for conditions', () => {
  const cases: [string, Parameters<typeof pollCondition>[2], string | undefined, Record<string, unknown>, { state: string; detail: string }][] = [
    ['green_ready: loading', 'green_ready', 'v2', { [V]: { status: 'loading' } }, { state: 'waiting', detail: 'v2 is loading' }],
    ['green_ready: ready', 'green_ready', 'v2', { [V]: { status: 'ready' } }, { state: 'done', detail: 'v2 is ready' }],
    ['green_ready: not registered yet', 'green_ready', 'v2', {}, { state: 'waiting', detail: 'v2 is not registered yet' }],
    [
      'green_ready: failed',
      'green_ready',
      'v2',
      { [V]: { status: 'failed', failure: { message: 'out of memory' } } },
      { state: 'failed', detail: 'v2 failed to load: out of memory' },
    ],
    [
      'green_ready: already active',
      'green_ready',
      'v2',
      { [V]: { status: 'active' } },
      { state: 'failed', detail: 'v2 is already active (nothing to deploy green)' },
    ],
    [
      'green_ready: any version',
      'green_ready',
      undefined,
      {
        '/status': {
          models: [
            {
              model: 'm',
              active: 'v1',
              versions: [
                { version: 'v1', status: 'active' },
                { version: 'v3', status: 'ready' },
              ],
            },
          ],
        },
      },
      { state: 'done', detail: 'v3 is ready' },
    ],
    ['version_ready: active counts', 'version_ready', 'v2', { [V]: { status: 'active' } }, { state: 'done', detail: 'v2 is loaded (active)' }],
    [
      'version_ready: needs a version',
      'version_ready',
      undefined,
      {},
      { state: 'failed', detail: 'version_ready needs a version: give the step a version: or set $VERSION' },
    ],
    ['canary_succeeded: no canary yet', 'canary_succeeded', 'v2', {}, { state: 'waiting', detail: 'm has no canary yet' }],
    [
      'canary_succeeded: progressing',
      'canary_succeeded',
      'v2',
      canary('progressing'),
      { state: 'waiting', detail: 'canary of v2 is progressing at 25% (stage 2/3)' },
    ],
    [
      'canary_succeeded: paused',
      'canary_succeeded',
      'v2',
      canary('paused', { paused_reason: 'inconclusive' }),
      { state: 'waiting', detail: 'canary of v2 is paused at 25%: inconclusive (waiting for a human: canary resume|promote|abort)' },
    ],
    ['canary_succeeded: an older canary', 'canary_succeeded', 'v3', canary('succeeded'), { state: 'waiting', detail: 'the last canary of m is of v2, not v3' }],
    ['canary_succeeded: succeeded', 'canary_succeeded', 'v2', canary('succeeded'), { state: 'done', detail: 'canary of v2 succeeded' }],
    [
      'canary_succeeded: rolled back',
      'canary_succeeded',
      'v2',
      canary('rolled_back', { rollback: { reason: 'error rate 4% vs 0.1%' } }),
      { state: 'failed', detail: 'canary of v2 ended rolled_back: error rate 4% vs 0.1%' },
    ],
    ['rollout_done: rolled back is done', 'rollout_done', 'v2', canary('rolled_back'), { state: 'done', detail: 'canary of v2 ended rolled_back' }],
    // a 404 rollout_not_found: the model never had a rolling update
    ['rolling_succeeded: none yet', 'rolling_succeeded', 'v2', {}, { state: 'waiting', detail: 'm has no rolling update yet' }],
    [
      'rolling_succeeded: progressing',
      'rolling_succeeded',
      'v2',
      rolling('progressing'),
      { state: 'waiting', detail: 'rolling update to v2 is progressing at step 3 (2/4 v2 worker(s) ready, 2 v1 serving); v2 has 50% of traffic' },
    ],
    [
      'rolling_succeeded: paused at the partition says why and who resumes it',
      'rolling_succeeded',
      'v2',
      rolling('paused', { paused_reason: 'paused at the partition: 2 old worker(s) left' }),
      {
        state: 'waiting',
        detail:
          'rolling update to v2 is paused at step 3 (2/4 v2 worker(s) ready, 2 v1 serving): paused at the partition: 2 old worker(s) left (waiting for a human: rollout resume|abort)',
      },
    ],
    [
      'rolling_succeeded: rolling back keeps waiting, with why',
      'rolling_succeeded',
      'v2',
      // going back, the roles count v1's workers as the ones coming and v2's as the ones going
      rolling('rolling_back', {
        direction: 'back',
        rollback_reason: 'new worker crashed',
        roles: { aggregated: { desired: 4, old: 1, ready: 3, starting: 0 } },
        weights: { v1: 0.75, v2: 0.25 },
      }),
      {
        state: 'waiting',
        detail: 'rolling update to v2 is rolling_back at step 3 (3/4 v1 worker(s) ready, 1 v2 serving); v2 has 25% of traffic; going back: new worker crashed',
      },
    ],
    [
      'rolling_succeeded: an older update of another version',
      'rolling_succeeded',
      'v3',
      rolling('succeeded'),
      { state: 'waiting', detail: 'the last rolling update of m is to v2, not v3' },
    ],
    ['rolling_succeeded: succeeded', 'rolling_succeeded', 'v2', rolling('succeeded'), { state: 'done', detail: 'rolling update to v2 succeeded' }],
    [
      'rolling_succeeded: the last one when no version is given',
      'rolling_succeeded',
      undefined,
      rolling('succeeded'),
      { state: 'done', detail: 'rolling update to v2 succeeded' },
    ],
    [
      'rolling_succeeded: aborted fails at once',
      'rolling_succeeded',
      'v2',
      rolling('aborted', { rollback_reason: 'pipeline step failed (admin)' }),
      { state: 'failed', detail: 'rolling update to v2 ended aborted: pipeline step failed (admin)' },
    ],
    [
      'rolling_succeeded: rolled back fails at once',
      'rolling_succeeded',
      'v2',
      rolling('rolled_back', { rollback_reason: 'no progress for 600 s (progress deadline exceeded)' }),
      { state: 'failed', detail: 'rolling update to v2 ended rolled_back: no progress for 600 s (progress deadline exceeded)' },
    ],
    [
      'rolling_succeeded: failed fails at once (its message says why)',
      'rolling_succeeded',
      'v2',
      rolling('failed', { message: 'v1 is gone' }),
      { state: 'failed', detail: 'rolling update to v2 ended failed: v1 is gone' },
    ],
    ['rolling_done: succeeded', 'rolling_done', 'v2', rolling('succeeded'), { state: 'done', detail: 'rolling update to v2 succeeded' }],
    [
      'rolling_done: rolled back is done, and says so',
      'rolling_done',
      'v2',
      rolling('rolled_back', { rollback_reason: 'new worker crashed' }),
      { state: 'done', detail: 'rolling update to v2 ended rolled_back: new worker crashed' },
    ],
    ['rolling_done: aborted is done', 'rolling_done', 'v2', rolling('aborted'), { state: 'done', detail: 'rolling update to v2 ended aborted' }],
    [
      'rolling_done: paused keeps waiting',
      'rolling_done',
      'v2',
      rolling('paused', { paused_reason: 'paused by an operator (admin)' }),
      {
        state: 'waiting',
        detail:
          'rolling update to v2 is paused at step 3 (2/4 v2 worker(s) ready, 2 v1 serving): paused by an operator (admin) (waiting for a human: rollout resume|abort)',
      },
    ],
    // the conditions on a canary do not read the rolling update, nor the other way round
    ['canary_succeeded ignores a rolling update', 'canary_succeeded', 'v2', rolling('succeeded'), { state: 'waiting', detail: 'm has no canary yet' }],
    ['rolling_done ignores a canary', 'rolling_done', 'v2', canary('succeeded'), { state: 'waiting', detail: 'm has no rolling update yet' }],
  ];
  it.each(cases)('%s', async (_name, cond, version, answers, want) => {
    expect(await pollCondition(api(answers), 'm', cond, version)).toEqual(want);
  });

  it('healthy: gateway ready, an active version, not unhealthy, a routable worker', async () => {
    // GET /status's `ready` is the data plane's {ready, problems} (regression: it was read as a
    // boolean, so a gateway that was not ready never held the condition back)
    const st = (ready: boolean, active: string | null) => ({
      '/status': { ready: { ready, problems: ready ? [] : ['model m has no routable worker'] }, models: [{ model: 'm', active, versions: [] }] },
    });
    const v1 = (state: string) => ({ '/models/m/versions/v1': { status: 'active', health: { state } } });
    const workers = (routable: boolean) => ({ '/workers?model=m': [{ version: 'v1', routable }] });
    expect(await pollCondition(api({ ...st(false, 'v1') }), 'm', 'healthy', undefined)).toEqual({
      state: 'waiting',
      detail: 'the gateway is not ready (model m has no routable worker)',
    });
    expect(await pollCondition(api({ ...st(true, null) }), 'm', 'healthy', undefined)).toEqual({ state: 'waiting', detail: 'm has no active version' });
    expect(await pollCondition(api({ ...st(true, 'v1'), ...v1('unhealthy') }), 'm', 'healthy', undefined)).toEqual({
      state: 'waiting',
      detail: 'v1 is unhealthy',
    });
    expect(await pollCondition(api({ ...st(true, 'v1'), ...v1('healthy'), ...workers(false) }), 'm', 'healthy', undefined)).toEqual({
      state: 'waiting',
      detail: 'v1 has no routable worker',
    });
    expect(await pollCondition(api({ ...st(true, 'v1'), ...v1('healthy'), ...workers(true) }), 'm', 'healthy', undefined)).toEqual({
      state: 'done',
      detail: 'v1 is active with 1 routable worker(s), health healthy',
    });
  });

  it('other API errors propagate (the runner counts them)', async () => {
    await expect(pollCondition(api({ [V]: Object.assign(new Error('invalid bearer token'), { status: 401 }) }), 'm', 'green_ready', 'v2')).rejects.toThrow(
      'invalid bearer token',
    );
  });
});
