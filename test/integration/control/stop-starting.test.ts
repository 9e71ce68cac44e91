// A control plane told to stop while a worker starts: the running workers are stopped at once, not
// after the start finishes (a real engine's warm-up may take minutes), and the starting worker's
// warm-up is cut short and the worker stopped, its start failing as `worker_start_cancelled`. A stop
// that leaves the running workers for the next control plane (`--keep-workers`, a cluster leader
// handing over) cancels the start all the same: the next one would never adopt it.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { buildDataPlane } from '../../../src/control/app.js';
import { ControlPlane } from '../../../src/control/plane.js';
import { newHealth } from '../../../src/health/machine.js';
import { Providers } from '../../../src/providers/index.js';
import type { Provider, StartRequest, WorkerExit, WorkerHandle } from '../../../src/providers/types.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-stop-starting-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A booted control plane of two workers on one engine, and a replacement started whose warm-up the
 * engine holds unanswered (a cold engine): `stop` runs once the warm-up is at the engine.
 */
async function withHeldStart(stop: (cp: ControlPlane) => Promise<void>): Promise<{ stops: string[]; replacement: string | undefined; left: string[] }> {
  // one engine for every worker: it answers warm-ups at once until `hold` is set, then never
  let hold = false;
  let held: () => void = () => undefined;
  const heldNow = new Promise<void>((r) => (held = r));
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (hold) return held(); // left unanswered
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  const stops: string[] = [];
  const ends = new Map<string, (e: WorkerExit) => void>();
  const fake: Provider = {
    kind: 'sim',
    start(req: StartRequest): Promise<WorkerHandle> {
      const exited = new Promise<WorkerExit>((r) => ends.set(req.workerId, r));
      const { model, id } = req.version;
      return Promise.resolve({ id: req.workerId, model, version: id, url, provider: 'sim', gpus: req.gpus, pid: undefined, exited, info: {} });
    },
    stop(h: WorkerHandle): Promise<void> {
      stops.push(h.id);
      ends.get(h.id)?.({ code: 0, signal: null, expected: true });
      return Promise.resolve();
    },
    sleep: () => Promise.resolve(),
    wake: () => Promise.resolve(),
  };
  const cfg = parseConfig({
    server: { data_dir: path.join(dir, 'state') },
    gpus: { count: 4, memory_gb: 80 },
    models: [{ name: 'm', versions: [{ id: 'v1', replicas: 1, provider: { kind: 'sim' }, warmup: { requests: 1 } }], route: { weights: { v1: 1 } } }],
  });
  const { dp } = buildDataPlane(cfg);
  const cp = new ControlPlane(cfg, openMemoryStore(), dp, new Providers({ sim: fake }));
  try {
    await cp.boot();
    hold = true;
    const v = await cp.versionConfig('m', 'v1');
    const replacement = cp.workers.startWorker(v, 'serving', newHealth('pending', Date.now())).then(
      () => 'started',
      (e: { code?: string }) => e.code,
    );
    await heldNow; // its warm-up request is at the engine, unanswered
    await stop(cp);
    return { stops: stops.sort(), replacement: await replacement, left: cp.workers.infos('m', 'v1').map((w) => w.id) };
  } finally {
    await dp.close();
    srv.closeAllConnections();
    srv.close();
  }
}

it('stopAll stops the running workers while a start is warming up, and cancels that warm-up', async () => {
  const r = await withHeldStart((cp) => cp.workers.stopAll(500));
  expect(r).toEqual({ stops: ['m/v1/0', 'm/v1/1'], replacement: 'worker_start_cancelled', left: [] });
});

it('a stop that keeps the workers running (--keep-workers, a handover) still cancels the start in flight and stops its worker', async () => {
  // before, shutdown(false) left the start going: it warmed and recorded a worker the next plane had not adopted
  const r = await withHeldStart((cp) => cp.shutdown(false));
  // the running worker is left for the next control plane
  expect(r).toEqual({ stops: ['m/v1/1'], replacement: 'worker_start_cancelled', left: ['m/v1/0'] });
});
