// The embedded Store: one SQLite file (WAL) in the data directory, via better-sqlite3.
//
// Only src/store touches the database. Every multi-row change runs in one BEGIN IMMEDIATE
// transaction; schema migrations are applied in order at open, one transaction each.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, ConflictError, GlidepathError, NotFoundError, UnavailableError } from '../errors.js';
import type { ActivePeriod, Version, VersionTransition } from '../domain/version.js';
import { MIGRATIONS } from './migrations/index.js';
import type { Migration } from './migrations/index.js';
import {
  json,
  parse,
  rowToActive,
  rowToAudit,
  rowToGpu,
  rowToRollout,
  rowToRolloutEvent,
  rowToToken,
  rowToTransition,
  rowToVersion,
  rowToWorker,
  versionToRow,
  workerToRow,
} from './rows.js';
import type {
  ActiveRow,
  AuditRow,
  GpuRow,
  RolloutEventRow,
  RolloutRow,
  TokenRow,
  TransitionRow,
  VersionRow,
  WorkerRow,
} from './rows.js';
import { TERMINAL_ROLLOUT_PHASES } from './types.js';
import type {
  ActivationInput,
  AuditEntry,
  AuditInput,
  AuditQuery,
  GpuAssignment,
  RolloutEvent,
  RolloutEventInput,
  RolloutInput,
  RolloutRecord,
  Store,
  StoredRoute,
  TokenRecord,
  VersionFilter,
  WorkerFilter,
  WorkerRecord,
} from './types.js';

export interface SqliteOptions {
  /** Data directory: the database is `<dataDir>/glidepath.db`; the directory is created (0700). */
  dataDir?: string | undefined;
  /** Explicit file path, or `:memory:` (tests). Takes precedence over dataDir. */
  path?: string | undefined;
  busyTimeoutMs?: number | undefined;
  /** Migrations to apply (tests inject extra ones); default MIGRATIONS. */
  migrations?: readonly Migration[] | undefined;
}

