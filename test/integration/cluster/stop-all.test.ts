// Cluster mode (docs/cluster.md, "Stopping a replica"): every replica stopped at once (a deployment
// deleted, `docker compose down`, a node pool drained) — the leader sees no other replica take over and
// stops the workers; none is orphaned (each replica counting the others still standing once left them all).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { afterAll, describe, expect } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startReplica } from '../../../src/control/cluster.js';
import type { Replica } from '../../../src/control/cluster.js';
import { pidAlive } from '../../../src/providers/child.js';
import { itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';

let etcd: EtcdServer | undefined;
const dirs: string[] = [];
const pids: number[] = [];

afterAll(async () => {
  for (const p of pids) if (pidAlive(p)) process.kill(p, 'SIGKILL');
  await etcd?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function until(what: string, ms: number, pred: () => Promise<boolean> | boolean): Promise<void> {
  const t0 = Date.now();
  while (!(await pred())) {
    if (Date.now() - t0 > ms) throw new Error(`not ${what} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('stopping every replica at once', () => {
  itWithEtcd(
    'the workers of a cluster whose replicas are all stopped together are stopped (not orphaned)',
    async () => {
      etcd = await startEtcd();
      const dir = mkdtempSync(path.join(tmpdir(), 'gp-stopall-'));
      dirs.push(dir);
      const worker = path.join(dir, 'worker.mjs');
      writeFileSync(
        worker,
        "import http from 'node:http'; http.createServer((q, s) => { s.setHeader('content-type', 'application/json'); s.end('{}'); }).listen(Number(process.argv[2]), '127.0.0.1');\n",
      );
      const cfg = (name: string) =>
        parseConfig({
          server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, name) },
          store: { kind: 'etcd', endpoints: [etcd!.endpoint], prefix: '/stop-all', replica: name, lease_ttl_s: 2 },
          gpus: { count: 2, memory_gb: 80 },
          models: [
            {
              name: 'm',
              versions: [{ id: 'v1', replicas: 2, provider: { kind: 'process', command: `${process.execPath} ${worker} {port}`, health_path: '/health' } }],
              route: { weights: { v1: 1 } },
            },
          ],
        });
      const log: string[] = [];
      const r1: Replica = await startReplica(cfg('r1'), { onProgress: (m) => log.push(`r1 ${m}`) });
      await until('r1 leading', 30_000, () => r1.role() === 'leader');
      const r2: Replica = await startReplica(cfg('r2'), { onProgress: (m) => log.push(`r2 ${m}`) });
      await until('r2 following', 10_000, () => r2.leader() !== undefined);
      const client = new Etcd3({ hosts: etcd.endpoint });
      try {
        await until("r2's campaign in etcd", 10_000, async () => (await client.getAll().prefix('/stop-all/election/leader/').count()) === 2);
      } finally {
        client.close();
      }
      const workers = await r1.store.listWorkers({ model: 'm' });
      for (const w of workers) if (typeof w.pid === 'number') pids.push(w.pid);
      expect(pids).toHaveLength(2);
      expect(pids.every((p) => pidAlive(p))).toBe(true);
      // both stopped at once (SIGTERM to every pod)
      await Promise.all([r1.close(), r2.close()]);
      await until('the workers stopped', 15_000, () => pids.every((p) => !pidAlive(p)));
      expect(log.join('\n')).toMatch(/no other replica took over \(the cluster is stopping\): stopping the workers/);
    },
    90_000,
  );
});
