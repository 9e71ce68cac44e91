// Cluster mode: a rolling update survives kill -9 of its leader at three seeded random points. Three
// `glidepath up` replicas on one real etcd; the update (v1 → v2, four workers, v2 slow to load) is
// started on a follower; each time, the replica that leads is killed, another takes over within the
// lease, adopts the workers and carries the update on from the store, and a new replica joins. It ends
// with v2's four workers, every step within its budgets and numbered once, and no client request
// failed (the load goes to a replica that is not about to be killed).
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { etcdInstalled, itWithEtcd, seededDelays, startEtcd, stopCluster } from '../helpers/etcd.js';
import type { EtcdServer } from '../helpers/etcd.js';
import { cleanupAll, ensureBuilt, removeDir, startUp, streamChat, tempDir, trackWorkerPids } from '../helpers/e2e-up.js';
import type { StreamResult, UpProcess, WorkerView } from '../helpers/e2e-up.js';
import { checkTrace, over, rollingYaml } from '../helpers/e2e-rolling.js';
import type { RollingView } from '../../src/api/types.js';

const MODEL = 'croll';
const TOKEN = 'cluster-rolling-token-0123456789ab';
let etcd: EtcdServer;
let dir: string;
let n = 0;
const replicas: UpProcess[] = [];

async function start(): Promise<UpProcess> {
  n++;
  const r = await startUp({ configFile: path.join(dir, 'glidepath.yaml'), dataDir: path.join(dir, `data${n}`), token: TOKEN, timeoutMs: 60_000 });
  replicas.push(r);
  return r;
}

/** The replica that leads, as `via`'s forwarding says (undefined while none does). */
async function leader(via: UpProcess): Promise<UpProcess | undefined> {
  const res = await via.admin('GET', `/models/${MODEL}/route`).catch(() => undefined);
  if (res?.status !== 200) return undefined;
  const url = String(res.headers['x-glidepath-leader'] ?? via.adminUrl);
  return replicas.find((r) => r.adminUrl === url);
}

/** The update as `via` sees it, waiting out an election. */
async function rolling(via: UpProcess): Promise<RollingView> {
  const t0 = Date.now();
  for (;;) {
    const res = await via.admin<RollingView>('GET', `/models/${MODEL}/rolling`);
    if (res.status === 200) return res.body;
    if (Date.now() - t0 > 30_000) throw new Error(`GET rolling answered ${res.status}: ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  if (!etcdInstalled()) return;
  ensureBuilt();
  dir = tempDir('cluster-rolling');
  etcd = await startEtcd();
  const yaml = [
    rollingYaml(path.join(dir, 'unused'), { model: MODEL, v2LoadMs: 400 }),
    `auth: { tokens: [ { name: ops, role: admin, token: ${TOKEN} } ] }`,
    `store: { kind: etcd, endpoints: ["${etcd.endpoint}"], prefix: /cluster-rolling, lease_ttl_s: 2 }`,
    '',
  ].join('\n');
  writeFileSync(path.join(dir, 'glidepath.yaml'), yaml);
  await start(); // leads, loads v1
  await start();
  await start();
}, 120_000);

afterAll(async () => {
  await stopCluster(replicas, etcd, () => {
    cleanupAll();
    if (dir) removeDir(dir);
  });
}, 60_000);

describe('cluster mode: a rolling update and its leader killed', () => {
  itWithEtcd(
    'three kills of the leader at seeded random points: each new leader carries the update on from the store; v2 ends with its 4 workers',
    async () => {
      let lead = (await leader(replicas[1] as UpProcess)) as UpProcess;
      /** Where the load goes: a replica that is not the one about to be killed. */
      let safe = replicas.find((r) => r !== lead) as UpProcess;
      await safe.ok('POST', `/models/${MODEL}/rolling`, { to: 'v2' });
      let stop = false;
      const results: StreamResult[] = [];
      const load = Array.from({ length: 6 }, async (_, i) => {
        while (!stop) results.push(await streamChat(safe.dataUrl, { model: MODEL, prompt: `q${i}`, maxTokens: 8 }));
      });
      const kills: string[] = [];
      for (const ms of seededDelays(20261127, 3, 300, 1_500)) {
        await new Promise((r) => setTimeout(r, ms));
        const before = await rolling(safe);
        if (over(before)) break;
        trackWorkerPids((await safe.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`)).map((w) => w.pid));
        await lead.kill('SIGKILL');
        replicas.splice(replicas.indexOf(lead), 1);
        const joined = await start();
        // another replica takes over; the load moves off it if it is the next to be killed
        const t0 = Date.now();
        let next: UpProcess | undefined;
        while (next === undefined || next === lead) {
          next = await leader(safe);
          if (Date.now() - t0 > 30_000) throw new Error('no new leader within 30 s');
          if (next === undefined || next === lead) await new Promise((r) => setTimeout(r, 100));
        }
        lead = next;
        if (safe === lead) safe = joined;
        const after = await rolling(safe);
        kills.push(`after ${ms} ms at step ${before.step} (${before.phase}) → step ${after.step} (${after.phase}) on the new leader`);
      }
      const t0 = Date.now();
      let v = await rolling(safe);
      while (!over(v)) {
        if (Date.now() - t0 > 120_000) throw new Error(`the update is ${v.phase} at step ${v.step} after 120 s`);
        await new Promise((r) => setTimeout(r, 200));
        v = await rolling(safe);
      }
      stop = true;
      await Promise.all(load);
      console.log(`cluster rolling: ${kills.join('; ')}\n${checkTrace(v).join('\n')}`);
      expect(v.phase).toBe('succeeded');
      expect(kills.length).toBeGreaterThanOrEqual(1);
      // each step numbered once across the leaders
      const steps = v.trace.map((t) => t.step);
      expect(new Set(steps).size).toBe(steps.length);
      const ws = await safe.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
      expect(ws.map((w) => w.version)).toEqual(['v2', 'v2', 'v2', 'v2']);
      expect(new Set(ws.map((w) => w.id)).size).toBe(4);
      const events = await safe.ok<{ kind: string }[]>('GET', `/models/${MODEL}/rolling/events`);
      expect(events.filter((e) => e.kind === 'resumed')).toHaveLength(kills.length);
      expect(results.filter((r) => !r.ok).map((r) => r.error ?? r.status)).toEqual([]);
    },
    300_000,
  );
});
