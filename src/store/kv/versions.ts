// The cluster store's versions over key-value: records, transitions, the one-active rule, active history.
// Every method runs through `call`: inside the caller's transaction, or as a transaction of its own.
import { DEFAULTS } from '../../defaults.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { ActivePeriod, Version, VersionTransition } from '../../domain/version.js';
import { clampLimit } from '../shared.js';
import type { ActivationInput, VersionFilter } from '../types.js';
import { prefixRange } from './backend.js';
import { getJson, K, nextSeq, pad, putJson, values } from './keys.js';
import type { KvIo } from './layer.js';

export abstract class KvVersions {
  /** Run `f` over a transaction's key-value view (the caller's, or one of its own). */
  protected abstract call<T>(f: (io: KvIo) => Promise<T>): Promise<T>;

  getVersion(model: string, id: string): Promise<Version | undefined> {
    return this.call((io) => getJson<Version>(io, K.version(model, id)));
  }

  listVersions(filter: VersionFilter = {}): Promise<Version[]> {
    return this.call(async (io) => {
      if (filter.status !== undefined && filter.status.length === 0) return [];
      const all = values<Version>(await io.range(prefixRange(filter.model === undefined ? K.versions : K.versionsOf(filter.model))));
      const status = filter.status;
      return all
        .filter((v) => status === undefined || status.includes(v.status))
        .sort((a, b) => cmp(a.model, b.model) || a.registeredAt - b.registeredAt || cmp(a.id, b.id));
    });
  }

  insertVersion(v: Version): Promise<void> {
    return this.call(async (io) => {
      if ((await io.get(K.version(v.model, v.id))) !== undefined)
        throw new ConflictError('version_exists', `version ${v.model}/${v.id} is already registered`, { details: { model: v.model, version: v.id } });
      await checkOneActive(io, v);
      putJson(io, K.version(v.model, v.id), v);
    });
  }

  updateVersion(v: Version): Promise<void> {
    return this.call(async (io) => {
      await checkOneActive(io, v);
      if ((await io.get(K.version(v.model, v.id))) === undefined)
        throw new NotFoundError('version_not_found', `no version ${v.model}/${v.id}`, { details: { model: v.model, version: v.id } });
      putJson(io, K.version(v.model, v.id), v);
    });
  }

  appendVersionTransition(t: VersionTransition): Promise<void> {
    return this.call(async (io) => {
      putJson(io, K.transitionsOf(t.model, t.versionId) + pad(await nextSeq(io, 'transitions')), t);
    });
  }

  versionTransitions(model: string, id: string): Promise<VersionTransition[]> {
    return this.call(async (io) => values<VersionTransition>(await io.range(prefixRange(K.transitionsOf(model, id)))));
  }

  recordActivation(a: ActivationInput): Promise<void> {
    return this.call(async (io) => {
      await closeOpen(io, a.model, a.at);
      const key = K.activeOf(a.model) + pad(await nextSeq(io, 'active'));
      const p: ActivePeriod = { model: a.model, versionId: a.versionId, since: a.at, actor: a.actor, reason: a.reason };
      putJson(io, key, p);
      io.put(K.activeOpen(a.model), key);
    });
  }

  recordDeactivation(model: string, versionId: string, at: number): Promise<void> {
    return this.call((io) => closeOpen(io, model, at, versionId));
  }

  activeHistory(model: string, limit?: number): Promise<ActivePeriod[]> {
    return this.call(async (io) => {
      const n = clampLimit(limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
      return values<ActivePeriod>(await io.range(prefixRange(K.activeOf(model), { reverse: true, limit: n })));
    });
  }
}

export function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

async function checkOneActive(io: KvIo, v: Version): Promise<void> {
  if (v.status !== 'active') return;
  const other = values<Version>(await io.range(prefixRange(K.versionsOf(v.model)))).find((x) => x.status === 'active' && x.id !== v.id);
  if (other)
    throw new ConflictError('active_exists', `model ${v.model} already has an active version (${other.id}); swap instead`, {
      details: { model: v.model, active: other.id, version: v.id },
    });
}

/** Close the model's open active period at `at` (only if it is `versionId`'s, when given). */
async function closeOpen(io: KvIo, model: string, at: number, versionId?: string): Promise<void> {
  const key = await io.get(K.activeOpen(model));
  if (key === undefined) return;
  const p = await getJson<ActivePeriod>(io, key);
  if (p && versionId !== undefined && p.versionId !== versionId) return;
  if (p) putJson(io, key, { ...p, until: at });
  io.del(K.activeOpen(model));
}
