// The embedded Store: one SQLite file (WAL) in the data directory, via better-sqlite3, behind the
// asynchronous seam. The tables are synchronous layers over the database, one file each in sqlite/:
// db (open, migrate, transactions), versions, rollouts (and routes), fleet (GPUs, workers), admin
// (audit, tokens, settings). This file makes them the async Store: a call answers at once unless a
// transaction is open, in which case it waits for its end (one connection sees its own uncommitted
// writes, so nothing may read or write beside an open transaction); transactions run one at a time,
// in arrival order, with the calls queued between them.
import { closedError, txRefusal } from './shared.js';
import type { ActivePeriod, Version, VersionTransition } from '../domain/version.js';
import { AdminTables } from './sqlite/admin.js';
import type { SqliteOptions } from './sqlite/db.js';
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
  StoreOps,
  StoredRoute,
  StoreTx,
  TokenRecord,
  VersionFilter,
  WorkerFilter,
  WorkerRecord,
} from './types.js';

import { parse, rowToActive, rowToAudit, rowToRollout, rowToRolloutEvent, rowToTransition, rowToVersion } from './rows.js';
import type { ActiveRow, AuditRow, RolloutEventRow, RolloutRow, TransitionRow, VersionRow } from './rows.js';
import type { StoreDump } from './dump.js';

export type { SqliteOptions } from './sqlite/db.js';

/** The synchronous tables: all the SQL. Only the async store below (and the store's own tests of migrations) touch it. */
export class SqliteTables extends AdminTables {
  /** Open (creating if needed) and migrate. UnavailableError `store_open_failed` / `store_schema_too_new`. */
  static open(opts: SqliteOptions = {}): SqliteTables {
    return SqliteTables.openWith(opts, (db, location) => new SqliteTables(db, location));
  }

  /** Every record, in the order written (migrate-store). */
  dump(): StoreDump {
    const all = <R>(sql: string): R[] => this.stmt(sql).all() as R[];
    return {
      versions: all<VersionRow>('SELECT * FROM versions ORDER BY model, registered_at, id').map(rowToVersion),
      transitions: all<TransitionRow>('SELECT * FROM version_transitions ORDER BY seq').map(rowToTransition),
      active: all<ActiveRow>('SELECT * FROM active_history ORDER BY seq').map(rowToActive),
      routes: this.listRoutes(),
      rollouts: all<RolloutRow>('SELECT * FROM rollouts ORDER BY created_at, id').map(rowToRollout),
      events: all<RolloutEventRow>('SELECT * FROM rollout_events ORDER BY seq').map(rowToRolloutEvent),
      gpus: this.listGpuAssignments(),
      workers: this.listWorkers(),
      audit: all<AuditRow>('SELECT * FROM audit ORDER BY id').map(rowToAudit),
      tokens: this.listTokens(),
      settings: all<{ key: string; value: string }>('SELECT key, value FROM settings ORDER BY key').map((r) => ({
        key: r.key,
        value: parse<unknown>(r.value),
      })),
    };
  }
}

/** The data operations over the tables, each through `run` (queued behind a transaction, or inside one). */
abstract class SqliteOps implements StoreOps {
  protected abstract run<T>(f: (d: SqliteTables) => T): Promise<T>;

