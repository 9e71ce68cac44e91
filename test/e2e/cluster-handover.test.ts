// Cluster mode: stopping a replica (SIGTERM, as a rolling deploy of the gateways does) never takes the
// fleet with it. Two `glidepath up` replicas on one real etcd: the leader, stopped, resigns and leaves its
// workers running; the other replica leads at once (no lease to wait out), adopts the same worker
// processes, and its clients see no failure. The last replica, stopped, stops the workers: no one is left
// to adopt them.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { etcdInstalled, itWithEtcd, startEtcd, stopCluster } from '../helpers/etcd.js';
import type { EtcdServer } from '../helpers/etcd.js';
import { cleanupAll, ensureBuilt, removeDir, startUp, streamChat, tempDir, trackWorkerPids } from '../helpers/e2e-up.js';
import type { StreamResult, UpProcess, WorkerView } from '../helpers/e2e-up.js';
import { pidAlive } from '../../src/providers/child.js';

const MODEL = 'hand';
const TOKEN = 'cluster-handover-token-0123456789ab';
let etcd: EtcdServer;
let dir: string;
const replicas: UpProcess[] = [];

async function start(i: number): Promise<UpProcess> {
  const r = await startUp({ configFile: path.join(dir, 'glidepath.yaml'), dataDir: path.join(dir, `data${i}`), token: TOKEN, timeoutMs: 60_000 });
  replicas.push(r);
  return r;
}

/** Whether `r` leads: its admin API answers itself (a follower's forwarded answers name the leader). */
async function leads(r: UpProcess): Promise<boolean> {
  const res = await r.admin('GET', `/models/${MODEL}/route`).catch(() => undefined);
  return res?.status === 200 && res.headers['x-glidepath-leader'] === undefined;
}

async function until(what: string, ms: number, pred: () => Promise<boolean> | boolean): Promise<void> {
  const t0 = performance.now();
  while (!(await pred())) {
    if (performance.now() - t0 > ms) throw new Error(`not ${what} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  if (!etcdInstalled()) return;
  ensureBuilt();
  dir = tempDir('cluster-handover');
  etcd = await startEtcd();
  writeFileSync(
    path.join(dir, 'glidepath.yaml'),
    [
      `auth: { tokens: [ { name: ops, role: admin, token: ${TOKEN} } ] }`,
      `store: { kind: etcd, endpoints: ["${etcd.endpoint}"], prefix: /cluster-handover, lease_ttl_s: 5 }`,
      'gpus: { count: 4, memory_gb: 80 }',
      'models:',
      `  - name: ${MODEL}`,
      '    versions:',
      '      - { id: v1, replicas: 2, provider: { kind: sim, sim: { seed: 1, inter_token_ms: 5, jitter: 0 } } }',
      '    route: { weights: { v1: 1 } }',
      '',
    ].join('\n'),
  );
  await start(1); // leads, starts the workers
  await start(2);
}, 120_000);

afterAll(async () => {
  await stopCluster(replicas, etcd, () => {
    cleanupAll();
    if (dir) removeDir(dir);
  });
}, 60_000);

describe('cluster mode: a replica stopped', () => {
  itWithEtcd(
    'the leader stopped hands over: the other leads at once with the same worker processes, its clients see nothing; the last one stopped stops them',
    async () => {
      const [r1, r2] = replicas as [UpProcess, UpProcess];
      await until('r1 leading', 30_000, () => leads(r1));
      const before = await r2.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
      const pids = before.map((w) => w.pid as number);
      trackWorkerPids(pids);
      expect(pids).toHaveLength(2);
      let stop = false;
      const results: StreamResult[] = [];
      const load = Array.from({ length: 6 }, async (_, i) => {
        while (!stop) results.push(await streamChat(r2.dataUrl, { model: MODEL, prompt: `q${i}`, maxTokens: 8 }));
      });
      const t0 = performance.now();
      const exiting = r1.kill('SIGTERM');
      // resigned: r2 leads well before the 5 s lease of a dead leader would have run out
      await until('r2 leading', 30_000, () => leads(r2));
      const tookMs = performance.now() - t0;
      const exit = await exiting;
      replicas.splice(replicas.indexOf(r1), 1);
      expect(exit.code).toBe(0);
      expect(r1.stderr()).toContain('handed over to');
      const after = await r2.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
      stop = true;
      await Promise.all(load);
      console.log(`cluster handover: r2 leads ${tookMs.toFixed(0)} ms after r1's SIGTERM; ${results.length} streams on r2`);
      expect(tookMs).toBeLessThan(5_000);
      expect(after.map((w) => w.pid).sort()).toEqual([...pids].sort());
      expect(pids.every((p) => pidAlive(p))).toBe(true);
      expect(after.every((w) => w.state === 'ready')).toBe(true);
      expect(results.length).toBeGreaterThan(0);
      expect(results.filter((r) => !r.ok).map((r) => r.error ?? r.status)).toEqual([]);

      // the last replica: nobody left to adopt the workers, so it stops them
      const last = await r2.kill('SIGTERM');
      replicas.splice(replicas.indexOf(r2), 1);
      expect(last.code).toBe(0);
      await until('the workers stopped', 15_000, () => pids.every((p) => !pidAlive(p)));
    },
    120_000,
  );
});
