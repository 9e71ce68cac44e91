// A control plane that dies after a version's workers are started and recorded but before the
// version is marked ready (a load hook, such as an adapter's, still running): the next boot marks the
// version failed, as it always did, and now also stops those workers and lets their records and GPUs
// go. Before, their processes ran on (kept by the launcher, their start recorded), never adopted,
// holding GPUs no one could free. Real simulator processes (the process provider); the "crash" is a control plane abandoned
// without a shutdown, the next one booted on the same store.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { buildDataPlane } from '../../../src/control/app.js';
import { ControlPlane } from '../../../src/control/plane.js';
import { Providers } from '../../../src/providers/index.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';
import { pidAlive } from '../../../src/providers/child.js';
import { CLI, cleanupAll, ensureBuilt, trackWorkerPids } from '../../helpers/e2e-up.js';

/** The built simulator run by the process provider, as an operator runs an engine. */
const engine = (seed: number) => ({ kind: 'process', command: `${process.execPath} ${CLI} sim --host 127.0.0.1 --port {port} --model m --seed ${seed}` });

const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-restart-loading-'));
afterAll(() => {
  cleanupAll();
  rmSync(dir, { recursive: true, force: true });
});

it('a version whose load a crash cut short after its workers were recorded: the next boot fails it and stops, forgets and frees its workers', async () => {
  ensureBuilt();
  const cfg = parseConfig({
    server: { data_dir: path.join(dir, 'state') },
    gpus: { count: 4, memory_gb: 80 },
    models: [
      {
        name: 'm',
        versions: [
          { id: 'v1', base_model: 'llama-3-8b', replicas: 1, provider: engine(1), warmup: { requests: 0 } },
          { id: 'v2', base_model: 'llama-3-8b', replicas: 2, provider: engine(2), warmup: { requests: 0 } },
        ],
        route: { weights: { v1: 1 } },
      },
    ],
  });
  const store = openMemoryStore();
  // the crashed process touches the store no more: once `crashed`, every call of `before` hangs
  let crashed = false;
  const hang = new Promise<never>(() => undefined);
  const beforeStore = new Proxy(store, {
    get(target, key) {
      const f: unknown = Reflect.get(target, key, target);
      return typeof f === 'function' ? (...args: unknown[]) => (crashed ? hang : (f as (...a: unknown[]) => unknown).apply(target, args)) : f;
    },
  });
  const first = buildDataPlane(cfg);
  const before = new ControlPlane(cfg, beforeStore, first.dp, new Providers());
  const second = buildDataPlane(cfg);
  const after = new ControlPlane(cfg, store, second.dp, new Providers());
  try {
    await before.boot();
    // the load's last step never ends: its workers are started, warmed and recorded, the version still loading
    let hooked: () => void = () => undefined;
    const inHook = new Promise<void>((r) => (hooked = r));
    before.loadHooks.push(() => {
      hooked();
      return new Promise<void>(() => undefined);
    });
    void before.load(await before.version('m', 'v2'), { name: 'test' }, () => undefined).catch(() => undefined);
    await inHook;
    const recorded = await store.listWorkers({ model: 'm', versionId: 'v2' });
    const pids = recorded.map((r) => r.pid);
    trackWorkerPids(pids);
    expect(recorded.map((r) => r.state)).toEqual(['ready', 'ready']);
    expect((await store.getVersion('m', 'v2'))?.status).toBe('loading');
    for (const pid of pids) expect(pidAlive(pid!)).toBe(true);

    // the crash: `before` is abandoned as it is (it writes nothing more); the next control plane boots on its store
    crashed = true;
    const said: string[] = [];
    await after.boot((m) => said.push(m));
    expect((await store.getVersion('m', 'v2'))?.status).toBe('failed');
    expect(said).toContain('m/v2: let go of 2 worker(s) of a load the restart cut short (2 still running, stopped)');
    expect(await store.listWorkers({ model: 'm', versionId: 'v2' })).toEqual([]);
    for (const pid of pids) expect(pidAlive(pid!), `v2's pid ${pid} after the boot`).toBe(false);
    // their GPUs are free: held only by v1's worker
    expect((await store.listGpuAssignments()).map((a) => `${a.model}/${a.versionId}`)).toEqual(['m/v1']);
    // and v1, whose worker was adopted, still serves
    expect(after.workers.infos('m', 'v1').length).toBe(1);
  } finally {
    await after.shutdown();
    await first.dp.close();
  }
}, 30_000);
