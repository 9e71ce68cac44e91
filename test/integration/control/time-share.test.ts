// Time sharing in one process (the app with in-process simulators, whose provider watches which
// engines are awake on each GPU): two engines are awake on one GPU only while a version loads; a
// swap sleeps the active version before it wakes the other; a deploy of the sleeping
// model completes (it sleeps as it loads, no deadlock on the model's lock); a swap of it is refused
// until an operator gives it the GPUs; a wake that keeps failing is tried again after a back-off, not
// in a loop, and the awake model keeps serving. Written after an adversarial review found each of
// these broken.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';
import { sleepEngine, wakeEngine } from '../../../src/providers/engine.js';
import { Providers } from '../../../src/providers/index.js';
import type { Provider, StartRequest, WorkerExit, WorkerHandle } from '../../../src/providers/types.js';
import { startSim } from '../../../src/sim/index.js';

/** Simulators in this process; `overlaps` names every moment two engines were awake on one GPU. */
class WatchedSims implements Provider {
  readonly kind = 'sim';
  readonly awake = new Map<string, WorkerHandle>();
  readonly overlaps: string[] = [];
  readonly wakes: string[] = [];
  /** Models whose wakes fail. */
  readonly failWake = new Set<string>();
  private readonly closers = new Map<string, () => Promise<void>>();

  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    const s = v.provider.kind === 'sim' ? v.provider.sim : {};
    const sim = await startSim({ port: 0, model: v.model, version: v.id, seed: s.seed, interTokenMs: 2, jitter: 0, wakeMs: s.wakeMs });
    let exit!: (e: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((r) => (exit = r));
    const h: WorkerHandle = {
      id: req.workerId,
      model: v.model,
      version: v.id,
      url: sim.url,
      provider: 'sim',
      gpus: req.gpus,
      pid: undefined,
      exited,
      info: {},
    };
    this.closers.set(h.id, async () => {
      await sim.close();
      exit({ code: 0, signal: null, expected: true });
    });
    this.markAwake(h, 'start');
    return h;
  }

  private markAwake(h: WorkerHandle, why: string): void {
    for (const o of this.awake.values()) if (o.id !== h.id && o.gpus.some((g) => h.gpus.includes(g))) this.overlaps.push(`${why} ${h.id} while ${o.id} awake`);
    this.awake.set(h.id, h);
  }

  async stop(h: WorkerHandle): Promise<void> {
    this.awake.delete(h.id);
    await this.closers.get(h.id)?.();
  }

  async sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    await sleepEngine(h, level);
    this.awake.delete(h.id);
  }

  async wake(h: WorkerHandle): Promise<void> {
    this.wakes.push(h.id);
    if (this.failWake.has(h.model)) throw new Error(`${h.id} would not wake (injected)`);
    await wakeEngine(h, '/health');
    this.markAwake(h, 'wake');
  }
}

let app: App | undefined;
let dir = '';
afterEach(async () => {
  await app?.close();
  app = undefined;
  rmSync(dir, { recursive: true, force: true });
});

async function up(): Promise<{ app: App; sims: WatchedSims }> {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-time-share-'));
  const sims = new WatchedSims();
  const v = (id: string, seed: number) => ({ id, replicas: 1, warmup: { requests: 0 }, provider: { kind: 'sim', sim: { seed, wake_ms: 20 } } });
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: dir },
    gpus: { count: 1, memory_gb: 80 },
    control: { tick_ms: 100 },
    time_sharing: [{ name: 'shift', models: ['day', 'night'], min_active_ms: 500, idle_ms: 100, max_wait_ms: 5000 }],
    models: [
      { name: 'day', versions: [v('v1', 1)], route: { weights: { v1: 1 } } },
      { name: 'night', versions: [v('v1', 2), v('v2', 3)], route: { weights: { v1: 1 } } },
    ],
  });
  app = await startGlidepath(cfg, { providers: new Providers({ sim: sims }) });
  return { app, sims };
}

async function chat(a: App, model: string): Promise<number> {
  const res = await fetch(`${a.dataUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  await res.text();
  return res.status;
}

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
