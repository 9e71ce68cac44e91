// The Store's versions: rows, transitions, the one-active rule, active history.
import { DEFAULTS } from '../../defaults.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { ActivePeriod, Version, VersionTransition } from '../../domain/version.js';
import { rowToActive, rowToTransition, rowToVersion, versionToRow } from '../rows.js';
import type { ActiveRow, TransitionRow, VersionRow } from '../rows.js';
import type { ActivationInput, VersionFilter } from '../types.js';
import { clampLimit } from '../shared.js';
import { SqlDb } from './db.js';

export class VersionTables extends SqlDb {
  // ---- versions ---------------------------------------------------------------------------------------

  getVersion(model: string, id: string): Version | undefined {
    const r = this.stmt('SELECT * FROM versions WHERE model = ? AND id = ?').get(model, id) as VersionRow | undefined;
    return r ? rowToVersion(r) : undefined;
  }

  listVersions(filter: VersionFilter = {}): Version[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.model !== undefined) {
      where.push('model = ?');
      args.push(filter.model);
    }
    if (filter.status !== undefined) {
      if (filter.status.length === 0) return [];
      where.push(`status IN (${filter.status.map(() => '?').join(',')})`);
      args.push(...filter.status);
    }
    const sql = `SELECT * FROM versions ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY model, registered_at, id`;
    return (this.stmt(sql).all(...args) as VersionRow[]).map(rowToVersion);
  }

  private checkOneActive(v: Version): void {
    if (v.status !== 'active') return;
    const other = this.stmt("SELECT id FROM versions WHERE model = ? AND status = 'active' AND id <> ?").get(v.model, v.id) as { id: string } | undefined;
    if (other) {
      throw new ConflictError('active_exists', `model ${v.model} already has an active version (${other.id}); swap instead`, {
        details: { model: v.model, active: other.id, version: v.id },
      });
    }
  }

  insertVersion(v: Version): void {
    this.tx(() => {
      if (this.getVersion(v.model, v.id)) {
        throw new ConflictError('version_exists', `version ${v.model}/${v.id} is already registered`, {
          details: { model: v.model, version: v.id },
        });
      }
      this.checkOneActive(v);
      const r = versionToRow(v);
      this.stmt(
        `INSERT INTO versions (model, id, status, card_checksum, weight_hash, base_model, quantization, tp, spec, warmup_tokens,
           registered_at, updated_at, loaded_at, load_time_ms, activated_at, deactivated_at, gpus, health, rollback_eligible,
           rollback_blocked, failure, probes)
         VALUES (@model, @id, @status, @card_checksum, @weight_hash, @base_model, @quantization, @tp, @spec, @warmup_tokens,
           @registered_at, @updated_at, @loaded_at, @load_time_ms, @activated_at, @deactivated_at, @gpus, @health,
           @rollback_eligible, @rollback_blocked, @failure, @probes)`,
      ).run(r);
    });
  }

  updateVersion(v: Version): void {
    this.tx(() => {
      this.checkOneActive(v);
      const r = versionToRow(v);
      const res = this.stmt(
        `UPDATE versions SET status = @status, card_checksum = @card_checksum, weight_hash = @weight_hash,
           base_model = @base_model, quantization = @quantization, tp = @tp, spec = @spec, warmup_tokens = @warmup_tokens,
           registered_at = @registered_at, updated_at = @updated_at, loaded_at = @loaded_at, load_time_ms = @load_time_ms,
           activated_at = @activated_at, deactivated_at = @deactivated_at, gpus = @gpus, health = @health,
           rollback_eligible = @rollback_eligible, rollback_blocked = @rollback_blocked, failure = @failure, probes = @probes
         WHERE model = @model AND id = @id`,
      ).run(r);
      if (res.changes === 0) {
        throw new NotFoundError('version_not_found', `no version ${v.model}/${v.id}`, { details: { model: v.model, version: v.id } });
      }
    });
  }

  appendVersionTransition(t: VersionTransition): void {
    this.tx(() => {
      this.stmt('INSERT INTO version_transitions (model, version_id, from_status, to_status, at, actor, reason) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
        t.model,
        t.versionId,
        t.from,
        t.to,
        t.at,
        t.actor ?? null,
        t.reason ?? null,
      );
    });
  }

  versionTransitions(model: string, id: string): VersionTransition[] {
    const rows = this.stmt('SELECT * FROM version_transitions WHERE model = ? AND version_id = ? ORDER BY seq').all(model, id);
    return (rows as TransitionRow[]).map(rowToTransition);
  }

  recordActivation(a: ActivationInput): void {
    this.tx(() => {
      this.stmt('UPDATE active_history SET until = ? WHERE model = ? AND until IS NULL').run(a.at, a.model);
      this.stmt('INSERT INTO active_history (model, version_id, since, actor, reason) VALUES (?, ?, ?, ?, ?)').run(
        a.model,
        a.versionId,
        a.at,
        a.actor ?? null,
        a.reason ?? null,
      );
    });
  }

  recordDeactivation(model: string, versionId: string, at: number): void {
    this.tx(() => {
      this.stmt('UPDATE active_history SET until = ? WHERE model = ? AND version_id = ? AND until IS NULL').run(at, model, versionId);
    });
  }

  activeHistory(model: string, limit?: number): ActivePeriod[] {
    const n = clampLimit(limit, DEFAULTS.store.listLimit, DEFAULTS.store.listLimit);
    const rows = this.stmt('SELECT * FROM active_history WHERE model = ? ORDER BY seq DESC LIMIT ?').all(model, n);
    return (rows as ActiveRow[]).map(rowToActive);
  }
}
