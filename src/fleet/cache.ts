// The weight cache: copies a version's weights (a local file or directory, file://, http(s)://)
// into <cache dir>/<model>/<version>/, verifies the SHA-256 weight hash, and keeps at most
// max_versions versions by least-recent use — never evicting the active or standby version.
//
// Hash (what `weight_hash` must be, as `sha256:<hex>` or bare hex):
//   - a single file (local or http): SHA-256 of its bytes — what `sha256sum FILE` prints;
//   - a directory: SHA-256 of the lines `<sha256 of the file>  <relative path>\n` for every regular
//     file, sorted by relative path (bytewise, `/` separators), i.e. what
//     `cd DIR && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum`
//     prints. Symlinks are followed; other special files are refused.
// The index of cached versions with their last use is `<cache dir>/index.json`, written atomically.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, GatewayTimeoutError, GlidepathError, NotFoundError, UnprocessableError } from '../errors.js';
import type { VersionStatus } from '../domain/version.js';
import { classify, copyLocal, fetchHttp, parseWeightHash, redactSource } from './weight-source.js';

export { parseWeightHash, treeHash } from './weight-source.js';

/** What the cache needs of a version (a registry `Version` or a `VersionConfig` fits). */
export interface CacheSource {
  model: string;
  id: string;
  weights: string;
  weightHash?: string | undefined;
}

export interface CacheEntry {
  model: string;
  version: string;
  /** Absolute path of the cached copy (a directory holding the file or the tree). */
  path: string;
  bytes: number;
  /** `sha256:<hex>` as computed. */
  hash: string;
  /** Whether it was checked against a weight hash from the version. */
  verified: boolean;
  /** The weights URI it came from (credentials and query removed). */
  source: string;
  downloadedAt: number;
  lastUsedAt: number;
}

export interface EvictedVersion {
  model: string;
  version: string;
  bytes: number;
  lastUsedAt: number;
}

export interface CacheResult {
  model: string;
  version: string;
  path: string;
  source: string;
  /** Bytes of the cached copy. */
  bytes: number;
  /** Wall time of this call, ms (0-ish when it was already cached). */
  durationMs: number;
  /** `sha256:<hex>`. */
  hash: string;
  verified: boolean;
  /** The version's weight hash, as given, when it has one. */
  expectedHash?: string | undefined;
  /** True when nothing was copied: it was already cached (and matched the weight hash). */
  alreadyCached: boolean;
  evicted: EvictedVersion[];
  /** Protected versions (active / standby / just downloaded) kept beyond max_versions. */
  keptProtected: Array<{ model: string; version: string }>;
  /** Human notes: not verified, protected versions kept… */
  notes: string[];
}

/**
 * A cache download as the admin API answers it and its `cache_download` event carries it (the API's
 * snake_case; declared here, beside the result, because the event is emitted here and fleet/ may not
 * import api/; src/api/types.ts re-exports it).
 */
export interface CacheResultView {
  model: string;
  version: string;
  path: string;
  source: string;
  bytes: number;
  duration_ms: number;
  hash: string;
  verified: boolean;
  /** The version's weight hash as given; null when it has none. */
  expected_hash: string | null;
  already_cached: boolean;
  evicted: { model: string; version: string; bytes: number; last_used_at: number }[];
  kept_protected: { model: string; version: string }[];
  notes: string[];
}

export function cacheResultView(r: CacheResult): CacheResultView {
  return {
    model: r.model,
    version: r.version,
    path: r.path,
    source: r.source,
    bytes: r.bytes,
    duration_ms: r.durationMs,
    hash: r.hash,
    verified: r.verified,
    expected_hash: r.expectedHash ?? null,
    already_cached: r.alreadyCached,
    evicted: r.evicted.map((e) => ({ model: e.model, version: e.version, bytes: e.bytes, last_used_at: e.lastUsedAt })),
    kept_protected: r.keptProtected.map((k) => ({ model: k.model, version: k.version })),
    notes: r.notes,
  };
}

export interface WeightCacheOptions {
  dir: string;
  maxVersions?: number | undefined;
  /** Largest copy accepted per version, bytes. */
  maxBytes?: number | undefined;
  /** One download, whole, ms. */
  timeoutMs?: number | undefined;
  /** HTTP: until headers and between chunks, ms. */
  idleTimeoutMs?: number | undefined;
  /** Versions that must never be evicted (active and standby ones). */
  protect?: (() => Iterable<{ model: string; version: string }> | Promise<Iterable<{ model: string; version: string }>>) | undefined;
  now?: (() => number) | undefined;
  /** Relative weight paths are resolved against this (default: the process's working directory). */
  baseDir?: string | undefined;
}

