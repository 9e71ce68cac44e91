// `time_sharing:` in glidepath.yaml: defaults and the slots derived from the members' versions, and
// every refusal with its path; a simulated version's wake times follow its size unless given.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { configIssues } from '../../helpers/config-issues.js';

const sim = (o: Record<string, unknown> = {}) => ({ id: 'v1', replicas: 2, tp: 2, gpu_memory_gb: 40, provider: { kind: 'sim' }, ...o });
const models = (b: Record<string, unknown> = {}) => [
  { name: 'a', versions: [sim()] },
  { name: 'b', priority: 'batch', versions: [sim(b)] },
  { name: 'c', versions: [sim()] },
];

const issues = configIssues;

describe('time_sharing config', () => {
  it('defaults, the group named after its members, its slots from the versions', () => {
    const c = parseConfig({ models: models(), time_sharing: [{ models: ['a', 'b'] }] });
    expect(c.timeSharing).toEqual([
      {
        name: 'a+b',
        models: ['a', 'b'],
        sleepLevel: 1,
        minActiveMs: 10_000,
        idleMs: 2_000,
        maxWaitMs: 30_000,
        maxHeld: 1_024,
        slots: 2,
        tp: 2,
        memoryGbPerGpu: 20,
      },
    ]);
    expect(parseConfig({ models: models() }).timeSharing).toEqual([]);
  });

  it('refuses unknown members, a model in two groups, one member, a quantum not below the longest wait', () => {
    const groups = [
      { name: 'g1', models: ['a', 'nope'], min_active_ms: 30_000, max_wait_ms: 30_000 },
      { name: 'g2', models: ['a', 'c'] },
    ];
    // a schema issue first (the rest is checked once the section parses)
    expect(issues({ models: models(), time_sharing: [...groups, { models: ['b'] }] })).toEqual([
      { path: 'time_sharing[2].models', message: expect.stringContaining('at least two models') as unknown },
    ]);
    expect(issues({ models: models(), time_sharing: groups })).toEqual([
      { path: 'time_sharing[0].min_active_ms', message: expect.stringContaining('must be below max_wait_ms') as unknown },
      { path: 'time_sharing[0].models[1]', message: 'no model "nope" in models' },
      { path: 'time_sharing[1].models[0]', message: 'model "a" is already time-shared in group "g1"' },
    ]);
  });

  it('refuses members whose versions cannot take turns on the same slots', () => {
    expect(issues({ models: models({ tp: 1 }), time_sharing: [{ models: ['a', 'b'] }] })).toEqual([
      { path: 'time_sharing[0]', message: 'b/v1 runs 2 worker(s) of TP 1, but a/v1 runs 2 of TP 2: they take turns on the same slots' },
    ]);
    expect(issues({ models: models({ spares: 1 }), time_sharing: [{ models: ['a', 'b'] }] })).toEqual([
      { path: 'time_sharing[0]', message: 'b/v1 has hot spares (a sleeping model keeps none)' },
    ]);
    expect(
      issues({
        models: models({ replicas: undefined, provider: { kind: 'static', endpoints: ['http://127.0.0.1:9', 'http://127.0.0.1:10'] } }),
        time_sharing: [{ models: ['a', 'b'] }],
      }),
    ).toContainEqual({ path: 'time_sharing[0]', message: expect.stringContaining('b/v1 is static') as unknown });
  });

  it("a simulated version wakes in its weights' copy from CPU memory and reloads them from storage, unless told", () => {
    const c = parseConfig({
      models: [{ name: 'a', versions: [sim({ gpu_memory_gb: 140 }), sim({ id: 'v2', provider: { kind: 'sim', sim: { wake_ms: 5, reload_ms: 7 } } })] }],
    });
    expect(c.models[0]?.versions.map((v) => (v.provider.kind === 'sim' ? [v.provider.sim.wakeMs, v.provider.sim.reloadMs] : []))).toEqual([
      [20_000, 127_273],
      [5, 7],
    ]);
  });

  it('time_shared_standby: slots named after the model; refused in a group, with a split route, or with versions that do not fit the same slots', () => {
    const c = parseConfig({ models: [{ name: 'a', time_shared_standby: true, versions: [sim(), sim({ id: 'v2' })], route: { weights: { v1: 1 } } }] });
    expect(c.sharedStandby).toEqual([expect.objectContaining({ name: 'a', models: ['a'], slots: 2, tp: 2, sleepLevel: 1 })]);
    expect(c.models[0]?.timeSharedStandby).toBe(true);
    expect(
      issues({
        models: [
          { name: 'a', time_shared_standby: true, versions: [sim(), sim({ id: 'v2', tp: 1 })], route: { weights: { v1: 90, v2: 10 } } },
          { name: 'b', time_shared_standby: true, versions: [sim()] },
          { name: 'c', versions: [sim()] },
        ],
        time_sharing: [{ models: ['b', 'c'] }],
      }),
    ).toEqual([
      {
        path: 'models[0].route',
        message: 'model a shares its GPUs: its route serves one version (no split, no shadow, no override), two cannot be awake at once',
      },
      { path: 'models[0].time_shared_standby', message: 'a/v2 runs 2 worker(s) of TP 1, but a/v1 runs 2 of TP 2: they take turns on the same slots' },
      { path: 'models[1].time_shared_standby', message: 'model b is time-shared in group b+c: its standby cannot also take turns on its GPUs' },
    ]);
  });

  it('refuses a group whose switch would not fit in max_wait after a turn, and a member whose route splits', () => {
    // 40 GB a replica (TP 2 × 20 GB) at level 2: 40 / 1.1 GB/s ≈ 36.4 s
    expect(issues({ models: models(), time_sharing: [{ models: ['a', 'b'], sleep_level: 2 }] })).toEqual([
      {
        path: 'time_sharing[0].max_wait_ms',
        message:
          "a switch is expected to take ~36364 ms (40 GB at sleep level 2): min_active_ms (10000) plus that must be below max_wait_ms (30000), or a waiting model's requests time out before their turn",
      },
    ]);
    const split: Record<string, unknown>[] = models();
    split[0] = { name: 'a', versions: [sim(), sim({ id: 'v2' })], route: { weights: { v1: 90, v2: 10 } } };
    expect(issues({ models: split, time_sharing: [{ models: ['a', 'b'] }] })).toEqual([
      {
        path: 'time_sharing[0].models[0]',
        message: 'model a shares its GPUs: its route serves one version (no split, no shadow, no override), two cannot be awake at once',
      },
    ]);
  });
});
