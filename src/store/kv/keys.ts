// The cluster store's key layout, relative to its prefix (docs/cluster.md lists it): one JSON value per
// record, indexes as extra keys. Names are URI-encoded (ASCII, no `/`); numbers are zero-padded so that
// keys sort as the numbers do.
import type { KvIo } from './layer.js';

const e = encodeURIComponent;
/** Zero-padded to 16 digits: sorts like the number for every epoch ms and sequence number. */
export const pad = (n: number): string => String(Math.trunc(n)).padStart(16, '0');

export const K = {
  /** Bumped by every commit: what a commit compares (etcd.ts). */
  guard: 'meta/commit',
  schema: 'meta/schema',
  seq: (name: string) => `seq/${name}`,

  versions: 'versions/',
  versionsOf: (model: string) => `versions/${e(model)}/`,
  version: (model: string, id: string) => `versions/${e(model)}/${e(id)}`,
  transitionsOf: (model: string, id: string) => `transitions/${e(model)}/${e(id)}/`,
  activeOf: (model: string) => `active/${e(model)}/`,
  /** The key of a model's open active period, if any. */
  activeOpen: (model: string) => `active-open/${e(model)}`,

  routes: 'routes/',
  route: (model: string) => `routes/${e(model)}`,

  rollouts: 'rollouts/',
  rollout: (id: string) => `rollouts/${e(id)}`,
  /** model → the id of its rollout in progress (one at most). */
  rolloutsActive: 'rollouts-active/',
  rolloutActive: (model: string) => `rollouts-active/${e(model)}`,
  rolloutsByTime: 'rollouts-by-time/',
  rolloutByTime: (createdAt: number, id: string) => `rollouts-by-time/${pad(createdAt)}/${e(id)}`,
  rolloutsOf: (model: string) => `rollouts-of/${e(model)}/`,
  rolloutOf: (model: string, createdAt: number, id: string) => `rollouts-of/${e(model)}/${pad(createdAt)}/${e(id)}`,
  eventsOf: (id: string) => `rollout-events/${e(id)}/`,

  gpus: 'gpus/',
  gpu: (id: string) => `gpus/${e(id)}`,
  workers: 'workers/',
  worker: (id: string) => `workers/${e(id)}`,

  /** Audit entries by time, then id: `audit/<at>/<id>`. */
  audit: 'audit/',
  tokens: 'tokens/',
  token: (name: string) => `tokens/${e(name)}`,
  setting: (key: string) => `settings/${e(key)}`,
  settings: 'settings/',
};

/** The last path segment of a key, decoded. */
export function lastName(key: string): string {
  return decodeURIComponent(key.slice(key.lastIndexOf('/') + 1));
}

export async function getJson<T>(io: KvIo, key: string): Promise<T | undefined> {
  const s = await io.get(key);
  return s === undefined ? undefined : (JSON.parse(s) as T);
}

export function putJson(io: KvIo, key: string, value: unknown): void {
  io.put(key, JSON.stringify(value ?? null));
}

/** Every value under a prefix range, parsed. */
export function values<T>(entries: readonly { value: string }[]): T[] {
  return entries.map((x) => JSON.parse(x.value) as T);
}

/** The next number of a named sequence (audit ids, event and transition numbers): 1, 2, … */
export async function nextSeq(io: KvIo, name: string): Promise<number> {
  const n = ((await getJson<number>(io, K.seq(name))) ?? 0) + 1;
  putJson(io, K.seq(name), n);
  return n;
}

/** Delete `key` if it is there; whether it was. */
export async function deleteIfThere(io: KvIo, key: string): Promise<boolean> {
  if ((await io.get(key)) === undefined) return false;
  io.del(key);
  return true;
}
