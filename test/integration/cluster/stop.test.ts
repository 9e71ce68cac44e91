// Cluster mode (docs/cluster.md, "Stopping a replica"), replicas in this process on a real etcd with
// `process` workers: every replica stopped at once (a deployment deleted, `docker compose down`) — the
// leader sees no other replica take over and stops the workers, none is orphaned (each replica counting
// the others still standing once left them all); the only replica stopped while it takes the lead
// finishes taking it, then stops the workers it started (they were once left behind, and the takeover
// went on over a closed store).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { afterAll, describe, expect } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { GlidepathConfig } from '../../../src/config/types.js';
import { startReplica } from '../../../src/control/cluster.js';
import { pidAlive } from '../../../src/providers/child.js';
import { itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';

let etcd: EtcdServer | undefined;
const dirs: string[] = [];
const pidFiles: string[] = [];

afterAll(async () => {
  for (const f of pidFiles) for (const p of pidsIn(f)) if (pidAlive(p)) process.kill(p, 'SIGKILL');
  await etcd?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function pidsIn(file: string): number[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [];
}

async function until(what: string, ms: number, pred: () => Promise<boolean> | boolean): Promise<void> {
  const t0 = Date.now();
  while (!(await pred())) {
    if (Date.now() - t0 > ms) throw new Error(`not ${what} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A fleet of two `process` workers on etcd under `prefix`, each worker writing its pid to `pids()`'s file
 * and healthy `readyMs` after it starts (an engine loading its weights); `config(name)` is a replica's.
 */
async function fleet(prefix: string, readyMs: number): Promise<{ config(name: string): GlidepathConfig; pids(): number[] }> {
  etcd ??= await startEtcd();
  const e = etcd;
  const dir = mkdtempSync(path.join(tmpdir(), 'gp-stop-'));
  dirs.push(dir);
  const pidFile = path.join(dir, 'pids');
  pidFiles.push(pidFile);
  const worker = path.join(dir, 'worker.mjs');
  writeFileSync(
    worker,
    `import http from 'node:http'; import fs from 'node:fs'; fs.appendFileSync(${JSON.stringify(pidFile)}, process.pid + '\\n'); const t0 = Date.now(); http.createServer((q, s) => { s.statusCode = Date.now() - t0 >= ${readyMs} ? 200 : 503; s.setHeader('content-type', 'application/json'); s.end('{}'); }).listen(Number(process.argv[2]), '127.0.0.1');\n`,
  );
  return {
    pids: () => pidsIn(pidFile),
    config: (name) =>
      parseConfig({
        server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, name) },
        store: { kind: 'etcd', endpoints: [e.endpoint], prefix, replica: name, lease_ttl_s: 2 },
        gpus: { count: 2, memory_gb: 80 },
        models: [
          {
            name: 'm',
            versions: [{ id: 'v1', replicas: 2, provider: { kind: 'process', command: `${process.execPath} ${worker} {port}`, health_path: '/health' } }],
            route: { weights: { v1: 1 } },
          },
        ],
      }),
  };
}

describe('cluster replicas stopped', () => {
  itWithEtcd(
    'every replica stopped at once: the workers are stopped (not orphaned)',
    async () => {
      const f = await fleet('/stop-all', 0);
      const log: string[] = [];
      const r1 = await startReplica(f.config('r1'), { onProgress: (m) => log.push(`r1 ${m}`) });
      await until('r1 leading', 30_000, () => r1.role() === 'leader');
      const r2 = await startReplica(f.config('r2'), { onProgress: (m) => log.push(`r2 ${m}`) });
      await until('r2 following', 10_000, () => r2.leader() !== undefined);
      const client = new Etcd3({ hosts: etcd!.endpoint });
      try {
        await until("r2's campaign in etcd", 10_000, async () => (await client.getAll().prefix('/stop-all/election/leader/').count()) === 2);
      } finally {
        client.close();
      }
      const pids = f.pids();
      expect(pids).toHaveLength(2);
      expect(pids.every((p) => pidAlive(p))).toBe(true);
      // both stopped at once (SIGTERM to every pod)
      await Promise.all([r1.close(), r2.close()]);
      await until('the workers stopped', 15_000, () => pids.every((p) => !pidAlive(p)));
      // r1 counts the replicas standing before or after r2 has resigned (both stop at once): either way it
      // stops the workers, and says why; it never waits for a handover that cannot come
      expect(log.join('\n')).toMatch(/r1 glidepath: r1: no other replica (took over|stands) \(the cluster is stopping\): stopping the workers/);
      expect(log.join('\n')).not.toMatch(/handed over/);
    },
    90_000,
  );

  itWithEtcd(
    'the only replica stopped while it takes the lead: it finishes taking it, then stops the workers it started',
    async () => {
      const f = await fleet('/stop-takeover', 1_500);
      const log: string[] = [];
      const unhandled: unknown[] = [];
      const onUnhandled = (e: unknown) => unhandled.push(e);
      process.on('unhandledRejection', onUnhandled);
      let taking!: () => void;
      const takingOver = new Promise<void>((r) => (taking = r));
      const r1 = await startReplica(f.config('r1'), {
        onProgress: (m) => {
          log.push(m);
          if (m.includes('leads the cluster')) taking();
        },
      });
      await takingOver;
      // stopped once the workers are spawned, before they are healthy
      await until('both workers spawned', 20_000, () => f.pids().length === 2);
      const spawned = f.pids();
      await r1.close();
      const closedAt = log.length;
      await until('the workers stopped', 15_000, () => spawned.every((p) => !pidAlive(p)));
      process.off('unhandledRejection', onUnhandled);
      expect(unhandled).toEqual([]);
      // nothing went on over the closed store
      expect(log.slice(closedAt).filter((m) => /could not/.test(m))).toEqual([]);
    },
    90_000,
  );
});
