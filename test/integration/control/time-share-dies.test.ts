// Time-shared GPUs when engines die, in one process with in-process simulators whose provider
// watches every GPU (found by a second adversarial review): a rollback to a standby whose worker died
// asleep is refused and the active version keeps serving, also after a restart; a sleeping standby's
// or member's dead worker is replaced asleep and kept; a switch to a member whose deploy is loading
// waits for it with the awake model still serving.
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
import { until } from '../../helpers/gateway.js';

class WatchedSims implements Provider {
  readonly kind = 'sim';
  readonly awake = new Map<string, WorkerHandle>();
  readonly overlaps: string[] = [];
  readonly starts: string[] = [];
  readonly stops: string[] = [];
  /** version key (model/id) → extra load time, ms */
  readonly slowLoad = new Map<string, number>();
  /** Loads under way that `slowLoad` slows. */
  slowLoading = 0;
  private readonly closers = new Map<string, (e: WorkerExit) => Promise<void>>();

  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    const s = v.provider.kind === 'sim' ? v.provider.sim : {};
    const slow = this.slowLoad.get(`${v.model}/${v.id}`);
    if (slow !== undefined) {
      this.slowLoading++;
      await new Promise((r) => setTimeout(r, slow)); // a long load (the simulated engine's, not a test's wait)
      this.slowLoading--;
    }
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
    this.closers.set(h.id, async (e) => {
      await sim.close();
      exit(e);
    });
    this.starts.push(h.id);
    this.markAwake(h, 'start');
    return h;
  }

  private markAwake(h: WorkerHandle, why: string): void {
    for (const o of this.awake.values()) if (o.id !== h.id && o.gpus.some((g) => h.gpus.includes(g))) this.overlaps.push(`${why} ${h.id} while ${o.id} awake`);
    this.awake.set(h.id, h);
  }

  /** The engine dies on its own (OOM, a crash). */
  async crash(id: string): Promise<void> {
    this.awake.delete(id);
    await this.closers.get(id)?.({ code: 1, signal: null, expected: false });
  }

  async stop(h: WorkerHandle): Promise<void> {
    this.stops.push(h.id);
    this.awake.delete(h.id);
    await this.closers.get(h.id)?.({ code: 0, signal: null, expected: true });
  }

  async sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    await sleepEngine(h, level);
    this.awake.delete(h.id);
  }

  async wake(h: WorkerHandle): Promise<void> {
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

async function up(opts: { health?: boolean; replicas?: number; sameDir?: boolean } = {}): Promise<{ app: App; sims: WatchedSims }> {
  if (opts.sameDir !== true) dir = mkdtempSync(path.join(os.tmpdir(), 'gp-ts-dies-'));
  const sims = new WatchedSims();
  const replicas = opts.replicas ?? 1;
  const v = (id: string, seed: number) => ({ id, replicas, warmup: { requests: 0 }, provider: { kind: 'sim', sim: { seed, wake_ms: 20 } } });
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: dir },
    gpus: { count: replicas, memory_gb: 80 },
    control: { tick_ms: 100 },
    models: [
      {
        name: 'm',
        time_shared_standby: true,
        versions: [v('v1', 1), v('v2', 2)],
        route: { weights: { v1: 1 } },
        health: opts.health === false ? { enabled: false } : { interval_ms: 100, replace: true },
      },
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

describe('a time-shared standby whose engines die', () => {
  it('a rollback to a standby whose only worker died asleep is refused: the active version keeps serving, after a restart too', async () => {
    const { app: a, sims } = await up({ health: false });
    await a.controllers.blueGreen.deploy('m', 'v2', op);
    await a.controllers.blueGreen.swap('m', {}, op); // v2 active, v1 standby asleep
    expect(await chat(a, 'm')).toBe(200);
    await sims.crash('m/v1/0'); // the sleeping standby's engine dies
    await until(() => a.ports.workers.list('m', 'v1').length === 0, 'the standby gone');
    await expect(a.controllers.blueGreen.rollback('m', op, 'test')).rejects.toMatchObject({ code: 'no_serving_worker' });
    expect(await chat(a, 'm')).toBe(200);
    expect((await a.ports.versions.active('m'))?.id).toBe('v2');
    // and after a restart: the version the route serves is the awake one
    await a.close();
    app = undefined;
    const again = await up({ health: false, sameDir: true });
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

async function upGroup(nightVersions = 1): Promise<{ app: App; sims: WatchedSims }> {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-ts-dies-g-'));
  const sims = new WatchedSims();
  const v = (id: string, seed: number) => ({ id, replicas: 1, warmup: { requests: 0 }, provider: { kind: 'sim', sim: { seed, wake_ms: 20 } } });
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: dir },
    gpus: { count: 1, memory_gb: 80 },
    control: { tick_ms: 100 },
    time_sharing: [{ name: 'shift', models: ['day', 'night'], min_active_ms: 500, idle_ms: 100, max_wait_ms: 3000 }],
    models: [
      { name: 'day', versions: [v('v1', 1)], route: { weights: { v1: 1 } }, health: { interval_ms: 100 } },
      { name: 'night', versions: nightVersions === 1 ? [v('v1', 2)] : [v('v1', 2), v('v2', 3)], route: { weights: { v1: 1 } }, health: { interval_ms: 100 } },
    ],
  });
  app = await startGlidepath(cfg, { providers: new Providers({ sim: sims }) });
  return { app, sims };
}

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
