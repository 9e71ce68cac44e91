import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fromConfig } from '../../../src/domain/version.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from '../../../src/store/migrations/index.js';
import { openMemoryStore, openStore, SqliteStore } from '../../../src/store/sqlite.js';
import type { Store, StoredRoute } from '../../../src/store/types.js';
import { versionConfig } from '../../unit/domain/version-fixture.js';
import { caught } from '../../helpers/errors.js';

const T0 = 1_700_000_000_000;

let dir: string;
const open: Store[] = [];
function openIn(d = dir): SqliteStore {
  const s = openStore(d);
  open.push(s);
  return s;
}

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'glidepath-store-'));
});
afterEach(() => {
  for (const s of open.splice(0)) s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('open and migrations', () => {
  it('creates <dataDir>/glidepath.db with WAL, NORMAL sync, foreign keys and every migration', () => {
    const s = openIn(path.join(dir, 'nested', 'data'));
    expect(s.location).toBe(path.join(dir, 'nested', 'data', 'glidepath.db'));
    expect(s.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
    const raw = new Database(s.location, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
      const tables = (raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map(
        (r) => r.name,
      );
      for (const t of ['versions', 'version_transitions', 'active_history', 'routes', 'rollouts', 'rollout_events', 'gpu_assignments', 'workers', 'audit', 'tokens', 'settings', 'schema_migrations']) {
        expect(tables).toContain(t);
      }
      const applied = raw.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
      expect(applied).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    } finally {
      raw.close();
    }
    // the store's own connection settings
    const pragmas = (s as unknown as { db: Database.Database }).db;
    expect(pragmas.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    expect(pragmas.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(pragmas.pragma('busy_timeout', { simple: true })).toBe(5000);
  });

  it('re-opens idempotently', () => {
    const a = openIn();
    a.setSetting('k', { n: 1 }, T0);
    a.close();
    const b = openIn();
    expect(b.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
    expect(b.getSetting('k')).toEqual({ n: 1 });
    b.close();
    const raw = new Database(path.join(dir, 'glidepath.db'), { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get()).toEqual({ n: MIGRATIONS.length });
    raw.close();
  });

  it('applies a new migration on re-open, in order, in its own transaction', () => {
    openIn().close();
    const m2 = { version: 2, name: 'add_notes', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);' };
    const s = SqliteStore.open({ dataDir: dir, migrations: [...MIGRATIONS, m2] });
    open.push(s);
    expect(s.schemaVersion()).toBe(2);
    s.close();
    // a broken migration rolls back entirely and the store refuses to open
    const bad = { version: 3, name: 'broken', sql: 'CREATE TABLE half (x INTEGER); THIS IS NOT SQL;' };
    const err = caught(() => SqliteStore.open({ dataDir: dir, migrations: [...MIGRATIONS, m2, bad] }));
    expect(err.code).toBe('store_open_failed');
    const raw = new Database(path.join(dir, 'glidepath.db'), { readonly: true });
    expect(raw.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").get()).toBeUndefined();
    expect(raw.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: 2 });
    raw.close();
  });

  it('refuses a database from a newer glidepath', () => {
    openIn().close();
    const raw = new Database(path.join(dir, 'glidepath.db'));
    raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(LATEST_SCHEMA_VERSION + 5, 'future', T0);
    raw.close();
    const err = caught(() => openStore(dir));
    expect(err.code).toBe('store_schema_too_new');
    expect(err.status).toBe(503);
    expect(err.message).toContain(`schema version ${LATEST_SCHEMA_VERSION + 5}`);
    expect(err.message).toContain(`only up to ${LATEST_SCHEMA_VERSION}`);
  });

  it('refuses a file that is not a database', () => {
    writeFileSync(path.join(dir, 'glidepath.db'), 'this is not sqlite, just some text that is long enough to be a header'.repeat(10));
    const err = caught(() => openStore(dir));
    expect(err.code).toBe('store_open_failed');
    expect(err.message).toContain('glidepath.db');
  });

  it('refuses a non-contiguous migration list', () => {
    const err = caught(() => SqliteStore.open({ path: ':memory:', migrations: [{ version: 2, name: 'x', sql: '' }] }));
    expect(err.code).toBe('store_open_failed');
    expect(err.message).toContain('not contiguous');
  });
});

describe('persistence across close and re-open', () => {
  it('keeps versions, transitions, active history, routes, rollouts, events, GPUs, workers, audit, tokens, settings', () => {
    const a = openIn();
    const v1 = { ...fromConfig(versionConfig('v1'), T0), status: 'active' as const, gpus: ['0', '1', '2', '3'], loadTimeMs: 812.5 };
    a.insertVersion(v1);
    a.appendVersionTransition({ model: 'llama', versionId: 'v1', from: 'ready', to: 'active', at: T0 + 1, actor: 'alice' });
    a.recordActivation({ model: 'llama', versionId: 'v1', at: T0 + 1, actor: 'alice', reason: 'swap' });
    a.putRoute({ model: 'llama', revision: 1, weights: { v1: 1 } }, 0);
    const ro = a.putRollout({ id: 'r1', model: 'llama', phase: 'progressing', state: { stage: 2, verdicts: ['pass'] } }, T0 + 2);
    a.appendRolloutEvent({ rolloutId: 'r1', at: T0 + 3, kind: 'stage', message: 'stage 2', data: { weight: 5 } });
    a.assignGpus(['0', '1', '2', '3'], { model: 'llama', versionId: 'v1', workerId: 'w1' }, T0);
    a.upsertWorker({ id: 'w1', model: 'llama', versionId: 'v1', endpoint: 'http://127.0.0.1:9001', provider: 'sim', pid: 4242, state: 'ready', gpus: ['0', '1', '2', '3'], startedAt: T0, updatedAt: T0, info: { port: 9001 } });
    a.appendAudit({ at: T0, actor: 'alice', action: 'swap', target: 'llama/v1', params: { mode: 'overlap' }, result: 'ok', durationMs: 3.5 });
    a.putToken({ name: 'admin', role: 'admin', sha256: 'ab'.repeat(32), createdAt: T0, source: 'generated' });
    a.setSetting('cluster', { name: 'east' }, T0);
    a.close();

    const b = openIn();
    expect(b.getVersion('llama', 'v1')).toEqual(v1);
    expect(b.versionTransitions('llama', 'v1')).toEqual([{ model: 'llama', versionId: 'v1', from: 'ready', to: 'active', at: T0 + 1, actor: 'alice', reason: undefined }]);
    expect(b.activeHistory('llama')).toEqual([{ model: 'llama', versionId: 'v1', since: T0 + 1, until: undefined, actor: 'alice', reason: 'swap' }]);
    expect(b.getRoute('llama')).toEqual({ model: 'llama', revision: 1, weights: { v1: 1 } });
    expect(b.listActiveRollouts()).toEqual([ro]);
    expect(b.rolloutEvents('r1')).toEqual([{ seq: 1, rolloutId: 'r1', at: T0 + 3, kind: 'stage', message: 'stage 2', data: { weight: 5 } }]);
    expect(b.listGpuAssignments().map((g) => g.gpuId)).toEqual(['0', '1', '2', '3']);
    expect(b.listWorkers({ state: 'ready' })).toEqual([expect.objectContaining({ id: 'w1', pid: 4242, info: { port: 9001 } })]);
    expect(b.queryAudit()).toEqual([{ id: 1, at: T0, actor: 'alice', action: 'swap', target: 'llama/v1', params: { mode: 'overlap' }, result: 'ok', durationMs: 3.5 }]);
    expect(b.getToken('admin')).toEqual({ name: 'admin', role: 'admin', sha256: 'ab'.repeat(32), createdAt: T0, source: 'generated' });
    expect(b.getSetting('cluster')).toEqual({ name: 'east' });
  });

  it('lets a second process-like opener read committed WAL data while the first stays open', () => {
    const writer = openIn();
    const reader = openIn();
    writer.insertVersion(fromConfig(versionConfig('v1'), T0));
    writer.putRoute({ model: 'llama', revision: 1, weights: { v1: 1 } }, 0);
    expect(reader.getVersion('llama', 'v1')?.status).toBe('registered');
    expect(reader.getRoute('llama')?.revision).toBe(1);
    // and the reader can write too; the writer sees it
    reader.putRoute({ model: 'llama', revision: 2, weights: { v1: 1 } }, 1);
    expect(writer.getRoute('llama')?.revision).toBe(2);
    // a CAS from the stale writer view loses
    expect(caught(() => writer.putRoute({ model: 'llama', revision: 2, weights: {} }, 1)).code).toBe('route_conflict');
  });
});

describe('another process', () => {
  it('reads what this process committed while the store stays open (WAL)', () => {
    const s = openIn();
    s.putRoute({ model: 'llama', revision: 3, weights: { v1: 1 } }, 0);
    // a real second process with its own connection, as `glidepath status` would be
    const script = `const D = require('better-sqlite3'); const db = new D(process.argv[1], { readonly: true });
      process.stdout.write(JSON.stringify([db.pragma('journal_mode', { simple: true }), db.prepare('SELECT revision FROM routes').get()]));`;
    const out = execFileSync(process.execPath, ['-e', script, s.location], { encoding: 'utf8', cwd: process.cwd() });
    expect(JSON.parse(out)).toEqual(['wal', { revision: 3 }]);
  });
});

describe('versions', () => {
  let s: Store;
  beforeEach(() => {
    s = openMemoryStore();
    open.push(s);
  });

  it('refuses duplicates, unknown updates, and a second active version per model', () => {
    const v1 = fromConfig(versionConfig('v1'), T0);
    s.insertVersion(v1);
    expect(caught(() => s.insertVersion(v1)).code).toBe('version_exists');
    expect(caught(() => s.updateVersion(fromConfig(versionConfig('nope'), T0))).code).toBe('version_not_found');
    s.updateVersion({ ...v1, status: 'active' });
    s.insertVersion(fromConfig(versionConfig('v2'), T0 + 1));
    const e = caught(() => s.updateVersion({ ...fromConfig(versionConfig('v2'), T0 + 1), status: 'active' }));
    expect(e.code).toBe('active_exists');
    expect(e.status).toBe(409);
    // other models are independent; same id under another model is another version
    s.insertVersion({ ...fromConfig(versionConfig('v1', 'mistral'), T0), status: 'active' });
    expect(s.listVersions({ status: ['active'] }).map((v) => `${v.model}/${v.id}`)).toEqual(['llama/v1', 'mistral/v1']);
    expect(s.listVersions({ model: 'llama' }).map((v) => v.id)).toEqual(['v1', 'v2']);
    expect(s.listVersions({ status: [] })).toEqual([]);
  });

  it('closes the open active period on the next activation and on deactivation', () => {
    s.insertVersion(fromConfig(versionConfig('v1'), T0));
    s.insertVersion(fromConfig(versionConfig('v2'), T0));
    s.recordActivation({ model: 'llama', versionId: 'v1', at: T0 + 10 });
    s.recordActivation({ model: 'llama', versionId: 'v2', at: T0 + 20, reason: 'swap' });
    s.recordDeactivation('llama', 'v2', T0 + 30);
    expect(s.activeHistory('llama').map((p) => [p.versionId, p.since, p.until])).toEqual([
      ['v2', T0 + 20, T0 + 30],
      ['v1', T0 + 10, T0 + 20],
    ]);
    expect(s.activeHistory('llama', 1)).toHaveLength(1);
  });

  it('rolls back a multi-row transaction as a whole', () => {
    expect(() =>
      s.tx(() => {
        s.insertVersion(fromConfig(versionConfig('v1'), T0));
        s.setSetting('x', 1, T0);
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(s.listVersions()).toEqual([]);
    expect(s.getSetting('x')).toBeUndefined();
  });
});

describe('routes', () => {
  let s: Store;
  beforeEach(() => {
    s = openMemoryStore();
    open.push(s);
  });

  it('compare-and-sets on the revision', () => {
    interface R extends StoredRoute {
      weights: Record<string, number>;
    }
    const r1: R = { model: 'llama', revision: 1, weights: { v1: 1 } };
    expect(s.putRoute(r1, 0)).toBe(r1);
    const conflict = caught(() => s.putRoute({ model: 'llama', revision: 1, weights: { v2: 1 } }, 0));
    expect(conflict.code).toBe('route_conflict');
    expect(conflict.status).toBe(409);
    expect(conflict.details).toEqual({ model: 'llama', expected: 0, actual: 1 });
    expect(caught(() => s.putRoute({ model: 'llama', revision: 1, weights: {} }, 1)).code).toBe('route_revision_invalid');
    s.putRoute({ model: 'llama', revision: 2, weights: { v1: 0.9, v2: 0.1 } }, 1);
    s.putRoute({ model: 'mistral', revision: 7, weights: { a: 1 } }, 0);
    expect(s.listRoutes().map((r) => [r.model, r.revision])).toEqual([
      ['llama', 2],
      ['mistral', 7],
    ]);
    expect(s.getRoute('llama')).toEqual({ model: 'llama', revision: 2, weights: { v1: 0.9, v2: 0.1 } });
    expect(s.deleteRoute('mistral')).toBe(true);
    expect(s.deleteRoute('mistral')).toBe(false);
    expect(s.getRoute('mistral')).toBeUndefined();
  });
});

describe('rollouts', () => {
  let s: Store;
  beforeEach(() => {
    s = openMemoryStore();
    open.push(s);
  });

  it('keeps one active rollout per model, with revisions and compare-and-set', () => {
    const r = s.putRollout({ id: 'r1', model: 'llama', phase: 'pending', state: { stage: 0 } }, T0);
    expect(r).toEqual({ id: 'r1', model: 'llama', phase: 'pending', state: { stage: 0 }, terminal: false, revision: 1, createdAt: T0, updatedAt: T0 });
    expect(caught(() => s.putRollout({ id: 'r2', model: 'llama', phase: 'pending', state: {} }, T0)).code).toBe('rollout_in_progress');
    s.putRollout({ id: 'm1', model: 'mistral', phase: 'progressing', state: {} }, T0 + 1);
    const r2 = s.putRollout({ id: 'r1', model: 'llama', phase: 'progressing', state: { stage: 1 } }, T0 + 5, 1);
    expect(r2).toMatchObject({ revision: 2, createdAt: T0, updatedAt: T0 + 5 });
    expect(caught(() => s.putRollout({ id: 'r1', model: 'llama', phase: 'paused', state: {} }, T0 + 6, 1)).code).toBe('rollout_conflict');
    expect(caught(() => s.putRollout({ id: 'r1', model: 'mistral', phase: 'paused', state: {} }, T0 + 6)).code).toBe('rollout_model_mismatch');
    expect(s.listActiveRollouts().map((x) => x.id)).toEqual(['r1', 'm1']);
    s.putRollout({ id: 'r1', model: 'llama', phase: 'rolled_back', state: { stage: 1 } }, T0 + 7);
    expect(s.getRollout('r1')?.terminal).toBe(true);
    expect(s.listActiveRollouts().map((x) => x.id)).toEqual(['m1']);
    // a finished rollout frees the model for the next one; explicit terminal override works too
    s.putRollout({ id: 'r2', model: 'llama', phase: 'custom-done', state: {}, terminal: true }, T0 + 8);
    s.putRollout({ id: 'r3', model: 'llama', phase: 'pending', state: {} }, T0 + 9);
    expect(s.listRollouts({ model: 'llama' }).map((x) => x.id)).toEqual(['r3', 'r2', 'r1']);
    expect(s.listRollouts({ limit: 1 }).map((x) => x.id)).toEqual(['r3']);
  });

  it('appends and tails events; unknown rollouts are refused', () => {
    s.putRollout({ id: 'r1', model: 'llama', phase: 'pending', state: null }, T0);
    const e1 = s.appendRolloutEvent({ rolloutId: 'r1', at: T0, kind: 'started' });
    const e2 = s.appendRolloutEvent({ rolloutId: 'r1', at: T0 + 1, kind: 'verdict', data: { outcome: 'pass', p: 0.41 } });
    expect(e2.seq).toBeGreaterThan(e1.seq);
    expect(s.rolloutEvents('r1', { afterSeq: e1.seq })).toEqual([e2]);
    expect(s.rolloutEvents('r1', { limit: 1 })).toEqual([e1]);
    expect(caught(() => s.appendRolloutEvent({ rolloutId: 'nope', at: T0, kind: 'x' })).code).toBe('rollout_not_found');
    expect(caught(() => s.rolloutEvents('r1', { limit: 0 })).code).toBe('invalid_limit');
  });
});

describe('GPUs and workers', () => {
  let s: Store;
  beforeEach(() => {
    s = openMemoryStore();
    open.push(s);
    s.insertVersion(fromConfig(versionConfig('v1'), T0));
    s.insertVersion(fromConfig(versionConfig('v2'), T0));
  });

  it('assigns all-or-nothing and refuses a GPU held by another version', () => {
    s.assignGpus(['0', '1'], { model: 'llama', versionId: 'v1' }, T0);
    s.assignGpus(['0', '1'], { model: 'llama', versionId: 'v1' }, T0 + 1); // idempotent
    const e = caught(() => s.assignGpus(['2', '1'], { model: 'llama', versionId: 'v2' }, T0));
    expect(e.code).toBe('gpu_in_use');
    expect(e.message).toContain('GPU 1 is held by llama/v1');
    expect(s.listGpuAssignments().map((g) => [g.gpuId, g.versionId, g.assignedAt])).toEqual([
      ['0', 'v1', T0],
      ['1', 'v1', T0],
    ]);
    expect(caught(() => s.assignGpus(['5'], { model: 'llama', versionId: 'ghost' }, T0)).code).toBe('version_not_found');
    s.assignGpus(['2', '3'], { model: 'llama', versionId: 'v2', workerId: 'w2' }, T0);
    expect(s.releaseGpusOf('llama', 'v2', 'other')).toBe(0);
    expect(s.releaseGpusOf('llama', 'v2', 'w2')).toBe(2);
    expect(s.releaseGpus(['0', '9'])).toBe(1);
    expect(s.releaseGpusOf('llama', 'v1')).toBe(1);
    expect(s.listGpuAssignments()).toEqual([]);
  });

  it('upserts, filters and deletes workers; a worker needs a known version', () => {
    const w = { id: 'w1', model: 'llama', versionId: 'v1', endpoint: 'http://127.0.0.1:1', provider: 'static', state: 'starting', gpus: [], startedAt: T0, updatedAt: T0 };
    s.upsertWorker(w);
    s.upsertWorker({ ...w, state: 'ready', updatedAt: T0 + 1 });
    s.upsertWorker({ ...w, id: 'w2', versionId: 'v2' });
    expect(s.getWorker('w1')).toEqual({ ...w, state: 'ready', updatedAt: T0 + 1 });
    expect(s.listWorkers({ versionId: 'v2' }).map((x) => x.id)).toEqual(['w2']);
    expect(s.listWorkers({ model: 'llama' })).toHaveLength(2);
    expect(caught(() => s.upsertWorker({ ...w, id: 'w3', versionId: 'ghost' })).code).toBe('version_not_found');
    expect(s.deleteWorker('w2')).toBe(true);
    expect(s.deleteWorker('w2')).toBe(false);
  });
});

describe('audit', () => {
  it('filters by since/until/actor/action/target/result, newest first, with limits and paging', () => {
    const s = openMemoryStore();
    open.push(s);
    const rows = [
      { at: T0 + 1, actor: 'alice', action: 'swap', target: 'llama', result: 'ok' as const },
      { at: T0 + 2, actor: 'bob', action: 'rollback', target: 'llama', result: 'ok' as const },
      { at: T0 + 3, actor: 'alice', action: 'retire', target: 'llama/v1', result: 'error' as const, errorCode: 'version_active' },
      { at: T0 + 4, actor: 'controller', action: 'rollback', target: 'mistral', result: 'ok' as const },
    ];
    for (const r of rows) s.appendAudit(r);
    const ids = (q: Parameters<Store['queryAudit']>[0]) => s.queryAudit(q).map((e) => e.id);
    expect(ids({})).toEqual([4, 3, 2, 1]);
    expect(ids({ actor: 'alice' })).toEqual([3, 1]);
    expect(ids({ action: 'rollback' })).toEqual([4, 2]);
    expect(ids({ target: 'llama' })).toEqual([2, 1]);
    expect(ids({ since: T0 + 2, until: T0 + 4 })).toEqual([3, 2]);
    expect(ids({ result: 'error' })).toEqual([3]);
    expect(ids({ limit: 2 })).toEqual([4, 3]);
    expect(ids({ limit: 2, beforeId: 3 })).toEqual([2, 1]);
    expect(s.queryAudit({ result: 'error' })[0]).toEqual({ id: 3, ...rows[2] });
    expect(caught(() => s.queryAudit({ limit: -1 })).code).toBe('invalid_limit');
    expect(s.pruneAudit(T0 + 3)).toBe(2);
    expect(ids({})).toEqual([4, 3]);
  });
});

describe('tokens and settings', () => {
  it('stores tokens by name with unique hashes, and JSON settings', () => {
    const s = openMemoryStore();
    open.push(s);
    s.putToken({ name: 'ops', role: 'operator', sha256: 'a'.repeat(64), createdAt: T0, source: 'config' });
    s.putToken({ name: 'ops', role: 'viewer', sha256: 'b'.repeat(64), createdAt: T0 + 1, source: 'config' });
    expect(s.getToken('ops')?.role).toBe('viewer');
    const e = caught(() => s.putToken({ name: 'other', role: 'admin', sha256: 'b'.repeat(64), createdAt: T0, source: 'api' }));
    expect(e.code).toBe('token_hash_exists');
    expect(e.message).not.toContain('b'.repeat(64));
    expect(s.listTokens().map((t) => t.name)).toEqual(['ops']);
    expect(s.deleteToken('ops')).toBe(true);
    s.setSetting('n', 1, T0);
    s.setSetting('n', [1, 2], T0 + 1);
    expect(s.getSetting<number[]>('n')).toEqual([1, 2]);
    expect(s.deleteSetting('n')).toBe(true);
    expect(s.getSetting('n')).toBeUndefined();
  });
});