interface IndexFile {
  format: 1;
  entries: CacheEntry[];
}

const key = (model: string, version: string): string => `${model}\u0000${version}`;
/** Model and version names may contain `/`: one path segment each, never `..`. */
const seg = (s: string): string => encodeURIComponent(s).replace(/^\.+$/, (m) => '%2E'.repeat(m.length));

export class WeightCache {
  readonly dir: string;
  readonly maxVersions: number;
  readonly maxBytes: number;
  readonly timeoutMs: number;
  readonly idleTimeoutMs: number;
  private readonly protect: () => Iterable<{ model: string; version: string }> | Promise<Iterable<{ model: string; version: string }>>;
  private readonly now: () => number;
  private readonly baseDir: string;
  private readonly inflight = new Map<string, Promise<CacheResult>>();

  constructor(opts: WeightCacheOptions) {
    const C = DEFAULTS.control;
    this.dir = path.resolve(opts.dir);
    this.maxVersions = opts.maxVersions ?? C.cacheMaxVersions;
    this.maxBytes = opts.maxBytes ?? C.cacheMaxBytes;
    this.timeoutMs = opts.timeoutMs ?? C.cacheDownloadTimeoutMs;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? C.cacheIdleTimeoutMs;
    this.protect = opts.protect ?? (() => []);
    this.now = opts.now ?? Date.now;
    this.baseDir = opts.baseDir ?? process.cwd();
  }

  /** Where a version's copy lives (whether or not it is cached). */
  pathOf(model: string, version: string): string {
    return path.join(this.dir, seg(model), seg(version));
  }

  /** Cached versions, least recently used first. Entries whose directory vanished are dropped. */
  list(): CacheEntry[] {
    const idx = this.readIndex();
    const live = idx.entries.filter((e) => existsSync(e.path));
    if (live.length !== idx.entries.length) this.writeIndex({ format: 1, entries: live });
    return live.sort((a, b) => a.lastUsedAt - b.lastUsedAt);
  }

  get(model: string, version: string): CacheEntry | undefined {
    return this.list().find((e) => e.model === model && e.version === version);
  }

  /** The local path of a cached version, marking it used (LRU). NotFoundError `cache_miss` otherwise. */
  use(model: string, version: string): string {
    const idx = this.readIndex();
    const e = idx.entries.find((x) => x.model === model && x.version === version);
    if (!e || !existsSync(e.path))
      throw new NotFoundError(
        'cache_miss',
        `version ${model}/${version} is not in the weight cache (${this.dir}); run \`glidepath cache download --version ${version}\``,
      );
    e.lastUsedAt = this.now();
    this.writeIndex(idx);
    return e.path;
  }

  /**
   * Copy a version's weights into the cache, verify them, then evict beyond max_versions.
   * Concurrent calls for one version share one download. `force` re-downloads a cached version.
   */
  download(v: CacheSource, opts: { force?: boolean } = {}): Promise<CacheResult> {
    const k = key(v.model, v.id);
    const running = this.inflight.get(k);
    if (running) return running;
    const p = this.doDownload(v, opts.force ?? false).finally(() => this.inflight.delete(k));
    this.inflight.set(k, p);
    return p;
  }

  /** Evict least-recently-used versions beyond max_versions, never protected ones. */
  evict(
    extraProtected: ReadonlyArray<{ model: string; version: string }> = [],
  ): Promise<{ evicted: EvictedVersion[]; keptProtected: Array<{ model: string; version: string }> }> {
    return this.evictNow(extraProtected);
  }

  // ---- internals ----------------------------------------------------------------------------

