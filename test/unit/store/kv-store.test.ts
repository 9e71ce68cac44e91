// The key-value store over an in-memory backend: the whole Store contract, and what only an optimistic
// store has — a transaction that loses a race runs again on fresh data (no lost update), gives up after
// its attempts with a clear error, refuses a transaction larger than one commit, and prunes in batches.
import { describe, expect, it } from 'vitest';
import { KvLayer } from '../../../src/store/kv/layer.js';
import { openKvStore } from '../../../src/store/kv/store.js';
import { rejected } from '../../helpers/errors.js';
import { MemoryKv } from '../../helpers/memory-kv.js';
import { describeStoreContract } from '../../helpers/store-contract.js';

const T0 = 1_700_000_000_000;

describeStoreContract('key-value (in memory)', () => openKvStore(new MemoryKv()));

describe('optimistic transactions', () => {
  it('a transaction whose snapshot another commit overtook runs again on the new data', async () => {
    const kv = new MemoryKv();
    const s = await openKvStore(kv);
    await s.setSetting('n', 1, T0);
    let raced = false;
    kv.interfere = () => {
      if (raced) return;
      raced = true;
      kv.apply(new Map([['settings/n', '10']])); // another replica's write lands after our snapshot
    };
    let runs = 0;
    await s.tx(async (t) => {
      runs++;
      const n = (await t.getSetting<number>('n')) ?? 0;
      await t.setSetting('n', n + 1, T0);
    });
    expect(runs).toBe(2);
    expect(kv.refused).toBe(1);
    expect(await s.getSetting('n')).toBe(11); // not 2: the other write was not lost
  });

  it('gives up after its attempts with store_busy, and leaves nothing half-written', async () => {
    const kv = new MemoryKv();
    const s = await openKvStore(kv, { attempts: 3 });
    kv.interfere = () => kv.apply(new Map([['settings/other', '1']]));
    const e = await rejected(s.setSetting('x', 1, T0));
    expect(e.code).toBe('store_busy');
    expect(e.message).toContain('3 times');
    kv.interfere = undefined;
    expect(await s.getSetting('x')).toBeUndefined();
  });

  it('a transaction with more writes than one commit takes is refused, naming the limit', async () => {
    const s = await openKvStore(new MemoryKv(4));
    const e = await rejected(
      s.tx(async (t) => {
        for (let i = 0; i < 4; i++) await t.setSetting(`k${i}`, i, T0);
      }),
    );
    expect(e.code).toBe('store_tx_too_large');
    expect(e.message).toContain('at most 3');
    expect(await s.getSetting('k0')).toBeUndefined();
  });

  it('prunes the audit log in batches that each fit one commit', async () => {
    const kv = new MemoryKv(4);
    const s = await openKvStore(kv);
    for (let i = 0; i < 10; i++) await s.appendAudit({ at: T0 + i, actor: 'a', action: 'x', result: 'ok' });
    const before = kv.commits;
    expect(await s.pruneAudit(T0 + 8)).toBe(8);
    expect(kv.commits - before).toBe(3); // 3 + 3 + 2
    expect((await s.queryAudit()).map((e) => e.at)).toEqual([T0 + 9, T0 + 8]);
  });

  it('reads nothing written and commits nothing for a read-only call', async () => {
    const kv = new MemoryKv();
    const s = await openKvStore(kv);
    const before = kv.commits;
    await s.listVersions();
    await s.queryAudit();
    expect(kv.commits).toBe(before);
  });

  it('refuses a layout newer than it knows', async () => {
    const kv = new MemoryKv();
    kv.apply(new Map([['meta/schema', '99']]));
    const e = await rejected(openKvStore(kv));
    expect(e.code).toBe('store_schema_too_new');
  });
});

describe('a transaction layer', () => {
  it('lays buffered writes over the snapshot in ranges, nearest layer first, limits counted after merging', async () => {
    const kv = new MemoryKv();
    kv.apply(new Map(['a/1', 'a/2', 'a/3', 'b/1'].map((k) => [k, k] as [string, string])));
    const { view } = await kv.snapshot();
    const root = new KvLayer(view);
    root.del('a/1');
    root.put('a/4', 'new');
    const child = root.child();
    child.put('a/1', 'back');
    child.del('a/2');
    const all = { start: 'a/', end: 'a0' };
    expect((await child.range(all)).map((e) => `${e.key}=${e.value}`)).toEqual(['a/1=back', 'a/3=a/3', 'a/4=new']);
    expect((await child.range({ ...all, reverse: true, limit: 2 })).map((e) => e.key)).toEqual(['a/4', 'a/3']);
    expect((await root.range({ ...all, limit: 2 })).map((e) => e.key)).toEqual(['a/2', 'a/3']);
    expect(await child.get('a/2')).toBeUndefined();
    child.mergeIntoParent();
    expect(await root.get('a/1')).toBe('back');
  });
});
