// A transaction's view of the key-value store: reads from one snapshot, with its own buffered writes (and
// those of the transactions it is nested in) laid over them. A nested transaction is a child layer: merged
// into its parent when it succeeds, dropped when it fails. Nothing reaches the backend until the root commits.
import type { KvEntry, KvRange, KvSnapshot } from './backend.js';

export interface KvIo {
  get(key: string): Promise<string | undefined>;
  range(r: KvRange): Promise<KvEntry[]>;
  put(key: string, value: string): void;
  del(key: string): void;
}

export class KvLayer implements KvIo {
  /** Buffered writes: a value, or null for a delete. */
  readonly writes = new Map<string, string | null>();

  constructor(
    private readonly view: KvSnapshot,
    private readonly parent?: KvLayer,
  ) {}

  /** The buffered value of `key` in this layer or those below it: undefined when none buffered it. */
  private buffered(key: string): string | null | undefined {
    const v = this.writes.get(key);
    return v !== undefined ? v : this.parent?.buffered(key);
  }

  async get(key: string): Promise<string | undefined> {
    const b = this.buffered(key);
    if (b !== undefined) return b ?? undefined;
    return this.view.get(key);
  }

  async range(r: KvRange): Promise<KvEntry[]> {
    const own = this.bufferedIn(r);
    // each buffered key hides at most one stored entry: ask for that many more
    const stored = await this.view.range(r.limit === undefined ? r : { ...r, limit: r.limit + own.size });
    const merged = new Map<string, string>();
    for (const e of stored) if (!own.has(e.key)) merged.set(e.key, e.value);
    for (const [k, v] of own) if (v !== null) merged.set(k, v);
    const keys = [...merged.keys()].sort();
    if (r.reverse === true) keys.reverse();
    const out = keys.map((key) => ({ key, value: merged.get(key) as string }));
    return r.limit === undefined ? out : out.slice(0, r.limit);
  }

  /** The buffered writes in [start, end) of this layer and those below it, the nearest winning. */
  private bufferedIn(r: KvRange): Map<string, string | null> {
    const out = this.parent?.bufferedIn(r) ?? new Map<string, string | null>();
    for (const [k, v] of this.writes) if (k >= r.start && k < r.end) out.set(k, v);
    return out;
  }

  put(key: string, value: string): void {
    this.writes.set(key, value);
  }

  del(key: string): void {
    this.writes.set(key, null);
  }

  child(): KvLayer {
    return new KvLayer(this.view, this);
  }

  /** A nested transaction succeeded: its writes become its parent's. */
  mergeIntoParent(): void {
    if (!this.parent) return;
    for (const [k, v] of this.writes) this.parent.writes.set(k, v);
  }
}
