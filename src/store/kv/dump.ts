// A whole key-value store in and out as a StoreDump (migrate-store): the writes that recreate every
// record with its indexes and sequence counters, and every record read back from one snapshot.
import { ConflictError } from '../../errors.js';
import type { StoreDump } from '../dump.js';
import type { RolloutRecord } from '../types.js';
import type { ActivePeriod, VersionTransition } from '../../domain/version.js';
import { prefixRange } from './backend.js';
import type { KvEntry } from './backend.js';
import { K, lastName, pad } from './keys.js';
import type { KvIo } from './layer.js';
import { auditKey } from './tables.js';
import { cmp } from './versions.js';

const PAGE = 1_000;
const j = (v: unknown): string => JSON.stringify(v ?? null);

/** The writes that recreate `d` in an empty store, in order (records, indexes, then sequence counters). */
export function restoreWrites(d: StoreDump): [string, string][] {
  const w: [string, string][] = [];
  for (const v of d.versions) w.push([K.version(v.model, v.id), j(v)]);
  d.transitions.forEach((t, i) => w.push([K.transitionsOf(t.model, t.versionId) + pad(i + 1), j(t)]));
  d.active.forEach((p, i) => {
    const key = K.activeOf(p.model) + pad(i + 1);
    w.push([key, j(p)]);
    if (p.until === undefined) w.push([K.activeOpen(p.model), key]);
  });
  for (const r of d.routes) w.push([K.route(r.model), j(r)]);
  for (const r of d.rollouts) {
    w.push([K.rollout(r.id), j(r)], [K.rolloutByTime(r.createdAt, r.id), r.model], [K.rolloutOf(r.model, r.createdAt, r.id), r.id]);
    if (!r.terminal) w.push([K.rolloutActive(r.model), r.id]);
  }
  for (const e of d.events) w.push([K.eventsOf(e.rolloutId) + pad(e.seq), j(e)]);
  for (const g of d.gpus) w.push([K.gpu(g.gpuId), j(g)]);
  for (const x of d.workers) w.push([K.worker(x.id), j(x)]);
  for (const a of d.audit) w.push([auditKey(a), j(a)]);
  for (const t of d.tokens) w.push([K.token(t.name), j(t)]);
  for (const s of d.settings) w.push([K.setting(s.key), j(s.value)]);
  const max = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b), 0);
  w.push(
    [K.seq('transitions'), j(d.transitions.length)],
    [K.seq('active'), j(d.active.length)],
    [K.seq('rollout-events'), j(max(d.events.map((e) => e.seq)))],
    [K.seq('audit'), j(max(d.audit.map((a) => a.id)))],
  );
  return w;
}

/** ConflictError `store_not_empty` unless the store holds nothing but its layout version. */
export async function assertEmpty(io: KvIo, location: string): Promise<void> {
  // every key is printable ASCII, below DEL
  const some = (await io.range({ start: '', end: '\u007f', limit: 3 })).filter((e) => e.key !== K.schema && e.key !== K.guard);
  if (some.length > 0)
    throw new ConflictError('store_not_empty', `${location} already holds Glidepath state (${some[0]?.key} …); migrate into an empty prefix`);
}

/** Every record, read from one snapshot. */
export async function dumpKv(io: KvIo): Promise<StoreDump> {
  const all = async (prefix: string): Promise<KvEntry[]> => {
    const out: KvEntry[] = [];
    const r = prefixRange(prefix);
    for (let start = r.start; ;) {
      const page = await io.range({ start, end: r.end, limit: PAGE });
      out.push(...page);
      const last = page[page.length - 1];
      if (page.length < PAGE || !last) return out;
      start = `${last.key}\u0000`;
    }
  };
  const parsed = async <T>(prefix: string): Promise<T[]> => (await all(prefix)).map((e) => JSON.parse(e.value) as T);
  /** Entries ordered by their trailing sequence number. */
  const bySeq = async <T>(prefix: string): Promise<T[]> =>
    (await all(prefix))
      .map((e) => ({ n: Number(e.key.slice(e.key.lastIndexOf('/') + 1)), v: JSON.parse(e.value) as T }))
      .sort((a, b) => a.n - b.n)
      .map((x) => x.v);
  const rollouts = (await parsed<RolloutRecord>('rollouts/')).sort((a, b) => a.createdAt - b.createdAt || cmp(a.id, b.id));
  const versions = await parsed<StoreDump['versions'][number]>(K.versions);
  return {
    versions: versions.sort((a, b) => cmp(a.model, b.model) || a.registeredAt - b.registeredAt || cmp(a.id, b.id)),
    transitions: await bySeq<VersionTransition>('transitions/'),
    active: await bySeq<ActivePeriod>('active/'),
    routes: (await parsed<StoreDump['routes'][number]>(K.routes)).sort((a, b) => cmp(a.model, b.model)),
    rollouts,
    events: (await parsed<StoreDump['events'][number]>('rollout-events/')).sort((a, b) => a.seq - b.seq),
    gpus: (await parsed<StoreDump['gpus'][number]>(K.gpus)).sort((a, b) => cmp(a.gpuId, b.gpuId)),
    workers: (await parsed<StoreDump['workers'][number]>(K.workers)).sort((a, b) => cmp(a.model, b.model) || cmp(a.versionId, b.versionId) || cmp(a.id, b.id)),
    audit: (await parsed<StoreDump['audit'][number]>(K.audit)).sort((a, b) => a.id - b.id),
    tokens: (await parsed<StoreDump['tokens'][number]>(K.tokens)).sort((a, b) => cmp(a.name, b.name)),
    settings: (await all(K.settings)).map((e) => ({ key: lastName(e.key), value: JSON.parse(e.value) as unknown })),
  };
}
