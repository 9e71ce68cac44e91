// Cluster mode (docs/cluster.md, "Stopping a replica"): the only replica stopped while it takes the lead
// and starts the fleet finishes taking it, then stops the workers it started (they were once left behind,
// and the takeover went on over a closed store).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startReplica } from '../../../src/control/cluster.js';
import { pidAlive } from '../../../src/providers/child.js';
import { itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';

let etcd: EtcdServer | undefined;
const dirs: string[] = [];
let pidsFile = '';

function pids(): number[] {
  return existsSync(pidsFile) ? readFileSync(pidsFile, 'utf8').split('\n').filter(Boolean).map(Number) : [];
}

afterAll(async () => {
  for (const p of pids()) if (pidAlive(p)) process.kill(p, 'SIGKILL');
  await etcd?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the last replica stopped while taking the lead', () => {
  itWithEtcd(
    'stops the workers it started (it is the only replica)',
    async () => {
      etcd = await startEtcd();
      const dir = mkdtempSync(path.join(tmpdir(), 'gp-takeover-'));
      dirs.push(dir);
      pidsFile = path.join(dir, 'pids');
      const worker = path.join(dir, 'worker.mjs');
      // healthy after 1.5 s (an engine loading its weights)
      writeFileSync(
        worker,
        `import http from 'node:http'; import fs from 'node:fs'; fs.appendFileSync(${JSON.stringify(pidsFile)}, process.pid + '\\n'); const t0 = Date.now(); http.createServer((q, s) => { s.statusCode = Date.now() - t0 > 1500 ? 200 : 503; s.setHeader('content-type', 'application/json'); s.end('{}'); }).listen(Number(process.argv[2]), '127.0.0.1');\n`,
      );
      const cfg = parseConfig({
        server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'r1') },
        store: { kind: 'etcd', endpoints: [etcd.endpoint], prefix: '/stop-takeover', replica: 'r1', lease_ttl_s: 2 },
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
      const unhandled: unknown[] = [];
      const onUnhandled = (e: unknown) => unhandled.push(e);
      process.on('unhandledRejection', onUnhandled);
      let taking!: () => void;
      const takingOver = new Promise<void>((r) => (taking = r));
      const r1 = await startReplica(cfg, {
        onProgress: (m) => {
          log.push(m);
          if (m.includes('leads the cluster')) taking();
        },
      });
      await takingOver;
      // SIGTERM once the workers are spawned, before they are healthy
      const t0 = Date.now();
      while (pids().length < 2 && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 20));
      expect(pids()).toHaveLength(2);
      const spawned = pids();
      await r1.close();
      const closedAt = log.length;
      const t1 = Date.now();
      while (spawned.some((p) => pidAlive(p))) {
        if (Date.now() - t1 > 15_000) throw new Error(`workers still alive 15 s after close: ${spawned.join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      process.off('unhandledRejection', onUnhandled);
      expect(unhandled).toEqual([]);
      // nothing went on over the closed store
      expect(log.slice(closedAt).filter((m) => /could not/.test(m))).toEqual([]);
    },
    90_000,
  );
});
