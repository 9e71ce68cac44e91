// The Store contract, written once and run against every backend (SQLite in a file and in memory;
// the key-value store on etcd and on an in-memory backend): versions, routes (compare-and-set), rollouts, GPUs
// (all-or-nothing), workers, audit, tokens, settings, and the transaction semantics every caller
// relies on — atomic commit, rollback on a rejection, nested savepoints, and isolation from calls
// made while a transaction is open.
import { afterEach, beforeEach, describe, expect, it as vitestIt } from 'vitest';
import { fromConfig } from '../../src/domain/version.js';
import type { Store, StoredRoute } from '../../src/store/types.js';
import { versionConfig } from '../unit/domain/version-fixture.js';
import { rejected } from './errors.js';
import type { ToolIt } from './tools.js';

const T0 = 1_700_000_000_000;

/** Run the contract against stores made by `open` (a fresh, empty store each time); `it` for a backend that needs a program. */
export function describeStoreContract(name: string, open: () => Promise<Store>, it: ToolIt = vitestIt): void {
  describe(`Store contract: ${name}`, () => {
    const opened: Store[] = [];
    const track = async (p: Promise<Store>): Promise<Store> => {
      const s = await p;
      opened.push(s);
      return s;
    };
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
    });

    describe('versions', () => {
      let s: Store;
      beforeEach(async () => {
        s = await track(open());
      });

      it('refuses duplicates, unknown updates, and a second active version per model', async () => {
        const v1 = fromConfig(versionConfig('v1'), T0);
        await s.insertVersion(v1);
        expect((await rejected(s.insertVersion(v1))).code).toBe('version_exists');
        expect((await rejected(s.updateVersion(fromConfig(versionConfig('nope'), T0)))).code).toBe('version_not_found');
        await s.updateVersion({ ...v1, status: 'active' });
        await s.insertVersion(fromConfig(versionConfig('v2'), T0 + 1));
        const e = await rejected(s.updateVersion({ ...fromConfig(versionConfig('v2'), T0 + 1), status: 'active' }));
        expect(e.code).toBe('active_exists');
        expect(e.status).toBe(409);
        // other models are independent; same id under another model is another version
        await s.insertVersion({ ...fromConfig(versionConfig('v1', 'mistral'), T0), status: 'active' });
        expect((await s.listVersions({ status: ['active'] })).map((v) => `${v.model}/${v.id}`)).toEqual(['llama/v1', 'mistral/v1']);
        expect((await s.listVersions({ model: 'llama' })).map((v) => v.id)).toEqual(['v1', 'v2']);
        expect(await s.listVersions({ status: [] })).toEqual([]);
      });

      it('closes the open active period on the next activation and on deactivation', async () => {
        await s.insertVersion(fromConfig(versionConfig('v1'), T0));
        await s.insertVersion(fromConfig(versionConfig('v2'), T0));
        await s.recordActivation({ model: 'llama', versionId: 'v1', at: T0 + 10 });
        await s.recordActivation({ model: 'llama', versionId: 'v2', at: T0 + 20, reason: 'swap' });
        await s.recordDeactivation('llama', 'v2', T0 + 30);
        expect((await s.activeHistory('llama')).map((p) => [p.versionId, p.since, p.until])).toEqual([
          ['v2', T0 + 20, T0 + 30],
          ['v1', T0 + 10, T0 + 20],
        ]);
        expect(await s.activeHistory('llama', 1)).toHaveLength(1);
      });

      it('rolls back a multi-row transaction as a whole', async () => {
        await expect(
          s.tx(async (t) => {
            await t.insertVersion(fromConfig(versionConfig('v1'), T0));
            await t.setSetting('x', 1, T0);
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        expect(await s.listVersions()).toEqual([]);
        expect(await s.getSetting('x')).toBeUndefined();
      });
    });

    describe('routes', () => {
      let s: Store;
      beforeEach(async () => {
        s = await track(open());
      });

      it('compare-and-sets on the revision', async () => {
        interface R extends StoredRoute {
          weights: Record<string, number>;
        }
        const r1: R = { model: 'llama', revision: 1, weights: { v1: 1 } };
        expect(await s.putRoute(r1, 0)).toBe(r1);
        const conflict = await rejected(s.putRoute({ model: 'llama', revision: 1, weights: { v2: 1 } }, 0));
        expect(conflict.code).toBe('route_conflict');
        expect(conflict.status).toBe(409);
        expect(conflict.details).toEqual({ model: 'llama', expected: 0, actual: 1 });
        expect((await rejected(s.putRoute({ model: 'llama', revision: 1, weights: {} }, 1))).code).toBe('route_revision_invalid');
        await s.putRoute({ model: 'llama', revision: 2, weights: { v1: 0.9, v2: 0.1 } }, 1);
        await s.putRoute({ model: 'mistral', revision: 7, weights: { a: 1 } }, 0);
        expect((await s.listRoutes()).map((r) => [r.model, r.revision])).toEqual([
          ['llama', 2],
          ['mistral', 7],
        ]);
        expect(await s.getRoute('llama')).toEqual({ model: 'llama', revision: 2, weights: { v1: 0.9, v2: 0.1 } });
        expect(await s.deleteRoute('mistral')).toBe(true);
        expect(await s.deleteRoute('mistral')).toBe(false);
        expect(await s.getRoute('mistral')).toBeUndefined();
      });
    });

    describe('rollouts', () => {
      let s: Store;
      beforeEach(async () => {
        s = await track(open());
      });

      it('keeps one active rollout per model, with revisions and compare-and-set', async () => {
        const r = await s.putRollout({ id: 'r1', model: 'llama', phase: 'pending', state: { stage: 0 } }, T0);
        expect(r).toEqual({ id: 'r1', model: 'llama', phase: 'pending', state: { stage: 0 }, terminal: false, revision: 1, createdAt: T0, updatedAt: T0 });
        expect((await rejected(s.putRollout({ id: 'r2', model: 'llama', phase: 'pending', state: {} }, T0))).code).toBe('rollout_in_progress');
        await s.putRollout({ id: 'm1', model: 'mistral', phase: 'progressing', state: {} }, T0 + 1);
        const r2 = await s.putRollout({ id: 'r1', model: 'llama', phase: 'progressing', state: { stage: 1 } }, T0 + 5, 1);
        expect(r2).toMatchObject({ revision: 2, createdAt: T0, updatedAt: T0 + 5 });
        expect((await rejected(s.putRollout({ id: 'r1', model: 'llama', phase: 'paused', state: {} }, T0 + 6, 1))).code).toBe('rollout_conflict');
        expect((await rejected(s.putRollout({ id: 'r1', model: 'mistral', phase: 'paused', state: {} }, T0 + 6))).code).toBe('rollout_model_mismatch');
        expect((await s.listActiveRollouts()).map((x) => x.id)).toEqual(['r1', 'm1']);
        await s.putRollout({ id: 'r1', model: 'llama', phase: 'rolled_back', state: { stage: 1 } }, T0 + 7);
        expect((await s.getRollout('r1'))?.terminal).toBe(true);
        expect((await s.listActiveRollouts()).map((x) => x.id)).toEqual(['m1']);
        // a finished rollout frees the model for the next one; explicit terminal override works too
        await s.putRollout({ id: 'r2', model: 'llama', phase: 'custom-done', state: {}, terminal: true }, T0 + 8);
        await s.putRollout({ id: 'r3', model: 'llama', phase: 'pending', state: {} }, T0 + 9);
        expect((await s.listRollouts({ model: 'llama' })).map((x) => x.id)).toEqual(['r3', 'r2', 'r1']);
        expect((await s.listRollouts({ limit: 1 })).map((x) => x.id)).toEqual(['r3']);
      });

      it('appends and tails events; unknown rollouts are refused', async () => {
        await s.putRollout({ id: 'r1', model: 'llama', phase: 'pending', state: null }, T0);
        const e1 = await s.appendRolloutEvent({ rolloutId: 'r1', at: T0, kind: 'started' });
        const e2 = await s.appendRolloutEvent({ rolloutId: 'r1', at: T0 + 1, kind: 'verdict', data: { outcome: 'pass', p: 0.41 } });
        expect(e2.seq).toBeGreaterThan(e1.seq);
        expect(await s.rolloutEvents('r1', { afterSeq: e1.seq })).toEqual([e2]);
        expect(await s.rolloutEvents('r1', { limit: 1 })).toEqual([e1]);
        expect((await rejected(s.appendRolloutEvent({ rolloutId: 'nope', at: T0, kind: 'x' }))).code).toBe('rollout_not_found');
        expect((await rejected(s.rolloutEvents('r1', { limit: 0 }))).code).toBe('invalid_limit');
      });
    });

    describe('GPUs and workers', () => {
      let s: Store;
      beforeEach(async () => {
        s = await track(open());
        await s.insertVersion(fromConfig(versionConfig('v1'), T0));
        await s.insertVersion(fromConfig(versionConfig('v2'), T0));
      });

      it('assigns all-or-nothing and refuses a GPU held by another version', async () => {
        await s.assignGpus(['0', '1'], { model: 'llama', versionId: 'v1' }, T0);
        await s.assignGpus(['0', '1'], { model: 'llama', versionId: 'v1' }, T0 + 1); // idempotent
        const e = await rejected(s.assignGpus(['2', '1'], { model: 'llama', versionId: 'v2' }, T0));
        expect(e.code).toBe('gpu_in_use');
        expect(e.message).toContain('GPU 1 is held by llama/v1');
        expect((await s.listGpuAssignments()).map((g) => [g.gpuId, g.versionId, g.assignedAt])).toEqual([
          ['0', 'v1', T0],
          ['1', 'v1', T0],
        ]);
        expect((await rejected(s.assignGpus(['5'], { model: 'llama', versionId: 'ghost' }, T0))).code).toBe('version_not_found');
        await s.assignGpus(['2', '3'], { model: 'llama', versionId: 'v2', workerId: 'w2' }, T0);
        expect(await s.releaseGpusOf('llama', 'v2', 'other')).toBe(0);
        expect(await s.releaseGpusOf('llama', 'v2', 'w2')).toBe(2);
        expect(await s.releaseGpus(['0', '9'])).toBe(1);
        expect(await s.releaseGpusOf('llama', 'v1')).toBe(1);
        expect(await s.listGpuAssignments()).toEqual([]);
      });

      it('upserts, filters and deletes workers; a worker needs a known version', async () => {
        const w = {
          id: 'w1',
          model: 'llama',
          versionId: 'v1',
          endpoint: 'http://127.0.0.1:1',
          provider: 'static',
          state: 'starting',
          gpus: [],
          startedAt: T0,
          updatedAt: T0,
        };
        await s.upsertWorker(w);
        await s.upsertWorker({ ...w, state: 'ready', updatedAt: T0 + 1 });
        await s.upsertWorker({ ...w, id: 'w2', versionId: 'v2' });
        expect(await s.getWorker('w1')).toEqual({ ...w, state: 'ready', updatedAt: T0 + 1 });
        expect((await s.listWorkers({ versionId: 'v2' })).map((x) => x.id)).toEqual(['w2']);
        expect(await s.listWorkers({ model: 'llama' })).toHaveLength(2);
        expect((await rejected(s.upsertWorker({ ...w, id: 'w3', versionId: 'ghost' }))).code).toBe('version_not_found');
        expect(await s.deleteWorker('w2')).toBe(true);
        expect(await s.deleteWorker('w2')).toBe(false);
      });
    });

    describe('audit', () => {
      it('filters by since/until/actor/action/target/result, newest first, with limits and paging', async () => {
        const s = await track(open());
        const rows = [
          { at: T0 + 1, actor: 'alice', action: 'swap', target: 'llama', result: 'ok' as const },
          { at: T0 + 2, actor: 'bob', action: 'rollback', target: 'llama', result: 'ok' as const },
          { at: T0 + 3, actor: 'alice', action: 'retire', target: 'llama/v1', result: 'error' as const, errorCode: 'version_active' },
          { at: T0 + 4, actor: 'controller', action: 'rollback', target: 'mistral', result: 'ok' as const },
        ];
        for (const r of rows) await s.appendAudit(r);
        const ids = async (q: Parameters<Store['queryAudit']>[0]) => (await s.queryAudit(q)).map((e) => e.id);
        expect(await ids({})).toEqual([4, 3, 2, 1]);
        expect(await ids({ actor: 'alice' })).toEqual([3, 1]);
        expect(await ids({ action: 'rollback' })).toEqual([4, 2]);
        expect(await ids({ target: 'llama' })).toEqual([2, 1]);
        expect(await ids({ since: T0 + 2, until: T0 + 4 })).toEqual([3, 2]);
        expect(await ids({ result: 'error' })).toEqual([3]);
        expect(await ids({ limit: 2 })).toEqual([4, 3]);
        expect(await ids({ limit: 2, beforeId: 3 })).toEqual([2, 1]);
        expect((await s.queryAudit({ result: 'error' }))[0]).toEqual({ id: 3, ...rows[2] });
        expect((await rejected(s.queryAudit({ limit: -1 }))).code).toBe('invalid_limit');
        expect(await s.pruneAudit(T0 + 3)).toBe(2);
        expect(await ids({})).toEqual([4, 3]);
      });
    });

    describe('tokens and settings', () => {
      it('stores tokens by name with unique hashes, and JSON settings', async () => {
        const s = await track(open());
        await s.putToken({ name: 'ops', role: 'operator', sha256: 'a'.repeat(64), createdAt: T0, source: 'config' });
        await s.putToken({ name: 'ops', role: 'viewer', sha256: 'b'.repeat(64), createdAt: T0 + 1, source: 'config' });
        expect((await s.getToken('ops'))?.role).toBe('viewer');
        const e = await rejected(s.putToken({ name: 'other', role: 'admin', sha256: 'b'.repeat(64), createdAt: T0, source: 'api' }));
        expect(e.code).toBe('token_hash_exists');
        expect(e.message).not.toContain('b'.repeat(64));
        expect((await s.listTokens()).map((t) => t.name)).toEqual(['ops']);
        expect(await s.deleteToken('ops')).toBe(true);
        await s.setSetting('n', 1, T0);
        await s.setSetting('n', [1, 2], T0 + 1);
        expect(await s.getSetting<number[]>('n')).toEqual([1, 2]);
        expect(await s.deleteSetting('n')).toBe(true);
        expect(await s.getSetting('n')).toBeUndefined();
      });
    });

    describe('transactions', () => {
      let s: Store;
      beforeEach(async () => {
        s = await track(open());
      });

      it('commits every write of the function together and resolves to its result', async () => {
        const out = await s.tx(async (t) => {
          await t.insertVersion(fromConfig(versionConfig('v1'), T0));
          await t.setSetting('x', 1, T0);
          return 'done';
        });
        expect(out).toBe('done');
        expect((await s.listVersions()).map((v) => v.id)).toEqual(['v1']);
        expect(await s.getSetting('x')).toBe(1);
      });

      it('a nested transaction that fails rolls back only its own writes', async () => {
        await s.tx(async (t) => {
          await t.setSetting('outer', 1, T0);
          const e = await rejected(
            t.tx(async (inner) => {
              await inner.setSetting('inner', 2, T0);
              await inner.insertVersion(fromConfig(versionConfig('v1'), T0));
              await inner.insertVersion(fromConfig(versionConfig('v1'), T0)); // version_exists
            }),
          );
          expect(e.code).toBe('version_exists');
          expect(await t.getSetting('inner')).toBeUndefined();
          await t.tx(async (inner) => inner.setSetting('kept', 3, T0));
        });
        expect([await s.getSetting('outer'), await s.getSetting('inner'), await s.getSetting('kept')]).toEqual([1, undefined, 3]);
        expect(await s.listVersions()).toEqual([]);
      });

      it('isolation: a call made while a transaction awaits sees none of its writes and runs after it commits', async () => {
        await s.setSetting('n', 0, T0);
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let wrote!: () => void;
        const written = new Promise<void>((r) => (wrote = r));
        const order: string[] = [];
        const tx = s.tx(async (t) => {
          await t.setSetting('n', 1, T0);
          order.push('tx wrote');
          wrote();
          await gate; // another flow runs here
          order.push('tx commits');
        });
        const outside = s.getSetting<number>('n').then((n) => {
          order.push(`outside read ${n}`);
          return n;
        });
        const write = s.setSetting('n', 2, T0).then(() => order.push('outside wrote'));
        await written; // a networked store answers the transaction's reads first
        await new Promise((r) => setImmediate(r)); // every pending callback has run: the transaction waits at its gate
        const beforeRelease = [...order];
        release();
        await Promise.all([tx, outside, write]);
        expect(beforeRelease).toEqual(['tx wrote']); // the outside calls waited for it
        expect(await outside).toBe(1); // after the commit, never the uncommitted value mid-transaction
        expect(order).toEqual(['tx wrote', 'tx commits', 'outside read 1', 'outside wrote']);
        expect(await s.getSetting('n')).toBe(2);
      });

      it('transactions run one at a time, in the order they were asked for', async () => {
        const order: string[] = [];
        const bump = (who: string) =>
          s.tx(async (t) => {
            const n = (await t.getSetting<number>('n')) ?? 0;
            await Promise.resolve(); // a read-modify-write that yields mid-way
            await t.setSetting('n', n + 1, T0);
            order.push(who);
          });
        await Promise.all([bump('a'), bump('b'), bump('c')]);
        expect(await s.getSetting('n')).toBe(3); // no lost update
        expect(order).toEqual(['a', 'b', 'c']);
      });

      it('a handle used after its transaction ended is refused', async () => {
        let kept: Parameters<Parameters<Store['tx']>[0]>[0] | undefined;
        await s.tx(async (t) => {
          kept = t;
          await t.setSetting('x', 1, T0);
        });
        const e = await rejected(kept!.setSetting('x', 2, T0));
        expect(e.code).toBe('store_tx_misuse');
        expect(await s.getSetting('x')).toBe(1);
      });

      it('close waits for an open transaction, then refuses calls', async () => {
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const tx = s.tx(async (t) => {
          await gate;
          await t.setSetting('x', 1, T0);
        });
        const closed = s.close();
        release();
        await tx;
        await closed;
        expect((await rejected(s.getSetting('x'))).code).toBe('store_closed');
      });
    });
  });
}
