// Time-shared GPUs when engines die, in one process with in-process simulators whose provider
// watches every GPU (found by a second adversarial review): a rollback to a standby whose worker died
// asleep is refused and the active version keeps serving, also after a restart; a sleeping standby's
// or member's dead worker is replaced asleep and kept; a switch to a member whose deploy is loading
// waits for it with the awake model still serving.
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../../helpers/gateway.js';
import { chat, closeWatched, simVersion, startWatched, stopWatched } from '../../helpers/watched-sims.js';

afterEach(stopWatched);

/** A model whose standby sleeps on its active version's GPU (`dir`: a restart on the same store). */
const up = (opts: { health: boolean }, dir?: string) =>
  startWatched(
    {
      gpus: { count: 1, memory_gb: 80 },
      models: [
        {
          name: 'm',
          time_shared_standby: true,
          versions: [simVersion('v1', 1), simVersion('v2', 2)],
          route: { weights: { v1: 1 } },
          health: opts.health ? { interval_ms: 100, replace: true } : { enabled: false },
        },
      ],
    },
    dir,
  );

const op = { name: 'op' };

describe('a time-shared standby whose engines die', () => {
  it('a rollback to a standby whose only worker died asleep is refused: the active version keeps serving, after a restart too', async () => {
    const { app: a, sims, dir } = await up({ health: false });
    await a.controllers.blueGreen.deploy('m', 'v2', op);
    await a.controllers.blueGreen.swap('m', {}, op); // v2 active, v1 standby asleep
    expect(await chat(a, 'm')).toBe(200);
    await sims.crash('m/v1/0'); // the sleeping standby's engine dies
    await until(() => a.ports.workers.list('m', 'v1').length === 0, 'the standby gone');
    await expect(a.controllers.blueGreen.rollback('m', op, 'test')).rejects.toMatchObject({ code: 'no_serving_worker' });
    expect(await chat(a, 'm')).toBe(200);
    expect((await a.ports.versions.active('m'))?.id).toBe('v2');
    // and after a restart: the version the route serves is the awake one
    await closeWatched(a);
    const again = await up({ health: false }, dir);
    expect(await chat(again.app, 'm')).toBe(200);
    expect(again.app.ports.workers.isAsleep('m', 'v2')).toBe(false);
  }, 20_000);

  it('a sleeping standby whose worker died gets one replacement, asleep, and keeps it', async () => {
    const { app: a, sims } = await up({ health: true });
    await a.controllers.blueGreen.deploy('m', 'v2', op); // v2 ready, asleep on v1's GPU
    expect(a.ports.workers.isAsleep('m', 'v2')).toBe(true);
    const before = sims.starts.length;
    await sims.crash('m/v2/0');
    await until(() => a.ports.workers.list('m', 'v2').some((w) => w.id !== 'm/v2/0') && a.ports.workers.isAsleep('m', 'v2'), 'an asleep replacement', 10_000);
    expect(sims.starts.slice(before).filter((s) => s.startsWith('m/v2/'))).toEqual(['m/v2/1']);
    expect(sims.stops.filter((s) => s.startsWith('m/v2/'))).toEqual([]);
    // and the swap to it works
    await a.controllers.blueGreen.swap('m', {}, op);
    expect(await chat(a, 'm')).toBe(200);
  }, 20_000);
});

/** day and night time-sharing one GPU, health on (night with a second version when asked). */
const upGroup = (nightVersions = 1) =>
  startWatched({
    gpus: { count: 1, memory_gb: 80 },
    time_sharing: [{ name: 'shift', models: ['day', 'night'], min_active_ms: 500, idle_ms: 100, max_wait_ms: 3000 }],
    models: [
      { name: 'day', versions: [simVersion('v1', 1)], route: { weights: { v1: 1 } }, health: { interval_ms: 100 } },
      {
        name: 'night',
        versions: nightVersions === 1 ? [simVersion('v1', 2)] : [simVersion('v1', 2), simVersion('v2', 3)],
        route: { weights: { v1: 1 } },
        health: { interval_ms: 100 },
      },
    ],
  });

describe('a time-share group whose engines die', () => {
  it('a sleeping member whose engine died is replaced asleep: its requests are served at its turn', async () => {
    const { app: a, sims } = await upGroup();
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('day');
    await sims.crash('night/v1/0');
    await until(
      () => a.ports.workers.list('night').some((w) => w.id !== 'night/v1/0') && a.ports.workers.isAsleep('night', 'v1'),
      'an asleep replacement',
      10_000,
    );
    expect(await chat(a, 'night')).toBe(200);
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('night');
  }, 30_000);
});

describe('a switch and a deploy of the model it wakes', () => {
  it('a switch to a member whose deploy is loading waits for it; the awake model serves meanwhile', async () => {
    const { app: a, sims } = await upGroup(2);
    sims.slowLoad.set('night/v2', 1_500);
    const deploy = a.controllers.blueGreen.deploy('night', 'v2', op);
    await until(() => sims.slowLoading > 0, 'the deploy loading');
    const night = chat(a, 'night'); // day is idle: the GPUs go to night once its deploy is done
    await until(() => a.controllers.timeShare.status()[0]?.switching === true, 'the switch under way');
    const d0 = Date.now();
    expect(await chat(a, 'day')).toBe(200);
    expect(Date.now() - d0).toBeLessThan(1_500);
    await deploy;
    expect(await night).toBe(200);
    expect(sims.overlaps).toEqual(['start night/v2/0 while day/v1/0 awake']);
  }, 30_000);
});
