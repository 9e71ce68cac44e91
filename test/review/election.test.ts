// Review of src/store/kv/coordination.ts (the election) on a real etcd: the leader is cut off from etcd
// (a partition: packets dropped, sockets left open). Another replica is elected once the lease expires
// (~TTL); the old leader hears `lost` only much later (etcd3 declares a lease lost 2×TTL after its last
// keepalive) — both act as leader meanwhile, and the store does not fence the old one's commits.
import { createServer, connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { EtcdCoordination } from '../../src/store/kv/coordination.js';
import { EtcdKv } from '../../src/store/kv/etcd.js';
import { openKvStore } from '../../src/store/kv/store.js';
import { etcdInstalled, itWithEtcd, startEtcd } from '../helpers/etcd.js';
import type { EtcdServer } from '../helpers/etcd.js';

let etcd: EtcdServer | undefined;
beforeAll(async () => {
  if (etcdInstalled()) etcd = await startEtcd();
}, 30_000);
afterAll(async () => {
  await etcd?.stop();
});

/** A TCP proxy to etcd that can silently drop everything (a partition). */
async function proxy(to: string): Promise<{ url: string; cut(): void; close(): void }> {
  const u = new URL(to);
  let cut = false;
  const socks: Socket[] = [];
  const s = createServer((c) => {
    const up = connect(Number(u.port), u.hostname);
    socks.push(c, up);
    c.on('data', (d) => cut || up.write(d));
    up.on('data', (d) => cut || c.write(d));
    c.on('error', () => undefined);
    up.on('error', () => undefined);
    c.on('close', () => up.destroy());
    up.on('close', () => c.destroy());
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    cut: () => (cut = true),
    close: () => {
      for (const x of socks) x.destroy();
      s.close();
    },
  };
}

describe('leader election', () => {
  itWithEtcd(
    'a leader cut off from etcd still believes it leads for about one more TTL after another replica was elected',
    async () => {
      if (!etcd) throw new Error('no etcd');
      const TTL = 2;
      const p = await proxy(etcd.endpoint);
      const kvA = new EtcdKv({ endpoints: [p.url], prefix: '/review-elect' });
      const kvB = new EtcdKv({ endpoints: [etcd.endpoint], prefix: '/review-elect' });
      const a = new EtcdCoordination(kvA, TTL);
      const b = new EtcdCoordination(kvB, TTL);
      const t: Record<string, number> = {};
      let aElected!: () => void;
      const aUp = new Promise<void>((r) => (aElected = r));
      const la = a.campaign('A', { elected: () => aElected(), lost: () => (t.aLost ??= Date.now()) });
      await aUp;
      const lb = b.campaign('B', { elected: () => (t.bElected ??= Date.now()), lost: () => undefined });
      await new Promise((r) => setTimeout(r, 500));
      t.cut = Date.now();
      p.cut();
      const deadline = Date.now() + 6 * TTL * 1000;
      while ((t.aLost === undefined || t.bElected === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const both = (t.aLost ?? Date.now()) - (t.bElected ?? Date.now());
      console.log(`B elected ${t.bElected! - t.cut} ms after the cut; A heard it lost ${t.aLost! - t.cut} ms after; both leaders for ${both} ms`);
      await lb.resign();
      await la.resign();
      p.close();
      await kvA.close();
      await kvB.close();
      // FAILS today: both replicas hold leadership for ~TTL (2 s here, 5 s with the default lease)
      expect(both).toBeLessThanOrEqual(0);
    },
    30_000,
  );

  itWithEtcd('a store commit is not fenced by leadership: a replica that does not lead still commits', async () => {
    if (!etcd) throw new Error('no etcd');
    const kvA = new EtcdKv({ endpoints: [etcd.endpoint], prefix: '/review-fence' });
    const a = new EtcdCoordination(kvA, 2);
    let up!: () => void;
    const elected = new Promise<void>((r) => (up = r));
    const la = a.campaign('A', { elected: () => up(), lost: () => undefined });
    await elected;
    // a second replica that never won (or lost its lease long ago) writes a route
    const kvB = new EtcdKv({ endpoints: [etcd.endpoint], prefix: '/review-fence' });
    const storeB = await openKvStore(kvB);
    await storeB.putRoute({ model: 'm', revision: 7, weights: { v1: 1 } }, 0);
    expect((await storeB.getRoute('m'))?.revision).toBe(7); // accepted: nothing compares the leader key
    await la.resign();
    await storeB.close();
    await kvA.close();
  });
});