  getVersion(model: string, id: string): Promise<Version | undefined> {
    return this.run((d) => d.getVersion(model, id));
  }
  listVersions(filter?: VersionFilter): Promise<Version[]> {
    return this.run((d) => d.listVersions(filter));
  }
  insertVersion(v: Version): Promise<void> {
    return this.run((d) => d.insertVersion(v));
  }
  updateVersion(v: Version): Promise<void> {
    return this.run((d) => d.updateVersion(v));
  }
  appendVersionTransition(t: VersionTransition): Promise<void> {
    return this.run((d) => d.appendVersionTransition(t));
  }
  versionTransitions(model: string, id: string): Promise<VersionTransition[]> {
    return this.run((d) => d.versionTransitions(model, id));
  }
  recordActivation(a: ActivationInput): Promise<void> {
    return this.run((d) => d.recordActivation(a));
  }
  recordDeactivation(model: string, versionId: string, at: number): Promise<void> {
    return this.run((d) => d.recordDeactivation(model, versionId, at));
  }
  activeHistory(model: string, limit?: number): Promise<ActivePeriod[]> {
    return this.run((d) => d.activeHistory(model, limit));
  }
  getRoute(model: string): Promise<StoredRoute | undefined> {
    return this.run((d) => d.getRoute(model));
  }
  listRoutes(): Promise<StoredRoute[]> {
    return this.run((d) => d.listRoutes());
  }
  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): Promise<R> {
    return this.run((d) => d.putRoute(route, expectedRevision));
  }
  deleteRoute(model: string): Promise<boolean> {
    return this.run((d) => d.deleteRoute(model));
  }
  getRollout(id: string): Promise<RolloutRecord | undefined> {
    return this.run((d) => d.getRollout(id));
  }
  putRollout(r: RolloutInput, at: number, expectedRevision?: number): Promise<RolloutRecord> {
    return this.run((d) => d.putRollout(r, at, expectedRevision));
  }
  listActiveRollouts(): Promise<RolloutRecord[]> {
    return this.run((d) => d.listActiveRollouts());
  }
  listRollouts(filter?: { model?: string | undefined; limit?: number | undefined }): Promise<RolloutRecord[]> {
    return this.run((d) => d.listRollouts(filter));
  }
  appendRolloutEvent(e: RolloutEventInput): Promise<RolloutEvent> {
    return this.run((d) => d.appendRolloutEvent(e));
  }
  rolloutEvents(rolloutId: string, opts?: { afterSeq?: number | undefined; limit?: number | undefined }): Promise<RolloutEvent[]> {
    return this.run((d) => d.rolloutEvents(rolloutId, opts));
  }
  assignGpus(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string | undefined }, at: number): Promise<GpuAssignment[]> {
    return this.run((d) => d.assignGpus(gpuIds, holder, at));
  }
  releaseGpus(gpuIds: readonly string[]): Promise<number> {
    return this.run((d) => d.releaseGpus(gpuIds));
  }
  releaseGpusOf(model: string, versionId: string, workerId?: string): Promise<number> {
    return this.run((d) => d.releaseGpusOf(model, versionId, workerId));
  }
  listGpuAssignments(): Promise<GpuAssignment[]> {
    return this.run((d) => d.listGpuAssignments());
  }
  upsertWorker(w: WorkerRecord): Promise<void> {
    return this.run((d) => d.upsertWorker(w));
  }
  getWorker(id: string): Promise<WorkerRecord | undefined> {
    return this.run((d) => d.getWorker(id));
  }
  listWorkers(filter?: WorkerFilter): Promise<WorkerRecord[]> {
    return this.run((d) => d.listWorkers(filter));
  }
  deleteWorker(id: string): Promise<boolean> {
    return this.run((d) => d.deleteWorker(id));
  }
  appendAudit(e: AuditInput): Promise<AuditEntry> {
    return this.run((d) => d.appendAudit(e));
  }
  queryAudit(q?: AuditQuery): Promise<AuditEntry[]> {
    return this.run((d) => d.queryAudit(q));
  }
  pruneAudit(before: number): Promise<number> {
    return this.run((d) => d.pruneAudit(before));
  }
  putToken(t: TokenRecord): Promise<void> {
    return this.run((d) => d.putToken(t));
  }
  getToken(name: string): Promise<TokenRecord | undefined> {
    return this.run((d) => d.getToken(name));
  }
  listTokens(): Promise<TokenRecord[]> {
    return this.run((d) => d.listTokens());
  }
  deleteToken(name: string): Promise<boolean> {
    return this.run((d) => d.deleteToken(name));
  }
  getSetting<T = unknown>(key: string): Promise<T | undefined> {
    return this.run((d) => d.getSetting<T>(key));
  }
  setSetting(key: string, value: unknown, at: number): Promise<void> {
    return this.run((d) => d.setSetting(key, value, at));
  }
  deleteSetting(key: string): Promise<boolean> {
    return this.run((d) => d.deleteSetting(key));
  }
}