function isSqliteError(e: unknown): e is Error & { code: string } {
  if (!(e instanceof Error)) return false;
  const code = (e as Error & { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_');
}

/** SQLite failures the caller can act on, as GlidepathErrors; anything else is rethrown unchanged. */
function mapSqliteError(e: unknown, location: string): unknown {
  if (e instanceof GlidepathError || !isSqliteError(e)) return e;
  if (e.code === 'SQLITE_BUSY' || e.code.startsWith('SQLITE_BUSY_') || e.code === 'SQLITE_LOCKED') {
    return new UnavailableError('store_busy', `store ${location} is locked by another writer; try again`, {
      retryAfterS: 1,
      cause: e,
    });
  }
  if (e.code === 'SQLITE_FULL' || e.code === 'SQLITE_READONLY' || e.code.startsWith('SQLITE_IOERR') || e.code === 'SQLITE_CORRUPT') {
    return new UnavailableError('store_unavailable', `store ${location}: ${e.message} (${e.code})`, { cause: e });
  }
  return e;
}

function clampLimit(limit: number | undefined, def: number, max: number): number {
  if (limit === undefined) return def;
  if (!Number.isInteger(limit) || limit < 1) throw new BadRequestError('invalid_limit', `limit must be a positive integer, got ${limit}`);
  return Math.min(limit, max);
}

export class SqliteStore implements Store {
  readonly location: string;
  private readonly db: Db;
  private readonly stmts = new Map<string, Statement>();

  private constructor(db: Db, location: string) {
    this.db = db;
    this.location = location;
  }

  /** Open (creating if needed) and migrate. UnavailableError `store_open_failed` / `store_schema_too_new`. */
  static open(opts: SqliteOptions = {}): SqliteStore {
    let location: string;
    if (opts.path !== undefined) {
      location = opts.path;
    } else {
      const dir = opts.dataDir ?? DEFAULTS.server.dataDir;
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
      } catch (e) {
        throw new UnavailableError('store_open_failed', `cannot create data directory ${dir}: ${(e as Error).message}`, { cause: e });
      }
      location = path.join(dir, DEFAULTS.store.fileName);
    }
    let db: Db;
    try {
      db = new Database(location);
    } catch (e) {
      throw new UnavailableError('store_open_failed', `cannot open store ${location}: ${(e as Error).message}`, { cause: e });
    }
    const store = new SqliteStore(db, location);
    try {
      db.pragma(`busy_timeout = ${Math.trunc(opts.busyTimeoutMs ?? DEFAULTS.store.busyTimeoutMs)}`);
      // WAL: readers never block the writer and a second process (CLI, tests) can read while
      // `glidepath up` writes. NORMAL: a commit is durable after the next checkpoint; a power cut
      // may lose the last transactions, never corrupt the file.
      if (location !== ':memory:') db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('foreign_keys = ON');
      store.migrate(opts.migrations ?? MIGRATIONS);
    } catch (e) {
      db.close();
      if (e instanceof GlidepathError) throw e;
      throw new UnavailableError('store_open_failed', `cannot open store ${location}: ${(e as Error).message}`, { cause: e });
    }
    return store;
  }

  private migrate(migrations: readonly Migration[]): void {
    migrations.forEach((m, i) => {
      if (m.version !== i + 1) throw new Error(`migration list is not contiguous: position ${i + 1} has version ${m.version}`);
    });
    const latest = migrations.length;
    this.tx(() => {
      this.db.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
      );
    });
    const current = this.schemaVersion();
    if (current > latest) {
      throw new UnavailableError(
        'store_schema_too_new',
        `store ${this.location} has schema version ${current}, but this glidepath knows only up to ${latest}: ` +
          'run a newer glidepath, or point server.data_dir at another directory',
        { details: { schemaVersion: current, supported: latest } },
      );
    }
    for (const m of migrations) {
      if (m.version <= current) continue;
      this.tx(() => {
        // re-check inside the write lock: another process may have migrated meanwhile
        if (this.schemaVersion() >= m.version) return;
        this.db.exec(m.sql);
        this.stmt('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      });
    }
  }

  private stmt(sql: string): Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  schemaVersion(): number {
    const r = this.db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number };
    return r.v;
  }

  tx<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn).immediate();
    } catch (e) {
      throw mapSqliteError(e, this.location);
    }
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  // ---- versions ---------------------------------------------------------------------------------------

  getVersion(model: string, id: string): Version | undefined {
    const r = this.stmt('SELECT * FROM versions WHERE model = ? AND id = ?').get(model, id) as VersionRow | undefined;
    return r ? rowToVersion(r) : undefined;
  }

  listVersions(filter: VersionFilter = {}): Version[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.model !== undefined) {
      where.push('model = ?');
      args.push(filter.model);
    }
    if (filter.status !== undefined) {
      if (filter.status.length === 0) return [];
      where.push(`status IN (${filter.status.map(() => '?').join(',')})`);
      args.push(...filter.status);
    }
    const sql = `SELECT * FROM versions ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY model, registered_at, id`;
    return (this.stmt(sql).all(...args) as VersionRow[]).map(rowToVersion);
  }

  private checkOneActive(v: Version): void {
    if (v.status !== 'active') return;
    const other = this.stmt("SELECT id FROM versions WHERE model = ? AND status = 'active' AND id <> ?").get(v.model, v.id) as
      | { id: string }
      | undefined;
    if (other) {
      throw new ConflictError('active_exists', `model ${v.model} already has an active version (${other.id}); swap instead`, {
        details: { model: v.model, active: other.id, version: v.id },
      });
    }
  }

  insertVersion(v: Version): void {
    this.tx(() => {
      if (this.getVersion(v.model, v.id)) {
        throw new ConflictError('version_exists', `version ${v.model}/${v.id} is already registered`, {
          details: { model: v.model, version: v.id },
        });
      }
      this.checkOneActive(v);
      const r = versionToRow(v);
      this.stmt(
        `INSERT INTO versions (model, id, status, card_checksum, weight_hash, base_model, quantization, tp, spec, warmup_tokens,
           registered_at, updated_at, loaded_at, load_time_ms, activated_at, deactivated_at, gpus, health, rollback_eligible,
           rollback_blocked, failure)
         VALUES (@model, @id, @status, @card_checksum, @weight_hash, @base_model, @quantization, @tp, @spec, @warmup_tokens,
           @registered_at, @updated_at, @loaded_at, @load_time_ms, @activated_at, @deactivated_at, @gpus, @health,
           @rollback_eligible, @rollback_blocked, @failure)`,
      ).run(r);
    });
  }

  updateVersion(v: Version): void {
    this.tx(() => {
      this.checkOneActive(v);
      const r = versionToRow(v);
      const res = this.stmt(
        `UPDATE versions SET status = @status, card_checksum = @card_checksum, weight_hash = @weight_hash,
           base_model = @base_model, quantization = @quantization, tp = @tp, spec = @spec, warmup_tokens = @warmup_tokens,
           registered_at = @registered_at, updated_at = @updated_at, loaded_at = @loaded_at, load_time_ms = @load_time_ms,
           activated_at = @activated_at, deactivated_at = @deactivated_at, gpus = @gpus, health = @health,
           rollback_eligible = @rollback_eligible, rollback_blocked = @rollback_blocked, failure = @failure
         WHERE model = @model AND id = @id`,
      ).run(r);
      if (res.changes === 0) {
        throw new NotFoundError('version_not_found', `no version ${v.model}/${v.id}`, { details: { model: v.model, version: v.id } });
      }
    });
  }

  appendVersionTransition(t: VersionTransition): void {
    this.tx(() => {
      this.stmt(
        'INSERT INTO version_transitions (model, version_id, from_status, to_status, at, actor, reason) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ).run(t.model, t.versionId, t.from, t.to, t.at, t.actor ?? null, t.reason ?? null);
    });
  }

  versionTransitions(model: string, id: string): VersionTransition[] {
    const rows = this.stmt('SELECT * FROM version_transitions WHERE model = ? AND version_id = ? ORDER BY seq').all(model, id);
    return (rows as TransitionRow[]).map(rowToTransition);
  }

  recordActivation(a: ActivationInput): void {
    this.tx(() => {
      this.stmt('UPDATE active_history SET until = ? WHERE model = ? AND until IS NULL').run(a.at, a.model);
      this.stmt('INSERT INTO active_history (model, version_id, since, actor, reason) VALUES (?, ?, ?, ?, ?)').run(
        a.model,
        a.versionId,
        a.at,
        a.actor ?? null,
        a.reason ?? null,
      );
    });
  }

  recordDeactivation(model: string, versionId: string, at: number): void {
    this.tx(() => {
      this.stmt('UPDATE active_history SET until = ? WHERE model = ? AND version_id = ? AND until IS NULL').run(at, model, versionId);
    });
  }

  activeHistory(model: string, limit?: number): ActivePeriod[] {
    const n = clampLimit(limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
    const rows = this.stmt('SELECT * FROM active_history WHERE model = ? ORDER BY seq DESC LIMIT ?').all(model, n);
    return (rows as ActiveRow[]).map(rowToActive);
  }

  // ---- routes -------------------------------------------------------------------------------------------

  getRoute(model: string): StoredRoute | undefined {
    const r = this.stmt('SELECT route FROM routes WHERE model = ?').get(model) as { route: string } | undefined;
    return r ? parse<StoredRoute>(r.route) : undefined;
  }

  listRoutes(): StoredRoute[] {
    const rows = this.stmt('SELECT route FROM routes ORDER BY model').all() as { route: string }[];
    return rows.map((r) => parse<StoredRoute>(r.route) as StoredRoute);
  }

  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): R {
    if (!Number.isInteger(route.revision) || route.revision <= expectedRevision) {
      throw new BadRequestError(
        'route_revision_invalid',
        `route for ${route.model}: revision ${route.revision} must be an integer greater than the expected ${expectedRevision}`,
      );
    }
    const body = json(route);
    return this.tx(() => {
      const cur = this.stmt('SELECT revision FROM routes WHERE model = ?').get(route.model) as { revision: number } | undefined;
      const actual = cur?.revision ?? 0;
      if (actual !== expectedRevision) {
        throw new ConflictError(
          'route_conflict',
          `route for ${route.model} is at revision ${actual}, expected ${expectedRevision}: it changed meanwhile; re-read and retry`,
          { details: { model: route.model, expected: expectedRevision, actual } },
        );
      }
      this.stmt(
        `INSERT INTO routes (model, revision, route, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (model) DO UPDATE SET revision = excluded.revision, route = excluded.route, updated_at = excluded.updated_at`,
      ).run(route.model, route.revision, body, Date.now());
      return route;
    });
  }

  deleteRoute(model: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM routes WHERE model = ?').run(model).changes > 0);
  }

  // ---- rollouts -----------------------------------------------------------------------------------------

  getRollout(id: string): RolloutRecord | undefined {
    const r = this.stmt('SELECT * FROM rollouts WHERE id = ?').get(id) as RolloutRow | undefined;
    return r ? rowToRollout(r) : undefined;
  }

  putRollout(r: RolloutInput, at: number, expectedRevision?: number): RolloutRecord {
    const terminal = r.terminal ?? TERMINAL_ROLLOUT_PHASES.includes(r.phase);
    const state = json(r.state);
    return this.tx(() => {
      const cur = this.getRollout(r.id);
      const actual = cur?.revision ?? 0;
      if (expectedRevision !== undefined && actual !== expectedRevision) {
        throw new ConflictError('rollout_conflict', `rollout ${r.id} is at revision ${actual}, expected ${expectedRevision}`, {
          details: { rollout: r.id, expected: expectedRevision, actual },
        });
      }
      if (cur && cur.model !== r.model) {
        throw new BadRequestError('rollout_model_mismatch', `rollout ${r.id} belongs to model ${cur.model}, not ${r.model}`);
      }
      if (!terminal) {
        const other = this.stmt('SELECT id FROM rollouts WHERE model = ? AND terminal = 0 AND id <> ?').get(r.model, r.id) as
          | { id: string }
          | undefined;
        if (other) {
          throw new ConflictError('rollout_in_progress', `model ${r.model} already has a rollout in progress (${other.id})`, {
            details: { model: r.model, rollout: other.id },
          });
        }
      }
      const rec: RolloutRecord = {
        id: r.id,
        model: r.model,
        phase: r.phase,
        state: parse<unknown>(state) ?? null,
        terminal,
        revision: actual + 1,
        createdAt: cur?.createdAt ?? at,
        updatedAt: at,
      };
      this.stmt(
        `INSERT INTO rollouts (id, model, phase, terminal, revision, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET phase = excluded.phase, terminal = excluded.terminal, revision = excluded.revision,
           state = excluded.state, updated_at = excluded.updated_at`,
      ).run(rec.id, rec.model, rec.phase, terminal ? 1 : 0, rec.revision, state, rec.createdAt, rec.updatedAt);
      return rec;
    });
  }

  listActiveRollouts(): RolloutRecord[] {
    const rows = this.stmt('SELECT * FROM rollouts WHERE terminal = 0 ORDER BY created_at, id').all() as RolloutRow[];
    return rows.map(rowToRollout);
  }

  listRollouts(filter: { model?: string | undefined; limit?: number | undefined } = {}): RolloutRecord[] {
    const n = clampLimit(filter.limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
    const rows = (
      filter.model === undefined
        ? this.stmt('SELECT * FROM rollouts ORDER BY created_at DESC, id DESC LIMIT ?').all(n)
        : this.stmt('SELECT * FROM rollouts WHERE model = ? ORDER BY created_at DESC, id DESC LIMIT ?').all(filter.model, n)
    ) as RolloutRow[];
    return rows.map(rowToRollout);
  }

  appendRolloutEvent(e: RolloutEventInput): RolloutEvent {
    return this.tx(() => {
      if (!this.stmt('SELECT 1 FROM rollouts WHERE id = ?').get(e.rolloutId)) {
        throw new NotFoundError('rollout_not_found', `no rollout ${e.rolloutId}`);
      }
      const res = this.stmt('INSERT INTO rollout_events (rollout_id, at, kind, message, data) VALUES (?, ?, ?, ?, ?)').run(
        e.rolloutId,
        e.at,
        e.kind,
        e.message ?? null,
        e.data === undefined ? null : json(e.data),
      );
      const out: RolloutEvent = { ...e, seq: Number(res.lastInsertRowid) };
      return out;
    });
  }

  rolloutEvents(rolloutId: string, opts: { afterSeq?: number | undefined; limit?: number | undefined } = {}): RolloutEvent[] {
    const n = clampLimit(opts.limit, DEFAULTS.store.rolloutEventsMaxLimit, DEFAULTS.store.rolloutEventsMaxLimit);
    const rows = this.stmt('SELECT * FROM rollout_events WHERE rollout_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(
      rolloutId,
      opts.afterSeq ?? 0,
      n,
    );
    return (rows as RolloutEventRow[]).map(rowToRolloutEvent);
  }

  // ---- GPU assignments ------------------------------------------------------------------------------------

  assignGpus(
    gpuIds: readonly string[],
    holder: { model: string; versionId: string; workerId?: string | undefined },
    at: number,
  ): GpuAssignment[] {
    return this.tx(() => {
      if (!this.getVersion(holder.model, holder.versionId)) {
        throw new NotFoundError('version_not_found', `no version ${holder.model}/${holder.versionId}`);
      }
      const out: GpuAssignment[] = [];
      for (const gpuId of gpuIds) {
        const cur = this.stmt('SELECT * FROM gpu_assignments WHERE gpu_id = ?').get(gpuId) as GpuRow | undefined;
        if (
          cur &&
          (cur.model !== holder.model || cur.version_id !== holder.versionId || (cur.worker_id ?? undefined) !== holder.workerId)
        ) {
          throw new ConflictError(
            'gpu_in_use',
            `GPU ${gpuId} is held by ${cur.model}/${cur.version_id}${cur.worker_id ? ` (worker ${cur.worker_id})` : ''}`,
            { details: { gpu: gpuId, model: cur.model, version: cur.version_id, worker: cur.worker_id } },
          );
        }
        this.stmt(
          `INSERT INTO gpu_assignments (gpu_id, model, version_id, worker_id, assigned_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (gpu_id) DO NOTHING`,
        ).run(gpuId, holder.model, holder.versionId, holder.workerId ?? null, at);
        out.push(rowToGpu(this.stmt('SELECT * FROM gpu_assignments WHERE gpu_id = ?').get(gpuId) as GpuRow));
      }
      return out;
    });
  }

  releaseGpus(gpuIds: readonly string[]): number {
    return this.tx(() => {
      let n = 0;
      for (const id of gpuIds) n += this.stmt('DELETE FROM gpu_assignments WHERE gpu_id = ?').run(id).changes;
      return n;
    });
  }

  releaseGpusOf(model: string, versionId: string, workerId?: string): number {
    return this.tx(() =>
      workerId === undefined
        ? this.stmt('DELETE FROM gpu_assignments WHERE model = ? AND version_id = ?').run(model, versionId).changes
        : this.stmt('DELETE FROM gpu_assignments WHERE model = ? AND version_id = ? AND worker_id = ?').run(model, versionId, workerId)
            .changes,
    );
  }

  listGpuAssignments(): GpuAssignment[] {
    return (this.stmt('SELECT * FROM gpu_assignments ORDER BY gpu_id').all() as GpuRow[]).map(rowToGpu);
  }

  // ---- workers -----------------------------------------------------------------------------------------------

  upsertWorker(w: WorkerRecord): void {
    this.tx(() => {
      if (!this.getVersion(w.model, w.versionId)) {
        throw new NotFoundError('version_not_found', `worker ${w.id}: no version ${w.model}/${w.versionId}`);
      }
      this.stmt(
        `INSERT INTO workers (id, model, version_id, endpoint, provider, pid, state, gpus, started_at, updated_at, info)
         VALUES (@id, @model, @version_id, @endpoint, @provider, @pid, @state, @gpus, @started_at, @updated_at, @info)
         ON CONFLICT (id) DO UPDATE SET model = excluded.model, version_id = excluded.version_id, endpoint = excluded.endpoint,
           provider = excluded.provider, pid = excluded.pid, state = excluded.state, gpus = excluded.gpus,
           started_at = excluded.started_at, updated_at = excluded.updated_at, info = excluded.info`,
      ).run(workerToRow(w));
    });
  }

  getWorker(id: string): WorkerRecord | undefined {
    const r = this.stmt('SELECT * FROM workers WHERE id = ?').get(id) as WorkerRow | undefined;
    return r ? rowToWorker(r) : undefined;
  }

  listWorkers(filter: WorkerFilter = {}): WorkerRecord[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.model !== undefined) {
      where.push('model = ?');
      args.push(filter.model);
    }
    if (filter.versionId !== undefined) {
      where.push('version_id = ?');
      args.push(filter.versionId);
    }
    if (filter.state !== undefined) {
      where.push('state = ?');
      args.push(filter.state);
    }
    const sql = `SELECT * FROM workers ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY model, version_id, id`;
    return (this.stmt(sql).all(...args) as WorkerRow[]).map(rowToWorker);
  }

  deleteWorker(id: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM workers WHERE id = ?').run(id).changes > 0);
  }

  // ---- audit ---------------------------------------------------------------------------------------------------

  appendAudit(e: AuditInput): AuditEntry {
    return this.tx(() => {
      const res = this.stmt(
        'INSERT INTO audit (at, actor, action, target, params, result, error_code, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(
        e.at,
        e.actor,
        e.action,
        e.target ?? null,
        e.params === undefined ? null : json(e.params),
        e.result,
        e.errorCode ?? null,
        e.durationMs ?? null,
      );
      const out: AuditEntry = { ...e, id: Number(res.lastInsertRowid) };
      return out;
    });
  }

  queryAudit(q: AuditQuery = {}): AuditEntry[] {
    const where: string[] = [];
    const args: unknown[] = [];
    const add = (cond: string, v: unknown) => {
      where.push(cond);
      args.push(v);
    };
    if (q.since !== undefined) add('at >= ?', q.since);
    if (q.until !== undefined) add('at < ?', q.until);
    if (q.actor !== undefined) add('actor = ?', q.actor);
    if (q.action !== undefined) add('action = ?', q.action);
    if (q.target !== undefined) add('target = ?', q.target);
    if (q.result !== undefined) add('result = ?', q.result);
    if (q.beforeId !== undefined) add('id < ?', q.beforeId);
    const n = clampLimit(q.limit, DEFAULTS.store.auditQueryLimit, DEFAULTS.store.auditQueryMaxLimit);
    const sql = `SELECT * FROM audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY at DESC, id DESC LIMIT ?`;
    return (this.stmt(sql).all(...args, n) as AuditRow[]).map(rowToAudit);
  }

  pruneAudit(before: number): number {
    return this.tx(() => this.stmt('DELETE FROM audit WHERE at < ?').run(before).changes);
  }

  // ---- tokens --------------------------------------------------------------------------------------------------

  putToken(t: TokenRecord): void {
    this.tx(() => {
      const other = this.stmt('SELECT name FROM tokens WHERE sha256 = ? AND name <> ?').get(t.sha256, t.name) as
        | { name: string }
        | undefined;
      if (other) {
        throw new ConflictError('token_hash_exists', `token ${t.name} has the same secret as token ${other.name}`, {
          details: { token: t.name, other: other.name },
        });
      }
      this.stmt(
        `INSERT INTO tokens (name, role, sha256, created_at, source) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET role = excluded.role, sha256 = excluded.sha256, created_at = excluded.created_at,
           source = excluded.source`,
      ).run(t.name, t.role, t.sha256, t.createdAt, t.source);
    });
  }

  getToken(name: string): TokenRecord | undefined {
    const r = this.stmt('SELECT * FROM tokens WHERE name = ?').get(name) as TokenRow | undefined;
    return r ? rowToToken(r) : undefined;
  }

  listTokens(): TokenRecord[] {
    return (this.stmt('SELECT * FROM tokens ORDER BY name').all() as TokenRow[]).map(rowToToken);
  }

  deleteToken(name: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM tokens WHERE name = ?').run(name).changes > 0);
  }

  // ---- settings ------------------------------------------------------------------------------------------------

  getSetting<T = unknown>(key: string): T | undefined {
    const r = this.stmt('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
    return r ? parse<T>(r.value) : undefined;
  }

  setSetting(key: string, value: unknown, at: number): void {
    this.tx(() => {
      this.stmt(
        `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ).run(key, json(value), at);
    });
  }

  deleteSetting(key: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM settings WHERE key = ?').run(key).changes > 0);
  }
}

/** Open the store in a data directory (`<dataDir>/glidepath.db`). */
export function openStore(dataDir: string, opts: Omit<SqliteOptions, 'dataDir' | 'path'> = {}): SqliteStore {
  return SqliteStore.open({ ...opts, dataDir });
}

/** A private in-memory store (same code, same schema): for tests and `--dry-run`s. */
export function openMemoryStore(): SqliteStore {
  return SqliteStore.open({ path: ':memory:' });
}
