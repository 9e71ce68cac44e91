// The time-share controller over the fake ports: one model awake and the others asleep with their
// requests held; a waiting request gets the GPUs when the awake model is idle (held, drained, asleep,
// then the other woken and released, in that order), after its turn, or at once for a higher
// priority; a wake that fails puts the other back to work and the model is passed over for a
// back-off; whose turn it is survives a restart; a version deployed while its model sleeps sleeps
// too (no deadlock on the model's lock); a swap of a sleeping model is refused, one of the awake
// model does not end the group's hold; an operator gives a turn; a rollout holds the turn.
import { afterEach, describe, expect, it } from 'vitest';
import { BlueGreen } from '../../../src/rollout/bluegreen.js';
import type { ControllerPorts } from '../../../src/rollout/ports.js';
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
  const ports: ControllerPorts =
    busy === undefined ? base : { ...base, rollouts: { ...base.rollouts, inProgress: () => Promise.resolve({ id: busy, kind: 'canary' }) } };
  const t = new TimeShare(ports, 60_000, TICK);
  running.push(t);
  await t.run();
  await t.whenIdle();
  const advance = (ms: number) => fleet.clock.advance(ms, () => t.whenIdle());
  /** `n` requests of `model` arrive and wait in its hold queue. */
  const arrive = async (model: string, n = 1) => {
    const h = fleet.holds.get(model)?.get('time-share');
    if (h?.onDepth === undefined) throw new Error(`${model} is not held`);
    h.onDepth(n);
    await t.whenIdle();
  };
  return { fleet, t, advance, arrive, ports };
}

const steps = (log: string[]) => log.filter((l) => /^(hold|release|drain|undrain|sleep|wake) /.test(l));

describe('time-share controller', () => {
  it('starts with the first model awake, the other asleep and held', async () => {
    const { fleet, t } = await start();
    expect(steps(fleet.log)).toEqual(['hold night', 'sleep night/v1']);
    expect(fleet.holds.get('night')?.get('time-share')).toMatchObject({ max: 1_024, timeoutMs: 30_000, why: expect.stringContaining('asleep') as unknown });
    expect(t.status()[0]).toMatchObject({ group: 'shift', awake: 'day', switching: false, gpusSaved: 1 });
    expect(await fleet.store.getSetting('timeshare.shift')).toEqual({ awake: 'day' });
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
    expect(await fleet.store.getSetting('timeshare.shift')).toEqual({ awake: 'night' });
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

  it('a wake that fails puts the model that slept back to work; the waiting one stays held, passed over for a back-off that doubles', async () => {
    const { fleet, t, advance, arrive } = await start();
    fleet.failWake.set('night/v1', 'engine would not wake');
    await advance(2_000);
    fleet.log.length = 0;
    await arrive('night');
    expect(steps(fleet.log)).toEqual(['hold day', 'drain day/v1', 'sleep day/v1', 'undrain day/v1', 'wake day/v1', 'release day']);
    expect(t.status()[0]).toMatchObject({
      awake: 'day',
      history: [expect.objectContaining({ to: 'night', outcome: 'failed: engine would not wake' })],
      backingOff: [{ model: 'night', failures: 1, until: fleet.clock.now() + 1_000 }],
    });
    expect(fleet.holds.has('night')).toBe(true);
    expect(fleet.events.map((e) => e.kind)).toContain('timeshare_switch_failed');
    // not again within the second; then again, and 2 s the next time
    await advance(999);
    expect(t.status()[0]?.history).toHaveLength(1);
    await advance(1 + TICK);
    expect(t.status()[0]).toMatchObject({ history: [expect.anything(), expect.anything()], backingOff: [{ failures: 2 }] });
    // the engine wakes again: the next try succeeds and clears the back-off
    fleet.failWake.clear();
    await advance(2_000 + TICK);
    expect(t.status()[0]).toMatchObject({ awake: 'night', backingOff: [] });
  });

  it('a version deployed while its model sleeps is put to sleep as it loads, under the deploy’s lock (no deadlock)', async () => {
    const { fleet, ports } = await start();
    await new BlueGreen(ports).deploy('night', 'v2', { name: 'op' });
    expect(fleet.asleep.has('night/v2')).toBe(true);
  });

  it('a swap of the sleeping model is refused; a swap of the awake one does not end the hold of the sleeping one', async () => {
    const { fleet, ports } = await start();
    const bg = new BlueGreen(ports);
    await bg.deploy('night', 'v2', { name: 'op' });
    await expect(bg.swap('night', { to: 'v2', mode: 'drain-first' }, { name: 'op' })).rejects.toMatchObject({
      code: 'time_shared_asleep',
      message: expect.stringContaining('glidepath scheduler turn shift night') as unknown,
    });
    await expect(bg.rollback('night', { name: 'op' })).rejects.toMatchObject({ code: 'time_shared_asleep' });
    // both held at once: the swap's hold and the group's; the swap lets go of its own only
    ports.routes.hold('night');
    ports.routes.release('night');
    expect(fleet.holds.get('night')?.has('time-share')).toBe(true);
  });

  it('an operator gives a model the GPUs now, whatever the turn', async () => {
    const { fleet, t } = await start();
    fleet.inflight.set('day', 0);
    const rec = await t.turn('shift', 'night', { name: 'op' });
    expect(rec).toMatchObject({ from: 'day', to: 'night', why: 'asked by op', outcome: 'done' });
    expect(await t.turn('shift', 'night', { name: 'op' })).toBeUndefined();
    await expect(t.turn('shift', 'nope', { name: 'op' })).rejects.toMatchObject({ code: 'time_share_turn' });
    await expect(t.turn('nope', 'day', { name: 'op' })).rejects.toMatchObject({ code: 'time_share_group_not_found' });
    expect(fleet.audit).toContainEqual({ actor: 'op', action: 'timeshare.switch', target: 'shift', result: 'ok' });
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

  it('a version loaded while its model sleeps sleeps too; its turn wakes what its route serves, not a version at weight 0', async () => {
    const { fleet, t, advance, arrive } = await start();
    const ports = fleet.ports();
    await ports.workers.load(await ports.versions.get('night', 'v2'), { name: 'op' });
    expect(fleet.asleep.has('night/v2')).toBe(true);
    await advance(2_000);
    await arrive('night');
    expect(t.status()[0]?.awake).toBe('night');
    expect([fleet.asleep.has('night/v1'), fleet.asleep.has('night/v2')]).toEqual([false, true]);
  });

  it('a rollout of the awake model holds its turn', async () => {
    const { t, advance, arrive } = await start({ inProgress: 'r-1' });
    await advance(20_000);
    await arrive('night');
    expect(t.status()[0]).toMatchObject({ awake: 'day', decision: { kind: 'stay', why: expect.stringContaining('r-1') as unknown } });
  });
});
