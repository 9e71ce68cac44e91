// Time sharing in one process (the app with in-process simulators, whose provider watches which
// engines are awake on each GPU): two engines are awake on one GPU only while a version loads; a
// swap sleeps the active version before it wakes the other; a deploy of the sleeping
// model completes (it sleeps as it loads, no deadlock on the model's lock); a swap of it is refused
// until an operator gives it the GPUs; a wake that keeps failing is tried again after a back-off, not
// in a loop, and the awake model keeps serving. Written after an adversarial review found each of
// these broken.
import { afterEach, describe, expect, it } from 'vitest';
import { chat, simVersion, startWatched, stopWatched } from '../../helpers/watched-sims.js';

afterEach(stopWatched);

const up = () =>
  startWatched({
    gpus: { count: 1, memory_gb: 80 },
    time_sharing: [{ name: 'shift', models: ['day', 'night'], min_active_ms: 500, idle_ms: 100, max_wait_ms: 5000 }],
    models: [
      { name: 'day', versions: [simVersion('v1', 1)], route: { weights: { v1: 1 } } },
      { name: 'night', versions: [simVersion('v1', 2), simVersion('v2', 3)], route: { weights: { v1: 1 } } },
    ],
  });

const op = { name: 'op' };

describe('time sharing in one process', () => {
  it('deploy of the sleeping model, a request for it, a swap refused until its turn: never two engines awake on the GPU', async () => {
    const { app: a, sims } = await up();
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('day');
    const deployed = await a.controllers.blueGreen.deploy('night', 'v2', op);
    expect(deployed.status).toBe('ready');
    expect(a.ports.workers.isAsleep('night', 'v2')).toBe(true);
    expect(await chat(a, 'day')).toBe(200);
    expect(await chat(a, 'night')).toBe(200);
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('night');
    expect(await chat(a, 'day')).toBe(200);
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('day');
    await expect(a.controllers.blueGreen.swap('night', { to: 'v2' }, op)).rejects.toMatchObject({ code: 'time_shared_asleep' });
    await a.controllers.timeShare.turn('shift', 'night', op);
    const swap = await a.controllers.blueGreen.swap('night', { to: 'v2', mode: 'drain-first' }, op);
    expect(swap.to).toBe('v2');
    expect(await chat(a, 'night')).toBe(200);
    // a version loads awake before it sleeps: its load, the one moment beside another engine (docs/multi-model.md)
    expect(sims.overlaps).toEqual(['start night/v2/0 while day/v1/0 awake']);
  }, 20_000);

  it('a wake that keeps failing is tried again after a back-off, not in a loop; the awake model keeps serving', async () => {
    const { app: a, sims } = await up();
    sims.failWake.add('night');
    const night = chat(a, 'night');
    await new Promise((r) => setTimeout(r, 2_000));
    // the first try, and after the back-off of 1 s at most one more
    expect(sims.wakes.filter((w) => w.startsWith('night')).length).toBeLessThanOrEqual(2);
    expect(await chat(a, 'day')).toBe(200);
    sims.failWake.clear();
    expect(await night).toBe(200);
    expect(a.controllers.timeShare.status()[0]?.awake).toBe('night');
    expect(sims.overlaps).toEqual([]);
  }, 20_000);
});
