// An in-memory key-value backend with etcd's semantics for the store's purposes (snapshot reads, a commit
// guarded by the last commit), so the KV store's tables and transactions are tested where etcd is not
// installed, and conflicts can be provoked on purpose (`interfere`).
import type { KvBackend, KvEntry, KvRange, KvSnapshot } from '../../src/store/kv/backend.js';

export class MemoryKv implements KvBackend {
  readonly location = 'memory';
  private data = new Map<string, string>();
  private revision = 0;
  commits = 0;
  refused = 0;
  /** Called after each snapshot is taken: a test commits something here to make that transaction conflict. */
  interfere: (() => void) | undefined;

  constructor(readonly maxWrites = 128) {}

  snapshot(): Promise<{ view: KvSnapshot; guard: string }> {
    const copy = new Map(this.data);
    const guard = String(this.revision);
    this.interfere?.();
    return Promise.resolve({ view: new MemoryView(copy), guard });
  }

  commit(guard: string, writes: ReadonlyMap<string, string | null>): Promise<boolean> {
    if (guard !== String(this.revision)) {
      this.refused++;
      return Promise.resolve(false);
    }
    this.apply(writes);
    return Promise.resolve(true);
  }

  /** A commit by "another replica". */
  apply(writes: ReadonlyMap<string, string | null>): void {
    for (const [k, v] of writes) {
      if (v === null) this.data.delete(k);
      else this.data.set(k, v);
    }
    this.revision++;
    this.commits++;
  }

  keys(): string[] {
    return [...this.data.keys()].sort();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

class MemoryView implements KvSnapshot {
  constructor(private readonly data: Map<string, string>) {}

  get(key: string): Promise<string | undefined> {
    return Promise.resolve(this.data.get(key));
  }

  range(r: KvRange): Promise<KvEntry[]> {
    const keys = [...this.data.keys()].filter((k) => k >= r.start && k < r.end).sort();
    if (r.reverse === true) keys.reverse();
    const out = keys.map((key) => ({ key, value: this.data.get(key) as string }));
    return Promise.resolve(r.limit ? out.slice(0, r.limit) : out);
  }
}
