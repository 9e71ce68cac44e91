import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fromConfig } from '../../../src/domain/version.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from '../../../src/store/migrations/index.js';
import { openMemoryStore, openStore, SqliteStore } from '../../../src/store/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { versionConfig } from '../../unit/domain/version-fixture.js';
import { caught, rejected } from '../../helpers/errors.js';
import { describeStoreContract } from '../../helpers/store-contract.js';

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
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('open and migrations', () => {
  it('creates <dataDir>/glidepath.db with WAL, NORMAL sync, foreign keys and every migration', async () => {
    const s = openIn(path.join(dir, 'nested', 'data'));
    expect(s.location).toBe(path.join(dir, 'nested', 'data', 'glidepath.db'));
    expect(await s.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
    const raw = new Database(s.location, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
      const tables = (raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
      for (const t of [
        'versions',
        'version_transitions',
        'active_history',
        'routes',
        'rollouts',
        'rollout_events',
        'gpu_assignments',
        'workers',
        'audit',
        'tokens',
        'settings',
        'schema_migrations',
      ]) {
        expect(tables).toContain(t);
      }
      const applied = raw.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
      expect(applied).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    } finally {
      raw.close();
    }
    // the store's own connection settings
    const pragmas = (s as unknown as { d: { db: Database.Database } }).d.db;
    expect(pragmas.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    expect(pragmas.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(pragmas.pragma('busy_timeout', { simple: true })).toBe(5000);
  });

  it('re-opens idempotently', async () => {
    const a = openIn();
    await a.setSetting('k', { n: 1 }, T0);
    await a.close();
    const b = openIn();
    expect(await b.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
    expect(await b.getSetting('k')).toEqual({ n: 1 });
    await b.close();
    const raw = new Database(path.join(dir, 'glidepath.db'), { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get()).toEqual({ n: MIGRATIONS.length });
    raw.close();
  });

  it('applies a new migration on re-open, in order, in its own transaction', async () => {
    await openIn().close();
    const next = LATEST_SCHEMA_VERSION + 1;
    const m2 = { version: next, name: 'add_notes', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);' };
    const s = SqliteStore.open({ dataDir: dir, migrations: [...MIGRATIONS, m2] });
    open.push(s);
    expect(await s.schemaVersion()).toBe(next);
    await s.close();
    // a broken migration rolls back entirely and the store refuses to open
    const bad = { version: next + 1, name: 'broken', sql: 'CREATE TABLE half (x INTEGER); THIS IS NOT SQL;' };
    const err = caught(() => SqliteStore.open({ dataDir: dir, migrations: [...MIGRATIONS, m2, bad] }));
    expect(err.code).toBe('store_open_failed');
    const raw = new Database(path.join(dir, 'glidepath.db'), { readonly: true });
    expect(raw.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").get()).toBeUndefined();
    expect(raw.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: next });
    raw.close();
  });

  it('refuses a database from a newer glidepath', async () => {
    await openIn().close();
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

  it('migration 3 keeps the GPU assignments of a version and lets a time-shared group hold GPUs; any other holder is a version', async () => {
    const before = SqliteStore.open({ dataDir: dir, migrations: MIGRATIONS.slice(0, 2) });
    await before.insertVersion(fromConfig(versionConfig('v1'), T0));
    await before.assignGpus(['0'], { model: 'llama', versionId: 'v1', workerId: 'w1' }, T0);
    await before.close();
    const s = openIn();
    expect(await s.schemaVersion()).toBe(3);
    await s.assignGpus(['1'], { model: '@g', versionId: 'slot-0' }, T0);
    expect((await s.listGpuAssignments()).map((a) => [a.gpuId, a.model, a.versionId, a.workerId])).toEqual([
      ['0', 'llama', 'v1', 'w1'],
      ['1', '@g', 'slot-0', undefined],
    ]);
    expect((await rejected(s.assignGpus(['2'], { model: 'nope', versionId: 'v9' }, T0))).code).toBe('version_not_found');
  });

  it('refuses a non-contiguous migration list', () => {
    const err = caught(() => SqliteStore.open({ path: ':memory:', migrations: [{ version: 2, name: 'x', sql: '' }] }));
    expect(err.code).toBe('store_open_failed');
    expect(err.message).toContain('not contiguous');
  });
});

describe('persistence across close and re-open', () => {
  it('keeps versions, transitions, active history, routes, rollouts, events, GPUs, workers, audit, tokens, settings', async () => {
    const a = openIn();
    const v1 = { ...fromConfig(versionConfig('v1'), T0), status: 'active' as const, gpus: ['0', '1', '2', '3'], loadTimeMs: 812.5 };
    await a.insertVersion(v1);
    await a.appendVersionTransition({ model: 'llama', versionId: 'v1', from: 'ready', to: 'active', at: T0 + 1, actor: 'alice' });
    await a.recordActivation({ model: 'llama', versionId: 'v1', at: T0 + 1, actor: 'alice', reason: 'swap' });
    await a.putRoute({ model: 'llama', revision: 1, weights: { v1: 1 } }, 0);
    const ro = await a.putRollout({ id: 'r1', model: 'llama', phase: 'progressing', state: { stage: 2, verdicts: ['pass'] } }, T0 + 2);
    await a.appendRolloutEvent({ rolloutId: 'r1', at: T0 + 3, kind: 'stage', message: 'stage 2', data: { weight: 5 } });
    await a.assignGpus(['0', '1', '2', '3'], { model: 'llama', versionId: 'v1', workerId: 'w1' }, T0);
    await a.upsertWorker({
      id: 'w1',
      model: 'llama',
      versionId: 'v1',
      endpoint: 'http://127.0.0.1:9001',
      provider: 'sim',
      pid: 4242,
      state: 'ready',
      gpus: ['0', '1', '2', '3'],
      startedAt: T0,
      updatedAt: T0,
      info: { port: 9001 },
    });
    await a.appendAudit({ at: T0, actor: 'alice', action: 'swap', target: 'llama/v1', params: { mode: 'overlap' }, result: 'ok', durationMs: 3.5 });
    await a.putToken({ name: 'admin', role: 'admin', sha256: 'ab'.repeat(32), createdAt: T0, source: 'generated' });
    await a.setSetting('cluster', { name: 'east' }, T0);
    await a.close();

    const b = openIn();
    expect(await b.getVersion('llama', 'v1')).toEqual(v1);
    expect(await b.versionTransitions('llama', 'v1')).toEqual([
      { model: 'llama', versionId: 'v1', from: 'ready', to: 'active', at: T0 + 1, actor: 'alice', reason: undefined },
    ]);
    expect(await b.activeHistory('llama')).toEqual([{ model: 'llama', versionId: 'v1', since: T0 + 1, until: undefined, actor: 'alice', reason: 'swap' }]);
    expect(await b.getRoute('llama')).toEqual({ model: 'llama', revision: 1, weights: { v1: 1 } });
    expect(await b.listActiveRollouts()).toEqual([ro]);
    expect(await b.rolloutEvents('r1')).toEqual([{ seq: 1, rolloutId: 'r1', at: T0 + 3, kind: 'stage', message: 'stage 2', data: { weight: 5 } }]);
    expect((await b.listGpuAssignments()).map((g) => g.gpuId)).toEqual(['0', '1', '2', '3']);
    expect(await b.listWorkers({ state: 'ready' })).toEqual([expect.objectContaining({ id: 'w1', pid: 4242, info: { port: 9001 } })]);
    expect(await b.queryAudit()).toEqual([
      { id: 1, at: T0, actor: 'alice', action: 'swap', target: 'llama/v1', params: { mode: 'overlap' }, result: 'ok', durationMs: 3.5 },
    ]);
    expect(await b.getToken('admin')).toEqual({ name: 'admin', role: 'admin', sha256: 'ab'.repeat(32), createdAt: T0, source: 'generated' });
    expect(await b.getSetting('cluster')).toEqual({ name: 'east' });
  });

  it('lets a second process-like opener read committed WAL data while the first stays open', async () => {
    const writer = openIn();
    const reader = openIn();
    await writer.insertVersion(fromConfig(versionConfig('v1'), T0));
    await writer.putRoute({ model: 'llama', revision: 1, weights: { v1: 1 } }, 0);
    expect((await reader.getVersion('llama', 'v1'))?.status).toBe('registered');
    expect((await reader.getRoute('llama'))?.revision).toBe(1);
    // and the reader can write too; the writer sees it
    await reader.putRoute({ model: 'llama', revision: 2, weights: { v1: 1 } }, 1);
    expect((await writer.getRoute('llama'))?.revision).toBe(2);
    // a CAS from the stale writer view loses
    expect((await rejected(writer.putRoute({ model: 'llama', revision: 2, weights: {} }, 1))).code).toBe('route_conflict');
  });
});

describe('another process', () => {
  it('reads what this process committed while the store stays open (WAL)', async () => {
    const s = openIn();
    await s.putRoute({ model: 'llama', revision: 3, weights: { v1: 1 } }, 0);
    // a real second process with its own connection, as `glidepath status` would be
    const script = `const D = require('better-sqlite3'); const db = new D(process.argv[1], { readonly: true });
      process.stdout.write(JSON.stringify([db.pragma('journal_mode', { simple: true }), db.prepare('SELECT revision FROM routes').get()]));`;
    const out = execFileSync(process.execPath, ['-e', script, s.location], { encoding: 'utf8', cwd: process.cwd() });
    expect(JSON.parse(out)).toEqual(['wal', { revision: 3 }]);
  });
});

describeStoreContract('SQLite in memory', () => Promise.resolve(openMemoryStore()));
// a fresh file store in each test's own directory (removed after it)
let n = 0;
describeStoreContract('SQLite file', () => Promise.resolve(openStore(path.join(dir, `contract-${++n}`))));
