// The key-value seam under the cluster store: a consistent snapshot to read from, and a commit that lands
// only when no other commit happened since that snapshot. etcd implements it (etcd.ts); keys are relative
// to the backend's prefix, ASCII, and sort byte-wise.

export interface KvEntry {
  key: string;
  value: string;
}

/** Keys in [start, end), ascending (or descending with `reverse`), at most `limit` of them. */
export interface KvRange {
  start: string;
  end: string;
  reverse?: boolean | undefined;
  limit?: number | undefined;
}

/** Reads at one point in time: every read of a snapshot sees the same committed state. */
export interface KvSnapshot {
  get(key: string): Promise<string | undefined>;
  range(r: KvRange): Promise<KvEntry[]>;
}

export interface KvBackend {
  /** Where it is (endpoints and prefix), for messages. */
  readonly location: string;
  /** Most writes one commit may carry (etcd's `--max-txn-ops`, one of them the guard). */
  readonly maxWrites: number;
  /** A snapshot of everything committed so far, and the guard a commit compares: an opaque token. */
  snapshot(): Promise<{ view: KvSnapshot; guard: string }>;
  /** Apply the writes (null: delete) atomically if nothing was committed since `guard`; false when something was. */
  commit(guard: string, writes: ReadonlyMap<string, string | null>): Promise<boolean>;
  close(): Promise<void>;
}

/** The keys that start with `prefix`, as a range. */
export function prefixRange(prefix: string, opts: { reverse?: boolean; limit?: number } = {}): KvRange {
  return { start: prefix, end: successor(prefix), ...opts };
}

/** The smallest string greater than every string that starts with `prefix`. */
export function successor(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}
