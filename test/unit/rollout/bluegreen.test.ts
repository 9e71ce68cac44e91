// Blue-green over the fake ports: deploy green at weight 0, swap (overlap, drain-first with a hold,
// a sleeping standby), instant rollback waking the standby first, retire; with the standby
// time-shared on the active version's GPUs, green asleep once loaded and every swap and rollback
// a sleep then a wake with the requests held; canaries, experiments, rolling updates refused there.
import { describe, expect, it } from 'vitest';
import { BlueGreen } from '../../../src/rollout/bluegreen.js';
import { CanaryController } from '../../../src/rollout/canary-controller.js';
import { ExperimentController } from '../../../src/rollout/experiment-controller.js';
import { RollingController } from '../../../src/rollout/rolling-controller.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const M = 'llama';
const OPS = { name: 'ops' };

async function world(): Promise<{ f: FakeFleet; bg: BlueGreen }> {
  const f = await FakeFleet.create({ models: [{ name: M, versions: [{ id: 'v1' }, { id: 'v2' }, { id: 'v3' }], route: { weights: { v1: 1 } } }] });
  return { f, bg: new BlueGreen(f.ports()) };
}

describe('BlueGreen (fake ports)', () => {
  it('deploy keeps the route in force and adds green at weight 0; swap overlap makes it active', async () => {
    const { f, bg } = await world();
    const v = await bg.deploy(M, 'v2', OPS);
    expect(v.status).toBe('ready');
    expect(f.weights(M)).toEqual({ v1: 1, v2: 0 });
    await expect(bg.deploy(M, 'v2', OPS)).rejects.toMatchObject({ code: 'already_loaded' });
    const r = await bg.swap(M, {}, OPS);
    expect(r).toMatchObject({ from: 'v1', to: 'v2', mode: 'overlap', standby: 'warm' });
    expect(f.weights(M)).toEqual({ v2: 1, v1: 0 });
    expect((await f.ports().versions.standby(M))?.id).toBe('v1');
  });

  it('drain-first holds new requests while blue drains, then releases them', async () => {
    const { f, bg } = await world();
    await bg.deploy(M, 'v2', OPS);
    f.log.length = 0;
    const r = await bg.swap(M, { mode: 'drain-first' }, OPS);
    expect(f.log).toEqual(['hold llama', 'publish llama v1=0,v2=1', 'drain llama/v1', 'undrain llama/v1', 'release llama']);
    expect(r.drain).toEqual({ drained: 0, aborted: 0, elapsed_ms: 0 });
  });

  it('a sleeping standby is woken before the rollback switch; the workers port keeps the sleep state', async () => {
    const { f, bg } = await world();
    await bg.deploy(M, 'v2', OPS);
    f.clock.t += 1;
    await bg.swap(M, { standby: 'sleep' }, OPS);
    expect(f.asleep.get('llama/v1')).toBe(1);
    f.log.length = 0;
    const r = await bg.rollback(M, OPS, 'bad');
    expect(r).toMatchObject({ rolled_back_to: 'v1', rolled_back_from: 'v2', method: 'wake_then_route_switch' });
    expect(f.log).toEqual(['wake llama/v1', 'publish llama v2=0,v1=1']);
    expect(f.asleep.size).toBe(0);
    // v2 was judged bad: not a rollback target any more
    await expect(bg.rollback(M, OPS)).rejects.toMatchObject({ status: 409 });
  });

  it('retire refuses the active version and the standby without force; frees a ready one', async () => {
    const { f, bg } = await world();
    await bg.deploy(M, 'v2', OPS);
    await bg.swap(M, {}, OPS);
    await expect(bg.retire(M, 'v2', {}, OPS)).rejects.toMatchObject({ code: 'retire_active' });
    await expect(bg.retire(M, 'v1', {}, OPS)).rejects.toMatchObject({ code: 'retire_standby' });
    await bg.deploy(M, 'v3', OPS);
    const r = await bg.retire(M, 'v3', {}, OPS);
    expect(r).toMatchObject({ model: M, version: 'v3', freed_gpus: 1 });
    expect(f.weights(M)).toEqual({ v2: 1, v1: 0 });
    expect(f.loaded.has('llama/v3')).toBe(false);
    expect(f.audit.map((a) => `${a.action} ${a.result}`)).toEqual([
      'deploy_green ok',
      'swap ok',
      'retire error',
      'retire error',
      'deploy_green ok',
      'retire ok',
    ]);
  });

  describe('time-shared standby', () => {
    async function shared(): Promise<{ f: FakeFleet; bg: BlueGreen }> {
      const f = await FakeFleet.create({
        models: [
          {
            name: M,
            time_shared_standby: true,
            versions: [
              { id: 'v1', provider: { kind: 'sim' } },
              { id: 'v2', provider: { kind: 'sim' } },
            ],
            route: { weights: { v1: 1 } },
          },
        ],
      });
      return { f, bg: new BlueGreen(f.ports()) };
    }

    it('green sleeps once loaded; a swap holds, drains and sleeps blue, wakes green, routes, releases; a rollback the same back', async () => {
      const { f, bg } = await shared();
      await bg.deploy(M, 'v2', OPS);
      expect(f.asleep.get('llama/v2')).toBe(1);
      f.log.length = 0;
      const r = await bg.swap(M, {}, OPS);
      expect(f.log).toEqual([
        'hold llama',
        'drain llama/v1',
        'sleep llama/v1',
        'undrain llama/v1',
        'wake llama/v2',
        'publish llama v1=0,v2=1',
        'release llama',
      ]);
      expect(r).toMatchObject({ from: 'v1', to: 'v2', mode: 'drain-first', standby: 'sleep' });
      expect(r).toHaveProperty('wake_ms', expect.any(Number));
      expect([...f.asleep.keys()]).toEqual(['llama/v1']);
      f.log.length = 0;
      f.clock.t += 1;
      const back = await bg.rollback(M, OPS, 'bad');
      expect(back).toMatchObject({ rolled_back_to: 'v1', rolled_back_from: 'v2', method: 'sleep_wake_route_switch' });
      expect(f.log).toEqual([
        'hold llama',
        'drain llama/v2',
        'sleep llama/v2',
        'undrain llama/v2',
        'wake llama/v1',
        'publish llama v2=0,v1=1',
        'release llama',
      ]);
      expect([...f.asleep.keys()]).toEqual(['llama/v2']);
    });

    it('a wake that fails wakes the one that slept again; the route never left it', async () => {
      const { f, bg } = await shared();
      await bg.deploy(M, 'v2', OPS);
      f.failWake.set('llama/v2', 'no memory');
      f.log.length = 0;
      await expect(bg.swap(M, {}, OPS)).rejects.toMatchObject({ code: 'engine_refused' });
      expect(f.log).toEqual(['hold llama', 'drain llama/v1', 'sleep llama/v1', 'undrain llama/v1', 'sleep llama/v2', 'wake llama/v1', 'release llama']);
      expect(f.weights(M)).toEqual({ v1: 1, v2: 0 });
      expect((await f.ports().versions.active(M))?.id).toBe('v1');
    });

    it('a standby whose workers died asleep is not swapped in: the active version keeps serving', async () => {
      const { f, bg } = await shared();
      await bg.deploy(M, 'v2', OPS);
      for (const w of f.workers.values()) if (w.version === 'v2') w.alive = false;
      f.log.length = 0;
      await expect(bg.swap(M, {}, OPS)).rejects.toMatchObject({ code: 'no_serving_worker' });
      expect(f.log).toEqual([]);
    });

    it('refuses a canary, an experiment and a rolling update: two versions cannot be awake there', async () => {
      const { f, bg } = await shared();
      await bg.deploy(M, 'v2', OPS);
      const ports = f.ports();
      await expect(new CanaryController(ports, { tickMs: 1000 }).start(M, { version: 'v2' }, OPS)).rejects.toMatchObject({ code: 'time_shared_standby' });
      await expect(new ExperimentController(ports).create(M, { a: 'v1', b: 'v2', metric: 'ttft' }, OPS)).rejects.toMatchObject({ code: 'time_shared_standby' });
      await expect(new RollingController(ports, { tickMs: 1000 }).start(M, { to: 'v2' }, OPS)).rejects.toMatchObject({ code: 'time_shared_standby' });
    });
  });
});
