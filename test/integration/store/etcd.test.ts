// The key-value store on a real etcd (started on loopback): the whole Store contract, then what a cluster
// adds — two stores (two replicas) racing read-modify-writes lose no update, keys stay under their prefix,
// and an etcd that goes away gives a clear `store_unavailable` until it is back.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { EtcdKv } from '../../../src/store/kv/etcd.js';
import { EtcdCoordination } from '../../../src/store/kv/coordination.js';
import { openKvStore } from '../../../src/store/kv/store.js';
import type { KvStore } from '../../../src/store/kv/store.js';
import { rejected } from '../../helpers/errors.js';
import { etcdInstalled, itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';
import { describeStoreContract } from '../../helpers/store-contract.js';

const T0 = 1_700_000_000_000;
let etcd: EtcdServer | undefined;
let n = 0;

beforeAll(async () => {
  if (etcdInstalled()) etcd = await startEtcd({ maxTxnOps: 128 });
}, 30_000);
afterAll(async () => {
  await etcd?.stop();
});

function open(prefix = `/gp-test-${++n}`, timeoutMs?: number): Promise<KvStore> {
  if (!etcd) throw new Error('etcd is not running');
  return openKvStore(new EtcdKv({ endpoints: [etcd.endpoint], prefix, timeoutMs }));
}

describeStoreContract('etcd', () => open(), itWithEtcd);

describe('etcd: several replicas', () => {
  itWithEtcd('two stores on one prefix racing read-modify-write transactions lose no update', async () => {
    const [a, b] = [await open('/gp-race'), await open('/gp-race')];
    try {
      const bump = (s: KvStore) =>
        s.tx(async (t) => {
          const v = (await t.getSetting<number>('n')) ?? 0;
          await t.setSetting('n', v + 1, T0);
        });
      await Promise.all(Array.from({ length: 20 }, (_, i) => bump(i % 2 === 0 ? a : b)));
      expect(await a.getSetting('n')).toBe(20);
      // the one-rollout-per-model rule holds across replicas too
      const start = (s: KvStore, id: string) =>
        s.putRollout({ id, model: 'llama', phase: 'running', state: {} }, T0).then(
          () => 'ok',
          (e: Error & { code?: string }) => e.code,
        );
      const results = await Promise.all([start(a, 'r1'), start(b, 'r2')]);
      expect(results.sort()).toEqual(['ok', 'rollout_in_progress']);
    } finally {
      await a.close();
      await b.close();
    }
  });

  itWithEtcd('a leader that lost its lease can write nothing: its commits are fenced by its election key', async () => {
    const server = etcd as EtcdServer;
    const kv = new EtcdKv({ endpoints: [server.endpoint], prefix: '/gp-fence' });
    const s = await openKvStore(kv);
    const other = new EtcdKv({ endpoints: [server.endpoint], prefix: '/gp-fence' });
    try {
      const coord = new EtcdCoordination(kv, 5);
      const elected = new Promise<void>((resolve) => coord.campaign('http://a', { elected: resolve, lost: () => undefined }));
      await elected;
      expect(kv.fence).toBeDefined();
      await s.setSetting('x', 1, T0); // leads: writes land
      // its lease is gone (expired while it was paused, or revoked): another replica may lead now
      await other.client.delete().key((kv.fence as { key: string }).key);
      const e = await rejected(s.setSetting('x', 2, T0));
      expect(e.code).toBe('not_leader');
      kv.fence = undefined;
      expect(await s.getSetting('x')).toBe(1);
    } finally {
      await s.close();
      await other.close();
    }
  });

  itWithEtcd('keys stay under the prefix: another prefix is another store', async () => {
    const [a, b] = [await open('/gp-one'), await open('/gp-two')];
    try {
      await a.setSetting('x', 1, T0);
      expect(await b.getSetting('x')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });

  itWithEtcd(
    'an etcd that is down gives store_unavailable naming it; the same store works when it is back',
    async () => {
      const server = etcd as EtcdServer;
      const s = await open('/gp-down', 500);
      try {
        await s.setSetting('x', 1, T0);
        await server.stop({ keepData: true });
        const e = await rejected(s.getSetting('x'));
        expect(e.code).toBe('store_unavailable');
        expect(e.message).toContain(server.endpoint);
        await server.restart();
        await expect.poll(() => s.getSetting('x').catch(() => 'down'), { timeout: 15_000 }).toBe(1);
        await s.setSetting('x', 2, T0);
        expect(await s.getSetting('x')).toBe(2);
      } finally {
        await s.close();
      }
    },
    40_000,
  );
});