  private async doDownload(v: CacheSource, force: boolean): Promise<CacheResult> {
    const t0 = performance.now();
    const what = `${v.model}/${v.id}`;
    const source = redactSource(v.weights);
    // where from first: simulated weights (the example fleet's, with placeholder hashes) say there is nothing to copy
    const src = classify(v.weights, this.baseDir);
    let expected: string | undefined;
    if (v.weightHash !== undefined && v.weightHash.trim() !== '') {
      const parsed = parseWeightHash(v.weightHash);
      if (typeof parsed !== 'string') throw new BadRequestError('invalid_weight_hash', `${what}: ${parsed.error}`);
      expected = parsed;
    }
    const dest = this.pathOf(v.model, v.id);
    const notes: string[] = [];
    const have = this.readIndex().entries.find((e) => e.model === v.model && e.version === v.id);
    if (!force && have && existsSync(have.path) && (expected === undefined || have.hash === `sha256:${expected}`)) {
      this.touch(v.model, v.id);
      const ev = await this.evictNow([{ model: v.model, version: v.id }]);
      if (expected === undefined) notes.push(`version has no weight_hash: ${have.hash} was recorded, not verified`);
      return {
        model: v.model,
        version: v.id,
        path: have.path,
        source,
        bytes: have.bytes,
        durationMs: performance.now() - t0,
        hash: have.hash,
        verified: expected !== undefined,
        expectedHash: v.weightHash,
        alreadyCached: true,
        ...ev,
        notes: [...notes, ...protectNotes(ev.keptProtected, this.maxVersions)],
      };
    }

    const modelDir = path.dirname(dest);
    await mkdir(modelDir, { recursive: true });
    const tmp = path.join(modelDir, `.tmp-${seg(v.id)}-${process.pid}-${randomBytes(4).toString('hex')}`);
    await mkdir(tmp);
    const signal = AbortSignal.timeout(this.timeoutMs);
    const budget = { used: 0, max: this.maxBytes };
    let hex: string;
    try {
      hex = src.kind === 'http' ? await fetchHttp(src.url, tmp, budget, signal, what, this) : await copyLocal(src.path, tmp, budget, signal, what);
      if (expected !== undefined && hex !== expected) {
        throw new UnprocessableError(
          'weight_hash_mismatch',
          `${what}: weights from ${source} have sha256:${hex} but the version's weight_hash is sha256:${expected}; the copy was removed`,
          {
            details: { expected: `sha256:${expected}`, actual: `sha256:${hex}` },
          },
        );
      }
      // atomic publish: the version's directory appears complete or not at all
      if (existsSync(dest)) {
        const old = `${tmp}.old`;
        await rename(dest, old);
        await rename(tmp, dest);
        await rm(old, { recursive: true, force: true });
      } else {
        await rename(tmp, dest);
      }
    } catch (err) {
      await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
      if (signal.aborted && !(err instanceof GlidepathError))
        throw new GatewayTimeoutError('download_timeout', `${what}: copying weights from ${source} took longer than ${this.timeoutMs} ms`);
      throw err;
    }
    const now = this.now();
    const entry: CacheEntry = {
      model: v.model,
      version: v.id,
      path: dest,
      bytes: budget.used,
      hash: `sha256:${hex}`,
      verified: expected !== undefined,
      source,
      downloadedAt: now,
      lastUsedAt: now,
    };
    const idx = this.readIndex();
    idx.entries = [...idx.entries.filter((e) => !(e.model === v.model && e.version === v.id)), entry];
    this.writeIndex(idx);
    if (expected === undefined) notes.push(`version has no weight_hash: sha256:${hex} was recorded, not verified`);
    const ev = await this.evictNow([{ model: v.model, version: v.id }]);
    return {
      model: v.model,
      version: v.id,
      path: dest,
      source,
      bytes: budget.used,
      durationMs: performance.now() - t0,
      hash: entry.hash,
      verified: entry.verified,
      expectedHash: v.weightHash,
      alreadyCached: false,
      ...ev,
      notes: [...notes, ...protectNotes(ev.keptProtected, this.maxVersions)],
    };
  }

  private touch(model: string, version: string): void {
    const idx = this.readIndex();
    const e = idx.entries.find((x) => x.model === model && x.version === version);
    if (!e) return;
    e.lastUsedAt = this.now();
    this.writeIndex(idx);
  }

  private async evictNow(
    extra: ReadonlyArray<{ model: string; version: string }>,
  ): Promise<{ evicted: EvictedVersion[]; keptProtected: Array<{ model: string; version: string }> }> {
    const prot = new Set<string>();
    for (const p of await this.protect()) prot.add(key(p.model, p.version));
    for (const p of extra) prot.add(key(p.model, p.version));
    const entries = this.list(); // LRU first
    const evicted: EvictedVersion[] = [];
    let count = entries.length;
    for (const e of entries) {
      if (count <= this.maxVersions) break;
      if (prot.has(key(e.model, e.version))) continue;
      await rm(e.path, { recursive: true, force: true });
      evicted.push({ model: e.model, version: e.version, bytes: e.bytes, lastUsedAt: e.lastUsedAt });
      count--;
    }
    if (evicted.length > 0) {
      const gone = new Set(evicted.map((e) => key(e.model, e.version)));
      const idx = this.readIndex();
      idx.entries = idx.entries.filter((e) => !gone.has(key(e.model, e.version)));
      this.writeIndex(idx);
    }
    const keptProtected =
      count > this.maxVersions ? entries.filter((e) => prot.has(key(e.model, e.version))).map((e) => ({ model: e.model, version: e.version })) : [];
    return { evicted, keptProtected };
  }

