// The key-value backend on etcd (package etcd3): snapshot reads at one revision, and a commit that is one
// etcd transaction comparing the guard key's mod revision — so every commit of every replica is ordered,
// and a transaction that read before another's commit runs again. Keys live under the configured prefix.
import { ConsecutiveBreaker, ExponentialBackoff, circuitBreaker, handleWhen } from 'cockatiel';
import type { IBackoff } from 'cockatiel';
import { Etcd3, isRecoverableError } from 'etcd3';
import type { ICompare, IOptions } from 'etcd3';

import { GlidepathError, UnavailableError } from '../../errors.js';
import { DEFAULTS } from '../../defaults.js';
import type { KvBackend, KvEntry, KvRange, KvSnapshot } from './backend.js';
import { K } from './keys.js';

export interface EtcdOptions {
  endpoints: readonly string[];
  /** Every key lives under it; default `/glidepath`. */
  prefix?: string | undefined;
  /** PEM contents (not paths). */
  tls?: { ca: Buffer; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined;
  auth?: { username: string; password: string } | undefined;
  timeoutMs?: number | undefined;
  dialTimeoutMs?: number | undefined;
  maxTxnOps?: number | undefined;
}

const b = (s: string): Buffer => Buffer.from(s, 'utf8');

export class EtcdKv implements KvBackend {
  readonly location: string;
  readonly maxWrites: number;
  /** The client: the cluster module uses it for watches and leases. */
  readonly client: Etcd3;
  /**
   * Set while this process leads a cluster (coordination.ts): its election key and that key's create
   * revision, which every commit also compares. Once the lease is gone (expired, or another replica
   * elected) every commit fails with UnavailableError `not_leader` instead of writing.
   */
  fence: { key: string; createRevision: string } | undefined;
  private readonly prefix: string;

  constructor(opts: EtcdOptions) {
    this.prefix = `${(opts.prefix ?? DEFAULTS.store.etcd.prefix).replace(/\/+$/, '')}/`;
    this.location = `etcd ${opts.endpoints.join(',')} ${this.prefix}`;
    this.maxWrites = opts.maxTxnOps ?? DEFAULTS.store.etcd.maxTxnOps;
    const timeout = opts.timeoutMs ?? DEFAULTS.store.etcd.timeoutMs;
    const o: IOptions = {
      hosts: [...opts.endpoints],
      dialTimeout: opts.dialTimeoutMs ?? DEFAULTS.store.etcd.dialTimeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
      // etcd3's defaults wait up to 30 s between watch reconnections and refuse calls for 5 s after three
      // failures: a replica back from an outage would serve stale routes that long. Both are bounded here.
      faultHandling: {
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: DEFAULTS.store.etcd.halfOpenAfterMs, breaker: new ConsecutiveBreaker(3) }),
        // etcd3 declares an IBackoff but calls next() first, as its own default (a factory) needs
        watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: DEFAULTS.store.etcd.watchRetryMaxMs }) as unknown as IBackoff<unknown>,
      },
    };
    if (opts.tls) o.credentials = { rootCertificate: opts.tls.ca, privateKey: opts.tls.key, certChain: opts.tls.cert };
    if (opts.auth) o.auth = opts.auth;
    this.client = new Etcd3(o);
  }

  /** The full etcd key of a relative key. */
  key(rel: string): string {
    return this.prefix + rel;
  }

  async snapshot(): Promise<{ view: KvSnapshot; guard: string }> {
    const res = await this.call(() => this.client.kv.range({ key: b(this.key(K.guard)) }));
    const revision = res.header.revision;
    return { view: new EtcdView(this, revision), guard: String(res.kvs[0]?.mod_revision ?? '0') };
  }

  async commit(guard: string, writes: ReadonlyMap<string, string | null>): Promise<boolean> {
    const success = [...writes].map(([k, v]) =>
      v === null ? { request_delete_range: { key: b(this.key(k)) } } : { request_put: { key: b(this.key(k)), value: b(v) } },
    );
    success.push({ request_put: { key: b(this.key(K.guard)), value: b(String(Date.now())) } });
    const fence = this.fence;
    const compare: ICompare[] = [{ key: b(this.key(K.guard)), target: 'Mod', result: 'Equal', mod_revision: guard }];
    if (fence) compare.push({ key: b(fence.key), target: 'Create', result: 'Equal', create_revision: fence.createRevision });
    const res = await this.call(() => this.client.kv.txn({ compare, success, failure: [] }));
    if (res.succeeded || !fence) return res.succeeded;
    // which compare failed: another commit (run again) or the lost lease (never)
    const held = await this.call(() => this.client.kv.range({ key: b(fence.key) }));
    if (String(held.kvs[0]?.create_revision ?? '') !== fence.createRevision)
      throw new UnavailableError('not_leader', `${this.location}: this replica no longer leads the cluster (its lease is gone); the write was not made`);
    return false;
  }

  /** One etcd call; a failure of etcd or the network is UnavailableError `store_unavailable` naming the cluster. */
  async call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (err instanceof GlidepathError) throw err;
      const m = (err as Error).message;
      // etcd3's circuit breaker: after consecutive failures it refuses calls for a few seconds
      const why = /circuit breaker is open/i.test(m) ? 'unreachable (its last calls failed; the next try is in a few seconds)' : m;
      throw new UnavailableError('store_unavailable', `${this.location}: ${why}`, { cause: err });
    }
  }

  rangeAt(revision: string, r: KvRange): Promise<KvEntry[]> {
    return this.call(async () => {
      const res = await this.client.kv.range({
        key: b(this.key(r.start)),
        range_end: b(this.key(r.end)),
        revision,
        limit: r.limit ?? 0,
        sort_order: r.reverse === true ? 'Descend' : 'Ascend',
        sort_target: 'Key',
      });
      const cut = this.prefix.length;
      return res.kvs.map((kv) => ({ key: kv.key.toString('utf8').slice(cut), value: kv.value.toString('utf8') }));
    });
  }

  async close(): Promise<void> {
    this.client.close();
    return Promise.resolve();
  }
}

class EtcdView implements KvSnapshot {
  constructor(
    private readonly kv: EtcdKv,
    private readonly revision: string,
  ) {}

  async get(key: string): Promise<string | undefined> {
    const res = await this.kv.call(() => this.kv.client.kv.range({ key: b(this.kv.key(key)), revision: this.revision }));
    return res.kvs[0]?.value.toString('utf8');
  }

  range(r: KvRange): Promise<KvEntry[]> {
    return this.kv.rangeAt(this.revision, r);
  }
}
