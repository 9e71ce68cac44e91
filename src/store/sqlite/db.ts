// The SQLite database under the Store: opening (WAL, pragmas), schema migrations, prepared statements, immediate transactions, errors mapped.
//
// Only src/store touches the database. Every multi-row change runs in one BEGIN IMMEDIATE
// transaction; schema migrations are applied in order at open, one transaction each.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';
import { DEFAULTS } from '../../defaults.js';
import { GlidepathError, UnavailableError } from '../../errors.js';
import { MIGRATIONS } from '../migrations/index.js';
import type { Migration } from '../migrations/index.js';

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

/** The opened database. The Store's areas (versions, rollouts, fleet, admin) are layers over it, in sqlite/*.ts. */
export class SqlDb {
  readonly location: string;
  protected readonly db: Db;
  private readonly stmts = new Map<string, Statement>();

  protected constructor(db: Db, location: string) {
    this.db = db;
    this.location = location;
  }

  /**
   * Open (creating if needed) and migrate, as the layer `make` builds. UnavailableError
   * `store_open_failed` / `store_schema_too_new`.
   */
  static openWith<T extends SqlDb>(opts: SqliteOptions, make: (db: Db, location: string) => T): T {
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
    const store = make(db, location);
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

  protected migrate(migrations: readonly Migration[]): void {
    migrations.forEach((m, i) => {
      if (m.version !== i + 1) throw new Error(`migration list is not contiguous: position ${i + 1} has version ${m.version}`);
    });
    const latest = migrations.length;
    this.tx(() => {
      this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
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

  protected stmt(sql: string): Statement {
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

  /** A synchronous write transaction (BEGIN IMMEDIATE; a savepoint when one is open). A throw rolls back. */
  protected tx<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn).immediate();
    } catch (e) {
      throw mapSqliteError(e, this.location);
    }
  }

  /**
   * One step of an asynchronous transaction (the async SqliteStore drives them): `begin` takes the
   * write lock (BEGIN IMMEDIATE, so two processes never deadlock upgrading a read lock); savepoints
   * nest inside it. Errors mapped like every other call.
   */
  txStep(step: 'begin' | 'commit' | 'rollback' | { savepoint: string } | { release: string } | { rollbackTo: string }): void {
    const sql =
      step === 'begin'
        ? 'BEGIN IMMEDIATE'
        : step === 'commit'
          ? 'COMMIT'
          : step === 'rollback'
            ? 'ROLLBACK'
            : 'savepoint' in step
              ? `SAVEPOINT ${step.savepoint}`
              : 'release' in step
                ? `RELEASE ${step.release}`
                : `ROLLBACK TO ${step.rollbackTo}; RELEASE ${step.rollbackTo}`;
    try {
      this.db.exec(sql);
    } catch (e) {
      throw mapSqliteError(e, this.location);
    }
  }

  get inTransaction(): boolean {
    return this.db.inTransaction;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
