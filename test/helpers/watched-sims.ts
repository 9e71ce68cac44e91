// An App in this process over in-process simulators whose provider watches every GPU: which engines
// are awake on each (`overlaps` names every moment two were), what started, stopped and woke; an
// engine can be crashed, a wake made to fail, a version's load slowed. For time-shared GPUs' tests.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { startGlidepath } from '../../src/control/app.js';
import type { App } from '../../src/control/app.js';
import { sleepEngine, wakeEngine } from '../../src/providers/engine.js';
import { Providers } from '../../src/providers/index.js';
import type { Provider, StartRequest, WorkerExit, WorkerHandle } from '../../src/providers/types.js';
import { startSim } from '../../src/sim/index.js';

export class WatchedSims implements Provider {
  readonly kind = 'sim';
  readonly awake = new Map<string, WorkerHandle>();
  readonly overlaps: string[] = [];
  readonly starts: string[] = [];
  readonly stops: string[] = [];
  readonly wakes: string[] = [];
  /** Models whose wakes fail. */
  readonly failWake = new Set<string>();
  /** `model/version` → how long its workers take to load (the simulated engine's load, not a test's wait). */
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
      await new Promise((r) => setTimeout(r, slow));
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
    this.wakes.push(h.id);
    if (this.failWake.has(h.model)) throw new Error(`${h.id} would not wake (injected)`);
    await wakeEngine(h, '/health');
    this.markAwake(h, 'wake');
  }
}

/** Apps started by `startWatched`, and their data directories: `stopWatched` (afterEach) ends them. */
const running: { app: App | undefined; dir: string }[] = [];

/**
 * `glidepath up` in this process on `config` (glidepath.yaml's shape, without `server`), its simulators
 * watched. `dir` reuses a data directory (a restart).
 */
export async function startWatched(config: Record<string, unknown>, dir?: string): Promise<{ app: App; sims: WatchedSims; dir: string }> {
  const d = dir ?? mkdtempSync(path.join(os.tmpdir(), 'gp-watched-'));
  const sims = new WatchedSims();
  const cfg = parseConfig({ server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: d }, control: { tick_ms: 100 }, ...config });
  const app = await startGlidepath(cfg, { providers: new Providers({ sim: sims }) });
  running.push({ app, dir: d });
  return { app, sims, dir: d };
}

/** Close an app started here (before a restart on its directory); its directory stays until `stopWatched`. */
export async function closeWatched(app: App): Promise<void> {
  const r = running.find((x) => x.app === app);
  if (r !== undefined) r.app = undefined;
  await app.close();
}

export async function stopWatched(): Promise<void> {
  const dirs = new Set<string>();
  for (const r of running.splice(0)) {
    dirs.add(r.dir);
    await r.app?.close();
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

/** A simulated version: one worker (unless told), no warm-up, a wake of 20 ms. */
export function simVersion(id: string, seed: number, replicas = 1): Record<string, unknown> {
  return { id, replicas, warmup: { requests: 0 }, provider: { kind: 'sim', sim: { seed, wake_ms: 20 } } };
}

/** One chat completion; its status. */
export async function chat(a: App, model: string): Promise<number> {
  const res = await fetch(`${a.dataUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  await res.text();
  return res.status;
}
