// migrate-store: an embedded deployment's whole state (every kind of record, ids and order kept) copied
// into a key-value store reads back equal, and the copy carries on where the original stopped (next
// audit id, next event number, the open active period, the rollout in progress). With etcd installed,
// `glidepath migrate-store` does it end to end and refuses a prefix that already holds state.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromConfig } from '../../../src/domain/version.js';
import { EtcdKv } from '../../../src/store/kv/etcd.js';
import { openKvStore } from '../../../src/store/kv/store.js';
import { openStore } from '../../../src/store/sqlite.js';
import type { SqliteStore } from '../../../src/store/sqlite.js';
import { etcdInstalled, itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';
import { rejected } from '../../helpers/errors.js';
import { MemoryKv } from '../../helpers/memory-kv.js';
import { versionConfig } from '../../unit/domain/version-fixture.js';
import { ensureBuilt, gp } from '../cli/helpers.js';

const T0 = 1_700_000_000_000;
let dir: string;
let etcd: EtcdServer | undefined;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'glidepath-migrate-'));
  if (etcdInstalled()) {
    etcd = await startEtcd();
    ensureBuilt();
  }
}, 60_000);
afterAll(async () => {
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A store with every kind of record, some pruned and some terminal, so ids have gaps. */
async function filled(dataDir: string): Promise<SqliteStore> {
  const s = openStore(dataDir);
  const v1 = fromConfig(versionConfig('v1'), T0);
  await s.insertVersion({ ...v1, status: 'active' });
  await s.insertVersion(fromConfig(versionConfig('v2'), T0 + 1));
  await s.appendVersionTransition({ model: 'llama', versionId: 'v1', from: 'registered', to: 'loading', at: T0 });
  await s.appendVersionTransition({ model: 'llama', versionId: 'v1', from: 'loading', to: 'ready', at: T0 + 1, actor: 'ops' });
  await s.recordActivation({ model: 'llama', versionId: 'v2', at: T0 + 2 });
  await s.recordActivation({ model: 'llama', versionId: 'v1', at: T0 + 3, reason: 'swap' });
  await s.putRoute({ model: 'llama', revision: 3, weights: { v1: 0.9, v2: 0.1 }, stickySalt: 'salt' }, 0);
  await s.putRollout({ id: 'r-old', model: 'llama', phase: 'succeeded', state: { kind: 'canary' } }, T0);
  await s.putRollout({ id: 'r-now', model: 'llama', phase: 'running', state: { kind: 'canary', step: 2 } }, T0 + 5);
  await s.appendRolloutEvent({ rolloutId: 'r-old', at: T0, kind: 'started' });
  await s.appendRolloutEvent({ rolloutId: 'r-now', at: T0 + 5, kind: 'step', message: 'to 10%', data: { share: 0.1 } });
  await s.assignGpus(['gpu-0', 'gpu-1'], { model: 'llama', versionId: 'v1', workerId: 'w0' }, T0);
  await s.upsertWorker({
    id: 'w0',
    model: 'llama',
    versionId: 'v1',
    endpoint: 'http://127.0.0.1:1',
    provider: 'sim',
    state: 'ready',
    gpus: ['gpu-0'],
    startedAt: T0,
    updatedAt: T0,
  });
  for (let i = 0; i < 30; i++)
    await s.appendAudit({ at: T0 + i, actor: i % 2 ? 'ops' : 'controller', action: 'swap', target: 'llama', result: 'ok', params: { i } });
  await s.pruneAudit(T0 + 5);
  await s.putToken({ name: 'ops', role: 'operator', sha256: 'a'.repeat(64), createdAt: T0, source: 'config' });
  await s.setSetting('scheduler.replicas', { llama: 3 }, T0);
  return s;
}

describe('dump and restore', () => {
  it('a SQLite store restored into a key-value store reads back equal and carries on', async () => {
    const src = await filled(path.join(dir, 'a'));
    const dump = await src.dump();
    await src.close();
    const kv = await openKvStore(new MemoryKv(8)); // small commits: the restore batches
    await kv.restore(dump);
    expect(await kv.dump()).toEqual(dump);
    expect((await kv.appendAudit({ at: T0 + 99, actor: 'x', action: 'y', result: 'ok' })).id).toBe(31);
    expect((await kv.appendRolloutEvent({ rolloutId: 'r-now', at: T0 + 6, kind: 'step' })).seq).toBe(3);
    expect((await kv.rolloutEvents('r-now', { afterSeq: 2 })).map((e) => e.seq)).toEqual([3]);
    expect((await kv.listActiveRollouts()).map((r) => r.id)).toEqual(['r-now']);
    expect((await rejected(kv.putRollout({ id: 'r-3', model: 'llama', phase: 'running', state: {} }, T0))).code).toBe('rollout_in_progress');
    await kv.recordDeactivation('llama', 'v1', T0 + 9);
    expect((await kv.activeHistory('llama')).map((p) => [p.versionId, p.until])).toEqual([
      ['v1', T0 + 9],
      ['v2', T0 + 3],
    ]);
    expect((await kv.queryAudit({ limit: 3, actor: 'ops' })).map((a) => a.id)).toEqual([30, 28, 26]);
    expect((await rejected(kv.restore(dump))).code).toBe('store_not_empty');
  });
});

describe('glidepath migrate-store', () => {
  itWithEtcd(
    'copies the data directory into etcd, reports the counts, and refuses a second time',
    async () => {
      const server = etcd as EtcdServer;
      const dataDir = path.join(dir, 'cli');
      await (await filled(dataDir)).close();
      const cfg = path.join(dir, 'cli.yaml');
      writeFileSync(
        cfg,
        `server: { data_dir: ${dataDir} }\nstore: { kind: etcd, endpoints: ["${server.endpoint}"], prefix: /migrated, max_txn_ops: 16 }\nmodels:\n  - name: llama\n    versions:\n      - { id: v1, base_model: llama, provider: { kind: sim } }\n`,
      );
      const r = await gp(['migrate-store', '--config', cfg, '-o', 'json']);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { keys: number; records: Record<string, number> };
      expect(report.records).toMatchObject({ versions: 2, audit: 25, rollouts: 2, events: 2, tokens: 1 });
      const kv = await openKvStore(new EtcdKv({ endpoints: [server.endpoint], prefix: '/migrated' }));
      try {
        expect((await kv.getRoute('llama'))?.revision).toBe(3);
        expect((await kv.queryAudit({ limit: 1 }))[0]?.id).toBe(30);
      } finally {
        await kv.close();
      }
      const again = await gp(['migrate-store', '--config', cfg]);
      expect(again.code).not.toBe(0);
      expect(again.stderr).toContain('store_not_empty');
      const bad = await gp(['migrate-store', '--config', cfg, '--to', 'sqlite']);
      expect(bad.stderr).toContain('--to: only etcd');
    },
    60_000,
  );
});
