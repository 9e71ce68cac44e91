// The key-value Store (the cluster store, over etcd): the tables of kv/*.ts made into the asynchronous
// seam. Every call and every transaction runs one at a time in this process, in arrival order (so a call
// made while a transaction is open waits for its end, as with SQLite); across processes they are
// optimistic: a transaction reads one snapshot, buffers its writes, and commits only if nothing was
// committed since — otherwise it runs again from the start, a bounded number of times.
import { UnavailableError } from '../../errors.js';
import { DEFAULTS } from '../../defaults.js';
import { closedError, txRefusal } from '../shared.js';
import type { Store, StoreTx } from '../types.js';
import type { KvBackend } from './backend.js';
import { getJson, K, putJson } from './keys.js';
import { KvLayer } from './layer.js';
import type { KvIo } from './layer.js';
import { KvTables, pruneAuditSome } from './tables.js';
import { assertEmpty, dumpKv, restoreWrites } from './dump.js';
import type { StoreDump } from '../dump.js';

/** The key layout's version (keys.ts); a store written by a newer layout is refused. */
export const KV_SCHEMA_VERSION = 1;

/** A transaction's handle; a nested `tx` is a child layer, dropped if it fails. */
class KvTx extends KvTables implements StoreTx {
  private open = true;
  private nested = false;

  constructor(private readonly layer: KvLayer) {
    super();
  }

  protected call<T>(f: (io: KvIo) => Promise<T>): Promise<T> {
    const refused = txRefusal(this.open, this.nested);
    return refused ? Promise.reject(refused) : f(this.layer);
  }

  async tx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T> {
    const refused = txRefusal(this.open, this.nested);
    if (refused) throw refused;
    this.nested = true;
    const layer = this.layer.child();
    const inner = new KvTx(layer);
    try {
      const out = await fn(inner);
      layer.mergeIntoParent();
      return out;
    } finally {
      inner.end();
      this.nested = false;
    }
  }

  end(): void {
    this.open = false;
  }
}

export interface KvStoreOptions {
  /** How many times a transaction runs before giving up on conflicting commits (UnavailableError `store_busy`). */
  attempts?: number | undefined;
}

export class KvStore extends KvTables implements Store {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly attempts: number;

  private constructor(
    private readonly kv: KvBackend,
    opts: KvStoreOptions,
  ) {
    super();
    this.attempts = opts.attempts ?? DEFAULTS.store.kvTxAttempts;
  }

  /** Check the layout version (writing it into an empty store). UnavailableError `store_schema_too_new`. */
  static async open(kv: KvBackend, opts: KvStoreOptions = {}): Promise<KvStore> {
    const s = new KvStore(kv, opts);
    try {
      await s.serial(() =>
        s.attempt(async (io) => {
          const v = await getJson<number>(io, K.schema);
          if (v === undefined) putJson(io, K.schema, KV_SCHEMA_VERSION);
          else if (v > KV_SCHEMA_VERSION)
            throw new UnavailableError('store_schema_too_new', `store ${kv.location} has key layout ${v}; this glidepath knows up to ${KV_SCHEMA_VERSION}`);
        }),
      );
    } catch (err) {
      await kv.close();
      throw err;
    }
    return s;
  }

  get location(): string {
    return this.kv.location;
  }

  async schemaVersion(): Promise<number> {
    return (await this.call((io) => getJson<number>(io, K.schema))) ?? KV_SCHEMA_VERSION;
  }

  protected call<T>(f: (io: KvIo) => Promise<T>): Promise<T> {
    return this.serial(() => this.attempt(f));
  }

  tx<T>(fn: (t: StoreTx) => Promise<T>): Promise<T> {
    return this.serial(() =>
      this.attempt(async (io) => {
        const t = new KvTx(io);
        try {
          return await fn(t);
        } finally {
          t.end();
        }
      }),
    );
  }

  /** Deletes in batches that fit one commit, each atomic. */
  override async pruneAudit(before: number): Promise<number> {
    const batch = Math.max(1, this.kv.maxWrites - 1);
    let total = 0;
    for (;;) {
      const n = await this.call((io) => pruneAuditSome(io, before, batch));
      total += n;
      if (n < batch) return total;
    }
  }

  /** Every record, from one snapshot (migrate-store). */
  dump(): Promise<StoreDump> {
    return this.call((io) => dumpKv(io));
  }

  /**
   * Write a dump into this store, which must be empty (ConflictError `store_not_empty`): in commits of at
   * most `max_txn_ops` keys, so a large audit log fits; `onProgress` hears how many keys are written.
   */
  async restore(d: StoreDump, onProgress: (written: number, total: number) => void = () => undefined): Promise<number> {
    await this.call((io) => assertEmpty(io, this.location));
    const writes = restoreWrites(d);
    const batch = Math.max(1, this.kv.maxWrites - 1);
    for (let i = 0; i < writes.length; i += batch) {
      const part = writes.slice(i, i + batch);
      await this.call((io) => {
        for (const [k, v] of part) io.put(k, v);
        return Promise.resolve();
      });
      onProgress(Math.min(i + batch, writes.length), writes.length);
    }
    return writes.length;
  }

  /** After the calls queued before it; refused once the store is closed. */
  private serial<T>(job: () => Promise<T>): Promise<T> {
    const run = this.tail.then(() => {
      if (this.closed) throw closedError(this.location);
      return job();
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Run `f` on a fresh snapshot and commit its writes; again while another commit got there first. */
  private async attempt<T>(f: (io: KvLayer) => Promise<T>): Promise<T> {
    for (let i = 1; ; i++) {
      const { view, guard } = await this.kv.snapshot();
      const layer = new KvLayer(view);
      const out = await f(layer);
      if (layer.writes.size === 0) return out;
      if (layer.writes.size + 1 > this.kv.maxWrites)
        throw new UnavailableError(
          'store_tx_too_large',
          `a store transaction writes ${layer.writes.size} keys; ${this.kv.location} takes at most ${this.kv.maxWrites - 1} per transaction`,
        );
      if (await this.kv.commit(guard, layer.writes)) return out;
      if (i >= this.attempts)
        throw new UnavailableError('store_busy', `store ${this.location}: a transaction conflicted with other writers ${i} times in a row; retry`);
      await new Promise((r) => setTimeout(r, Math.min(50, Math.random() * 2 ** i)));
    }
  }

  /** Closes after the calls and transactions queued before it; what comes after is refused (`store_closed`). */
  close(): Promise<void> {
    if (!this.closing) {
      this.closing = this.tail.then(async () => {
        this.closed = true;
        await this.kv.close();
      });
      this.tail = this.closing.catch(() => undefined);
    }
    return this.closing;
  }
}

/** Open the key-value store over a backend. */
export function openKvStore(kv: KvBackend, opts: KvStoreOptions = {}): Promise<KvStore> {
  return KvStore.open(kv, opts);
}
