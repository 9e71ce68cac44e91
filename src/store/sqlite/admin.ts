// The Store's administrative records: the audit log, API tokens, settings.
import { DEFAULTS } from '../../defaults.js';
import { ConflictError } from '../../errors.js';
import { json, parse, rowToAudit, rowToToken } from '../rows.js';
import type { AuditRow, TokenRow } from '../rows.js';
import type { AuditEntry, AuditInput, AuditQuery, TokenRecord } from '../types.js';
import { clampLimit } from '../shared.js';
import { FleetTables } from './fleet.js';

export class AdminTables extends FleetTables {
  // ---- audit ---------------------------------------------------------------------------------------------------

  appendAudit(e: AuditInput): AuditEntry {
    return this.tx(() => {
      const res = this.stmt('INSERT INTO audit (at, actor, action, target, params, result, error_code, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
        e.at,
        e.actor,
        e.action,
        e.target ?? null,
        e.params === undefined ? null : json(e.params),
        e.result,
        e.errorCode ?? null,
        e.durationMs ?? null,
      );
      const out: AuditEntry = { ...e, id: Number(res.lastInsertRowid) };
      return out;
    });
  }

  queryAudit(q: AuditQuery = {}): AuditEntry[] {
    const where: string[] = [];
    const args: unknown[] = [];
    const add = (cond: string, v: unknown) => {
      where.push(cond);
      args.push(v);
    };
    if (q.since !== undefined) add('at >= ?', q.since);
    if (q.until !== undefined) add('at < ?', q.until);
    if (q.actor !== undefined) add('actor = ?', q.actor);
    if (q.action !== undefined) add('action = ?', q.action);
    if (q.target !== undefined) add('target = ?', q.target);
    if (q.result !== undefined) add('result = ?', q.result);
    if (q.beforeId !== undefined) add('id < ?', q.beforeId);
    const n = clampLimit(q.limit, DEFAULTS.store.auditQueryLimit, DEFAULTS.store.auditQueryMaxLimit);
    const sql = `SELECT * FROM audit ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY at DESC, id DESC LIMIT ?`;
    return (this.stmt(sql).all(...args, n) as AuditRow[]).map(rowToAudit);
  }

  pruneAudit(before: number): number {
    return this.tx(() => this.stmt('DELETE FROM audit WHERE at < ?').run(before).changes);
  }

  // ---- tokens --------------------------------------------------------------------------------------------------

  putToken(t: TokenRecord): void {
    this.tx(() => {
      const other = this.stmt('SELECT name FROM tokens WHERE sha256 = ? AND name <> ?').get(t.sha256, t.name) as { name: string } | undefined;
      if (other) {
        throw new ConflictError('token_hash_exists', `token ${t.name} has the same secret as token ${other.name}`, {
          details: { token: t.name, other: other.name },
        });
      }
      this.stmt(
        `INSERT INTO tokens (name, role, sha256, created_at, source) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET role = excluded.role, sha256 = excluded.sha256, created_at = excluded.created_at,
           source = excluded.source`,
      ).run(t.name, t.role, t.sha256, t.createdAt, t.source);
    });
  }

  getToken(name: string): TokenRecord | undefined {
    const r = this.stmt('SELECT * FROM tokens WHERE name = ?').get(name) as TokenRow | undefined;
    return r ? rowToToken(r) : undefined;
  }

  listTokens(): TokenRecord[] {
    return (this.stmt('SELECT * FROM tokens ORDER BY name').all() as TokenRow[]).map(rowToToken);
  }

  deleteToken(name: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM tokens WHERE name = ?').run(name).changes > 0);
  }

  // ---- settings ------------------------------------------------------------------------------------------------

  getSetting<T = unknown>(key: string): T | undefined {
    const r = this.stmt('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
    return r ? parse<T>(r.value) : undefined;
  }

  setSetting(key: string, value: unknown, at: number): void {
    this.tx(() => {
      this.stmt(
        `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ).run(key, json(value), at);
    });
  }

  deleteSetting(key: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM settings WHERE key = ?').run(key).changes > 0);
  }
}