/** A call made now: its result, or its throw as a rejection. */
function now<T>(d: SqliteTables, f: (d: SqliteTables) => T): Promise<T> {
  return new Promise<T>((resolve) => resolve(f(d)));
}

/**
 * The handle given to a transaction's function. Calls run at once (the transaction holds the store);
 * a nested `tx` is a savepoint, and while it runs the outer handle is not to be used (its calls would
 * land inside the savepoint): such a call, or any call after the transaction ended, is refused with
 * UnavailableError `store_tx_misuse` — a programming error, loud rather than silently non-atomic.
 */
class SqliteTx extends SqliteOps implements StoreTx {
  private open = true;
  private nested = false;

  constructor(
    private readonly d: SqliteTables,
    private readonly depth: number,
  ) {
    super();
  }

  protected run<T>(f: (d: SqliteTables) => T): Promise<T> {
    const refused = this.refusal();
    return refused ? Promise.reject(refused) : now(this.d, f);
  }

  private refusal(): Error | undefined {
    return txRefusal(this.open, this.nested);
  }

  async tx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T> {
    const refused = this.refusal();
    if (refused) throw refused;
    const name = `gp_tx_${this.depth + 1}`;
    this.d.txStep({ savepoint: name });
    this.nested = true;
    const inner = new SqliteTx(this.d, this.depth + 1);
    try {
      const out = await fn(inner);
      inner.end();
      this.d.txStep({ release: name });
      return out;
    } catch (e) {
      inner.end();
      this.d.txStep({ rollbackTo: name });
      throw e;
    } finally {
      this.nested = false;
    }
  }

  end(): void {
    this.open = false;
  }
}

export class SqliteStore extends SqliteOps implements Store {
  /** A transaction is open: calls and transactions queue until it ends. */
  private busy = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly queue: Array<() => void> = [];

  private constructor(private readonly d: SqliteTables) {
    super();
  }

  /** Open (creating if needed) and migrate. UnavailableError `store_open_failed` / `store_schema_too_new`. */
  static open(opts: SqliteOptions = {}): SqliteStore {
    return new SqliteStore(SqliteTables.open(opts));
  }

  get location(): string {
    return this.d.location;
  }

  schemaVersion(): Promise<number> {
    return this.run((d) => d.schemaVersion());
  }

  /** Every record (migrate-store). */
  dump(): Promise<StoreDump> {
    return this.run((d) => d.dump());
  }

  protected run<T>(f: (d: SqliteTables) => T): Promise<T> {
    if (this.closed) return Promise.reject(closedError(this.location));
    if (!this.busy) return now(this.d, f);
    return new Promise<T>((resolve, reject) => {
      this.queue.push(() => {
        if (this.closed) reject(closedError(this.location));
        else now(this.d, f).then(resolve, reject);
      });
    });
  }

  tx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(closedError(this.location));
    return new Promise<T>((resolve, reject) => {
      const start = (): void => {
        if (this.closed) return reject(closedError(this.location));
        this.busy = true;
        this.runTx(fn)
          .then(resolve, reject)
          .finally(() => {
            this.busy = false;
            this.drain();
          });
      };
      if (this.busy) this.queue.push(start);
      else start();
    });
  }

  private async runTx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T> {
    this.d.txStep('begin');
    const t = new SqliteTx(this.d, 0);
    try {
      const out = await fn(t);
      t.end();
      this.d.txStep('commit');
      return out;
    } catch (e) {
      t.end();
      if (this.d.inTransaction) this.d.txStep('rollback');
      throw e;
    }
  }

  /** After a transaction: run what queued behind it, in order, until the next transaction takes the store. */
  private drain(): void {
    while (!this.busy && this.queue.length > 0) this.queue.shift()?.();
  }

  /** Closes after the transactions and calls queued before it; what comes after is refused (`store_closed`). */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      const shut = (): void => {
        this.closed = true;
        this.d.close();
        resolve();
      };
      if (this.busy) this.queue.push(shut);
      else shut();
    });
    return this.closing;
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