  private indexPath(): string {
    return path.join(this.dir, 'index.json');
  }

  private readIndex(): IndexFile {
    let text: string;
    try {
      text = readFileSync(this.indexPath(), 'utf8');
    } catch {
      return { format: 1, entries: [] };
    }
    try {
      const parsed = JSON.parse(text) as Partial<IndexFile>;
      return { format: 1, entries: Array.isArray(parsed.entries) ? parsed.entries : [] };
    } catch {
      // a corrupt index loses only the LRU order; the copies themselves are re-adopted by re-download
      return { format: 1, entries: [] };
    }
  }

  private writeIndex(idx: IndexFile): void {
    mkdirSync(this.dir, { recursive: true });
    const tmp = `${this.indexPath()}.tmp-${process.pid}`;
    writeFileSync(tmp, JSON.stringify(idx, null, 1));
    renameSync(tmp, this.indexPath());
  }
}

function protectNotes(kept: ReadonlyArray<{ model: string; version: string }>, max: number): string[] {
  if (kept.length === 0) return [];
  return [
    `only protected versions remain beyond max_versions ${max}: kept ${kept.map((k) => `${k.model}/${k.version}`).join(', ')} (active, standby or just downloaded)`,
  ];
}

/**
 * What the cache's admin operation needs of the control plane (ControlPlane provides it): its weight
 * cache (one per control plane, made by `controlPlaneCache`), the versions, the audit log and the
 * event stream. A port, so that fleet/ does not import the composition root.
 */
export interface CacheHost {
  readonly weightCache: WeightCache;
  readonly registry: {
    update(model: string, id: string, patch: { metadata: Record<string, unknown> }): Promise<unknown>;
  };
  readonly events: { emit(e: { kind: string; model: string; version: string; message: string; data: unknown }): unknown };
  version(model: string, id: string): Promise<CacheSource & { metadata: Record<string, unknown> }>;
  audited<T>(actor: { name: string }, action: string, target: string, params: unknown, fn: () => Promise<T>): Promise<T>;
}

/** A control plane's cache: the config's directory and bound; active, standby and loading versions protected. */
export function controlPlaneCache(
  cfg: { readonly cache: { readonly dir: string; readonly maxVersions: number; readonly maxBytes: number }; readonly source?: string | undefined },
  registry: { list(model: undefined, status: readonly VersionStatus[]): Promise<ReadonlyArray<{ model: string; id: string }>> },
): WeightCache {
  return new WeightCache({
    dir: cfg.cache.dir,
    maxVersions: cfg.cache.maxVersions,
    maxBytes: cfg.cache.maxBytes,
    baseDir: cfg.source ? path.dirname(cfg.source) : undefined,
    // loading: its workers are reading the files right now
    protect: async () => (await registry.list(undefined, ['active', 'standby', 'loading'])).map((v) => ({ model: v.model, version: v.id })),
  });
}

/** `cache download`: audited, for the admin API. */
export async function cacheDownload(
  cp: CacheHost,
  model: string,
  versionId: string,
  actor: { name: string },
  opts: { force?: boolean } = {},
): Promise<CacheResult> {
  return cp.audited(actor, 'cache_download', `${model}/${versionId}`, { model, version: versionId, ...opts }, async () => {
    const v = await cp.version(model, versionId);
    const r = await cp.weightCache.download(v, opts);
    // no weight_hash to verify against: keep what was computed with the version, for the operator to pin
    if (!r.verified && v.metadata.computed_weight_hash !== r.hash) await cp.registry.update(model, versionId, { metadata: { computed_weight_hash: r.hash } });
    cp.events.emit({
      kind: 'cache_download',
      model,
      version: versionId,
      message: `${model}/${versionId}: ${r.alreadyCached ? 'already cached' : `cached ${r.bytes} bytes in ${Math.round(r.durationMs)} ms`} (${r.hash}${r.verified ? ', verified' : ', not verified'})${r.evicted.length ? `; evicted ${r.evicted.map((e) => `${e.model}/${e.version}`).join(', ')}` : ''}`,
      data: cacheResultView(r),
    });
    return r;
  });
}
