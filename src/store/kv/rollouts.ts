// The cluster store's routes (compare-and-set on their revision) and rollouts with their events, over
// key-value: a rollout in progress is indexed by model (one at most), every rollout by creation time.
import { DEFAULTS } from '../../defaults.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../errors.js';
import { clampLimit } from '../shared.js';
import { TERMINAL_ROLLOUT_PHASES } from '../types.js';
import type { RolloutEvent, RolloutEventInput, RolloutInput, RolloutRecord, StoredRoute } from '../types.js';
import { prefixRange } from './backend.js';
import { deleteIfThere, getJson, K, lastName, nextSeq, pad, putJson, values } from './keys.js';
import { cmp, KvVersions } from './versions.js';

export abstract class KvRollouts extends KvVersions {
  getRoute(model: string): Promise<StoredRoute | undefined> {
    return this.call((io) => getJson<StoredRoute>(io, K.route(model)));
  }

  listRoutes(): Promise<StoredRoute[]> {
    return this.call(async (io) => values<StoredRoute>(await io.range(prefixRange(K.routes))).sort((a, b) => cmp(a.model, b.model)));
  }

  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): Promise<R> {
    return this.call(async (io) => {
      if (!Number.isInteger(route.revision) || route.revision <= expectedRevision) {
        throw new BadRequestError(
          'route_revision_invalid',
          `route for ${route.model}: revision ${route.revision} must be an integer greater than the expected ${expectedRevision}`,
        );
      }
      const actual = (await getJson<StoredRoute>(io, K.route(route.model)))?.revision ?? 0;
      if (actual !== expectedRevision) {
        throw new ConflictError(
          'route_conflict',
          `route for ${route.model} is at revision ${actual}, expected ${expectedRevision}: it changed meanwhile; re-read and retry`,
          { details: { model: route.model, expected: expectedRevision, actual } },
        );
      }
      putJson(io, K.route(route.model), route);
      return route;
    });
  }

  deleteRoute(model: string): Promise<boolean> {
    return this.call((io) => deleteIfThere(io, K.route(model)));
  }

  getRollout(id: string): Promise<RolloutRecord | undefined> {
    return this.call((io) => getJson<RolloutRecord>(io, K.rollout(id)));
  }

  putRollout(r: RolloutInput, at: number, expectedRevision?: number): Promise<RolloutRecord> {
    return this.call(async (io) => {
      const terminal = r.terminal ?? TERMINAL_ROLLOUT_PHASES.includes(r.phase);
      const cur = await getJson<RolloutRecord>(io, K.rollout(r.id));
      const actual = cur?.revision ?? 0;
      if (expectedRevision !== undefined && actual !== expectedRevision) {
        throw new ConflictError('rollout_conflict', `rollout ${r.id} is at revision ${actual}, expected ${expectedRevision}`, {
          details: { rollout: r.id, expected: expectedRevision, actual },
        });
      }
      if (cur && cur.model !== r.model) throw new BadRequestError('rollout_model_mismatch', `rollout ${r.id} belongs to model ${cur.model}, not ${r.model}`);
      const running = await io.get(K.rolloutActive(r.model));
      if (!terminal && running !== undefined && running !== r.id) {
        throw new ConflictError('rollout_in_progress', `model ${r.model} already has a rollout in progress (${running})`, {
          details: { model: r.model, rollout: running },
        });
      }
      const rec: RolloutRecord = {
        id: r.id,
        model: r.model,
        phase: r.phase,
        state: (JSON.parse(JSON.stringify(r.state ?? null)) as unknown) ?? null,
        terminal,
        revision: actual + 1,
        createdAt: cur?.createdAt ?? at,
        updatedAt: at,
      };
      putJson(io, K.rollout(r.id), rec);
      if (!terminal) io.put(K.rolloutActive(r.model), r.id);
      else if (running === r.id) io.del(K.rolloutActive(r.model));
      if (!cur) {
        io.put(K.rolloutByTime(rec.createdAt, r.id), r.model);
        io.put(K.rolloutOf(r.model, rec.createdAt, r.id), r.id);
      }
      return rec;
    });
  }

  listActiveRollouts(): Promise<RolloutRecord[]> {
    return this.call(async (io) => {
      const out: RolloutRecord[] = [];
      for (const { value: id } of await io.range(prefixRange(K.rolloutsActive))) {
        const r = await getJson<RolloutRecord>(io, K.rollout(id));
        if (r) out.push(r);
      }
      return out.sort((a, b) => a.createdAt - b.createdAt || cmp(a.id, b.id));
    });
  }

  listRollouts(filter: { model?: string | undefined; limit?: number | undefined } = {}): Promise<RolloutRecord[]> {
    return this.call(async (io) => {
      const n = clampLimit(filter.limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
      const index = filter.model === undefined ? K.rolloutsByTime : K.rolloutsOf(filter.model);
      const out: RolloutRecord[] = [];
      for (const { key } of await io.range(prefixRange(index, { reverse: true, limit: n }))) {
        const r = await getJson<RolloutRecord>(io, K.rollout(lastName(key)));
        if (r) out.push(r);
      }
      return out;
    });
  }

  appendRolloutEvent(e: RolloutEventInput): Promise<RolloutEvent> {
    return this.call(async (io) => {
      if ((await io.get(K.rollout(e.rolloutId))) === undefined) throw new NotFoundError('rollout_not_found', `no rollout ${e.rolloutId}`);
      const out: RolloutEvent = { ...e, seq: await nextSeq(io, 'rollout-events') };
      putJson(io, K.eventsOf(e.rolloutId) + pad(out.seq), out);
      return out;
    });
  }

  rolloutEvents(rolloutId: string, opts: { afterSeq?: number | undefined; limit?: number | undefined } = {}): Promise<RolloutEvent[]> {
    return this.call(async (io) => {
      const n = clampLimit(opts.limit, DEFAULTS.store.rolloutEventsMaxLimit, DEFAULTS.store.rolloutEventsMaxLimit);
      const prefix = K.eventsOf(rolloutId);
      const r = prefixRange(prefix, { limit: n });
      return values<RolloutEvent>(await io.range({ ...r, start: prefix + pad((opts.afterSeq ?? 0) + 1) }));
    });
  }
}
