// A worker's unexpected exit on a real control plane (in-process `glidepath up`; its workers are the
// built simulator run by the process provider, as an operator runs an engine): the health seam hears the worker turn dead (the canary's critical fail
// listens there; it used to be told nothing once the handle was gone), the dead worker is stopped
// and forgotten, and its replacement takes a new id, never the dead one's.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';
import type { WorkerHealth } from '../../../src/health/machine.js';
import type { WorkerInfo } from '../../../src/rollout/ports.js';
import { CLI, ensureBuilt } from '../../helpers/e2e-up.js';

let dir: string;
let app: App;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-worker-exit-'));
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    gpus: { count: 4, memory_gb: 80 },
    models: [
      {
        name: 'llama',
        // probes rarely: only the exit acts in this test
        health: { interval_ms: 3_600_000 },
        versions: [
          {
            id: 'v1',
            base_model: 'llama-3-8b',
            replicas: 2,
            provider: { kind: 'process', command: `${process.execPath} ${CLI} sim --host 127.0.0.1 --port {port} --model llama --seed 3` },
            warmup: { requests: 0 },
          },
        ],
        route: { weights: { v1: 1 } },
      },
    ],
  });
  app = await startGlidepath(cfg);
});

afterAll(async () => {
  await app?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Resolves with the first health change `match` accepts. */
function heard(match: (w: WorkerInfo, h: WorkerHealth) => boolean): Promise<{ w: WorkerInfo; h: WorkerHealth }> {
  return new Promise((resolve) => {
    const off = app.ports.workers.onHealth((w, h) => {
      if (!match(w, h)) return;
      off();
      resolve({ w, h });
    });
  });
}

describe("a worker's unexpected exit", () => {
  it('is heard as dead on the health seam; the dead worker is stopped and forgotten and replaced under a new id', async () => {
    const victim = app.cp.workers.handles.get('llama/v1/1');
    expect(victim?.pid).toBeTypeOf('number');
    const dead = heard((w, h) => w.id === 'llama/v1/1' && h.state === 'dead');
    const replacement = heard((w) => w.id !== 'llama/v1/0' && w.id !== 'llama/v1/1');
    process.kill(victim?.pid as number, 'SIGKILL');

    const d = await dead;
    expect(d.w).toMatchObject({ model: 'llama', version: 'v1', role: 'serving' });
    expect(d.h.lastFailure?.reason).toBe('exited');
    const r = await replacement;
    expect(r.w).toMatchObject({ id: 'llama/v1/2', role: 'serving' });
    // the replacement is asked for once the dead worker is stopped: its record and what the manager kept are gone
    expect(await app.store.getWorker('llama/v1/1')).toBeUndefined();
    expect(app.cp.workers.meta.has('llama/v1/1')).toBe(false);
  });
});
