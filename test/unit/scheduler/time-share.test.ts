// The time-share controller over the fake ports: one model awake and the others asleep with their
// requests held; a waiting request gets the GPUs when the awake model is idle (held, drained, asleep,
// then the other woken and released, in that order), after its turn, or at once for a higher
// priority; a wake that fails puts the other back to work; whose turn it is survives a restart; a
// version loaded while its model sleeps sleeps too; a rollout holds the turn.
import { afterEach, describe, expect, it } from 'vitest';
import { TimeShare } from '../../../src/scheduler/time-share.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const TICK = 1_000;
const sim = { provider: { kind: 'sim' } };

let running: TimeShare[] = [];
afterEach(() => {
  for (const t of running) t.shutdown();
  running = [];
});

async function start(o: { dayPriority?: string; nightPriority?: string; fleet?: FakeFleet; inProgress?: string } = {}) {
  const fleet =
    o.fleet ??
    (await FakeFleet.create({
      gpus: 1,
      timeSharing: [{ name: 'shift', models: ['day', 'night'], min_active_ms: 10_000, idle_ms: 2_000, max_wait_ms: 30_000 }],
      models: [
        { name: 'day', priority: o.dayPriority ?? 'standard', versions: [{ id: 'v1', replicas: 1, ...sim }], route: { weights: { v1: 1 } } },
        {
          name: 'night',
          priority: o.nightPriority ?? 'standard',
          versions: [
            { id: 'v1', replicas: 1, ...sim },
            { id: 'v2', replicas: 1, ...sim },
          ],
          route: { weights: { v1: 1, v2: 0 } },
        },
      ],
    }));
  const base = fleet.ports();
  const busy = o.inProgress;
  const ports = busy === undefined ? base : { ...base, rollouts: { ...base.rollouts, inProgress: () => Promise.resolve({ id: busy, kind: 'canary' }) } };
  const t = new TimeShare(ports, 60_000, TICK);
  running.push(t);
  await t.run();
  await t.whenIdle();
  const advance = (ms: number) => fleet.clock.advance(ms, () => t.whenIdle());
  /** `n` requests of `model` arrive and wait in its hold queue. */
  const arrive = async (model: string, n = 1) => {
    const h = fleet.holds.get(model);
    if (h?.onDepth === undefined) throw new Error(`${model} is not held`);
    h.onDepth(n);
    await t.whenIdle();
  };
  return { fleet, t, advance, arrive };
}

const steps = (log: string[]) => log.filter((l) => /^(hold|release|drain|undrain|sleep|wake) /.test(l));

