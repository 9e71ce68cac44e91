// The Store's routes (compare-and-swap on revisions) and rollouts with their events.
import { DEFAULTS } from '../../defaults.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../errors.js';
import { json, parse, rowToRollout, rowToRolloutEvent } from '../rows.js';
import type { RolloutEventRow, RolloutRow } from '../rows.js';
import { TERMINAL_ROLLOUT_PHASES } from '../types.js';
import type { RolloutEvent, RolloutEventInput, RolloutInput, RolloutRecord, StoredRoute } from '../types.js';
import { clampLimit } from '../shared.js';
import { VersionTables } from './versions.js';

export class RolloutTables extends VersionTables {
  // ---- routes -------------------------------------------------------------------------------------------

  getRoute(model: string): StoredRoute | undefined {
    const r = this.stmt('SELECT route FROM routes WHERE model = ?').get(model) as { route: string } | undefined;
    return r ? parse<StoredRoute>(r.route) : undefined;
  }

  listRoutes(): StoredRoute[] {
    const rows = this.stmt('SELECT route FROM routes ORDER BY model').all() as { route: string }[];
    return rows.map((r) => parse<StoredRoute>(r.route) as StoredRoute);
  }

  putRoute<R extends StoredRoute>(route: R, expectedRevision: number): R {
    if (!Number.isInteger(route.revision) || route.revision <= expectedRevision) {
      throw new BadRequestError(
        'route_revision_invalid',
        `route for ${route.model}: revision ${route.revision} must be an integer greater than the expected ${expectedRevision}`,
      );
    }
    const body = json(route);
    return this.tx(() => {
      const cur = this.stmt('SELECT revision FROM routes WHERE model = ?').get(route.model) as { revision: number } | undefined;
      const actual = cur?.revision ?? 0;
      if (actual !== expectedRevision) {
        throw new ConflictError(
          'route_conflict',
          `route for ${route.model} is at revision ${actual}, expected ${expectedRevision}: it changed meanwhile; re-read and retry`,
          { details: { model: route.model, expected: expectedRevision, actual } },
        );
      }
      this.stmt(
        `INSERT INTO routes (model, revision, route, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (model) DO UPDATE SET revision = excluded.revision, route = excluded.route, updated_at = excluded.updated_at`,
      ).run(route.model, route.revision, body, Date.now());
      return route;
    });
  }

  deleteRoute(model: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM routes WHERE model = ?').run(model).changes > 0);
  }

  // ---- rollouts -----------------------------------------------------------------------------------------

  getRollout(id: string): RolloutRecord | undefined {
    const r = this.stmt('SELECT * FROM rollouts WHERE id = ?').get(id) as RolloutRow | undefined;
    return r ? rowToRollout(r) : undefined;
  }

  putRollout(r: RolloutInput, at: number, expectedRevision?: number): RolloutRecord {
    const terminal = r.terminal ?? TERMINAL_ROLLOUT_PHASES.includes(r.phase);
    const state = json(r.state);
    return this.tx(() => {
      const cur = this.getRollout(r.id);
      const actual = cur?.revision ?? 0;
      if (expectedRevision !== undefined && actual !== expectedRevision) {
        throw new ConflictError('rollout_conflict', `rollout ${r.id} is at revision ${actual}, expected ${expectedRevision}`, {
          details: { rollout: r.id, expected: expectedRevision, actual },
        });
      }
      if (cur && cur.model !== r.model) {
        throw new BadRequestError('rollout_model_mismatch', `rollout ${r.id} belongs to model ${cur.model}, not ${r.model}`);
      }
      if (!terminal) {
        const other = this.stmt('SELECT id FROM rollouts WHERE model = ? AND terminal = 0 AND id <> ?').get(r.model, r.id) as { id: string } | undefined;
        if (other) {
          throw new ConflictError('rollout_in_progress', `model ${r.model} already has a rollout in progress (${other.id})`, {
            details: { model: r.model, rollout: other.id },
          });
        }
      }
      const rec: RolloutRecord = {
        id: r.id,
        model: r.model,
        phase: r.phase,
        state: parse<unknown>(state) ?? null,
        terminal,
        revision: actual + 1,
        createdAt: cur?.createdAt ?? at,
        updatedAt: at,
      };
      this.stmt(
        `INSERT INTO rollouts (id, model, phase, terminal, revision, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET phase = excluded.phase, terminal = excluded.terminal, revision = excluded.revision,
           state = excluded.state, updated_at = excluded.updated_at`,
      ).run(rec.id, rec.model, rec.phase, terminal ? 1 : 0, rec.revision, state, rec.createdAt, rec.updatedAt);
      return rec;
    });
  }

  listActiveRollouts(): RolloutRecord[] {
    const rows = this.stmt('SELECT * FROM rollouts WHERE terminal = 0 ORDER BY created_at, id').all() as RolloutRow[];
    return rows.map(rowToRollout);
  }

  listRollouts(filter: { model?: string | undefined; limit?: number | undefined } = {}): RolloutRecord[] {
    const n = clampLimit(filter.limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
    const rows = (
      filter.model === undefined
        ? this.stmt('SELECT * FROM rollouts ORDER BY created_at DESC, id DESC LIMIT ?').all(n)
        : this.stmt('SELECT * FROM rollouts WHERE model = ? ORDER BY created_at DESC, id DESC LIMIT ?').all(filter.model, n)
    ) as RolloutRow[];
    return rows.map(rowToRollout);
  }

  appendRolloutEvent(e: RolloutEventInput): RolloutEvent {
    return this.tx(() => {
      if (!this.stmt('SELECT 1 FROM rollouts WHERE id = ?').get(e.rolloutId)) {
        throw new NotFoundError('rollout_not_found', `no rollout ${e.rolloutId}`);
      }
      const res = this.stmt('INSERT INTO rollout_events (rollout_id, at, kind, message, data) VALUES (?, ?, ?, ?, ?)').run(
        e.rolloutId,
        e.at,
        e.kind,
        e.message ?? null,
        e.data === undefined ? null : json(e.data),
      );
      const out: RolloutEvent = { ...e, seq: Number(res.lastInsertRowid) };
      return out;
    });
  }

  rolloutEvents(rolloutId: string, opts: { afterSeq?: number | undefined; limit?: number | undefined } = {}): RolloutEvent[] {
    const n = clampLimit(opts.limit, DEFAULTS.store.rolloutEventsMaxLimit, DEFAULTS.store.rolloutEventsMaxLimit);
    const rows = this.stmt('SELECT * FROM rollout_events WHERE rollout_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(rolloutId, opts.afterSeq ?? 0, n);
    return (rows as RolloutEventRow[]).map(rowToRolloutEvent);
  }
}
