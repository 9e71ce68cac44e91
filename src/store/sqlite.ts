// The embedded Store: one SQLite file (WAL) in the data directory, via better-sqlite3. Its areas are
// layers over the database, one file each in sqlite/: db (open, migrate, transactions), versions,
// rollouts (and routes), fleet (GPUs, workers), admin (audit, tokens, settings).
import { AdminTables } from './sqlite/admin.js';
import type { SqliteOptions } from './sqlite/db.js';
import type { Store } from './types.js';

export type { SqliteOptions } from './sqlite/db.js';

export class SqliteStore extends AdminTables implements Store {
  /** Open (creating if needed) and migrate. UnavailableError `store_open_failed` / `store_schema_too_new`. */
  static open(opts: SqliteOptions = {}): SqliteStore {
    return SqliteStore.openWith(opts, (db, location) => new SqliteStore(db, location));
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