describe('time-share controller', () => {
  it('starts with the first model awake, the other asleep and held', async () => {
    const { fleet, t } = await start();
    expect(steps(fleet.log)).toEqual(['sleep night/v1', 'hold night']);
    expect(fleet.holds.get('night')).toMatchObject({ max: 1_024, timeoutMs: 30_000, why: expect.stringContaining('asleep') as unknown });
    expect(t.status()[0]).toMatchObject({ group: 'shift', awake: 'day', switching: false, gpusSaved: 1 });
    expect(await fleet.store.getSetting('timeshare.shift')).toEqual({ awake: 'day', slept: { night: ['v1'] } });
    expect(await fleet.metricsText()).toContain('glidepath_timeshare_awake{group="shift",model="night"} 0');
  });

  it('a request for the sleeping model, the awake one idle: held, drained, asleep, then the other woken and released', async () => {
    const { fleet, t, advance, arrive } = await start();
    fleet.log.length = 0;
    await advance(2_000);
    await arrive('night', 3);
    expect(steps(fleet.log)).toEqual(['hold day', 'drain day/v1', 'sleep day/v1', 'undrain day/v1', 'wake night/v1', 'release night']);
    const s = t.status()[0];
    expect(s).toMatchObject({ awake: 'night', waiting: [] });
    expect(s?.history).toEqual([
      expect.objectContaining({ from: 'day', to: 'night', outcome: 'done', released: 3, why: expect.stringContaining('idle') as unknown }),
    ]);
    expect(fleet.events.map((e) => e.kind)).toContain('timeshare_switch');
    expect(fleet.audit).toContainEqual({ actor: 'time-share', action: 'timeshare.switch', target: 'shift', result: 'ok' });
    expect(await fleet.store.getSetting('timeshare.shift')).toEqual({ awake: 'night', slept: { day: ['v1'] } });
    expect(await fleet.metricsText()).toContain('glidepath_timeshare_switches_total{group="shift",to="night",outcome="done"} 1');
  });

  it('the awake model busy: the other waits for the end of its turn', async () => {
    const { fleet, t, advance, arrive } = await start();
    fleet.inflight.set('day', 2);
    await arrive('night');
    expect(t.status()[0]).toMatchObject({ awake: 'day', decision: { kind: 'wait', to: 'night' } });
    await advance(9_000);
    expect(t.status()[0]?.awake).toBe('day');
    await advance(1_000);
    expect(t.status()[0]).toMatchObject({
      awake: 'night',
      history: [expect.objectContaining({ why: expect.stringContaining('has had its turn') as unknown })],
    });
  });

  it('a critical model busy keeps the GPUs from a batch one until it is idle; a critical one waiting takes them at once', async () => {
    const { fleet, t, advance, arrive } = await start({ dayPriority: 'critical', nightPriority: 'batch' });
    fleet.inflight.set('day', 1);
    await arrive('night');
    await advance(40_000);
    expect(t.status()[0]?.awake).toBe('day');
    fleet.inflight.set('day', 0);
    fleet.records('day', 'v1', 1);
    await advance(2_000 + TICK);
    expect(t.status()[0]?.awake).toBe('night');
    // day's requests come: it outranks night, busy or not
    fleet.inflight.set('night', 3);
    await arrive('day');
    expect(t.status()[0]).toMatchObject({
      awake: 'day',
      history: [expect.anything(), expect.objectContaining({ why: expect.stringContaining('outranks') as unknown })],
    });
  });

  it('a wake that fails puts the model that slept back to work; the waiting one stays held', async () => {
    const { fleet, t, advance, arrive } = await start();
    fleet.failWake.set('night/v1', 'engine would not wake');
    await advance(2_000);
    fleet.log.length = 0;
    await arrive('night');
    expect(steps(fleet.log)).toEqual(['hold day', 'drain day/v1', 'sleep day/v1', 'undrain day/v1', 'wake day/v1', 'release day']);
    expect(t.status()[0]).toMatchObject({
      awake: 'day',
      history: [expect.objectContaining({ to: 'night', outcome: 'failed: engine would not wake' })],
    });
    expect(fleet.holds.has('night')).toBe(true);
    expect(fleet.events.map((e) => e.kind)).toContain('timeshare_switch_failed');
  });

  it('after a restart the model that was awake is awake again', async () => {
    const { fleet, t, advance, arrive } = await start();
    await advance(2_000);
    await arrive('night');
    t.shutdown();
    fleet.log.length = 0;
    fleet.holds.clear();
    // the new process finds night awake and day asleep, as the store says
    const again = await start({ fleet });
    expect(again.t.status()[0]?.awake).toBe('night');
    expect(steps(fleet.log)).toEqual(['hold day']);
  });

  it('a version loaded while its model sleeps sleeps too, and wakes with it', async () => {
    const { fleet, t, advance, arrive } = await start();
    const ports = fleet.ports();
    await ports.workers.load(await ports.versions.get('night', 'v2'), { name: 'op' });
    expect(fleet.asleep.has('night/v2')).toBe(true);
    await advance(2_000);
    await arrive('night');
    expect(t.status()[0]?.awake).toBe('night');
    expect([fleet.asleep.has('night/v1'), fleet.asleep.has('night/v2')]).toEqual([false, false]);
  });

  it('a rollout of the awake model holds its turn', async () => {
    const { t, advance, arrive } = await start({ inProgress: 'r-1' });
    await advance(20_000);
    await arrive('night');
    expect(t.status()[0]).toMatchObject({ awake: 'day', decision: { kind: 'stay', why: expect.stringContaining('r-1') as unknown } });
  });
});
