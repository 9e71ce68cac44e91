// The cluster store's administrative records over key-value — the audit log (keyed by time, then id),
// API tokens, settings — completing the tables the KV store and its transactions share.
import { DEFAULTS } from '../../defaults.js';
import { ConflictError } from '../../errors.js';
import { clampLimit } from '../shared.js';
import type { AuditEntry, AuditInput, AuditQuery, TokenRecord } from '../types.js';
import { prefixRange } from './backend.js';
import { deleteIfThere, getJson, K, nextSeq, pad, putJson, values } from './keys.js';
import type { KvIo } from './layer.js';
import { KvFleet } from './fleet.js';
import { cmp } from './versions.js';

/** How many audit keys one read of a query asks for. */
const AUDIT_PAGE = 500;

export abstract class KvTables extends KvFleet {
  appendAudit(e: AuditInput): Promise<AuditEntry> {
    return this.call(async (io) => {
      const out: AuditEntry = { ...e, id: await nextSeq(io, 'audit') };
      putJson(io, auditKey(out), out);
      return out;
    });
  }

  queryAudit(q: AuditQuery = {}): Promise<AuditEntry[]> {
    return this.call(async (io) => {
      const n = clampLimit(q.limit, DEFAULTS.store.auditQueryLimit, DEFAULTS.store.auditQueryMaxLimit);
      const all = prefixRange(K.audit);
      const start = q.since === undefined ? all.start : K.audit + pad(q.since);
      let end = q.until === undefined ? all.end : K.audit + pad(q.until);
      const out: AuditEntry[] = [];
      // newest first, a page at a time, until `n` entries pass the filters — or the scan's bound: a
      // filter that matches nothing must not hold the store's queue through the whole log
      for (let scanned = 0; scanned < DEFAULTS.store.kvAuditScanMax; scanned += AUDIT_PAGE) {
        const page = await io.range({ start, end, reverse: true, limit: AUDIT_PAGE });
        for (const e of values<AuditEntry>(page)) {
          if (q.actor !== undefined && e.actor !== q.actor) continue;
          if (q.action !== undefined && e.action !== q.action) continue;
          if (q.target !== undefined && e.target !== q.target) continue;
          if (q.result !== undefined && e.result !== q.result) continue;
          if (q.beforeId !== undefined && e.id >= q.beforeId) continue;
          out.push(e);
          if (out.length === n) return out;
        }
        if (page.length < AUDIT_PAGE) return out;
        end = page[page.length - 1]?.key ?? start;
      }
      return out;
    });
  }

  pruneAudit(before: number): Promise<number> {
    return this.call((io) => pruneAuditSome(io, before));
  }

  putToken(t: TokenRecord): Promise<void> {
    return this.call(async (io) => {
      const other = (await tokens(io)).find((x) => x.sha256 === t.sha256 && x.name !== t.name);
      if (other) {
        throw new ConflictError('token_hash_exists', `token ${t.name} has the same secret as token ${other.name}`, {
          details: { token: t.name, other: other.name },
        });
      }
      putJson(io, K.token(t.name), t);
    });
  }

  getToken(name: string): Promise<TokenRecord | undefined> {
    return this.call((io) => getJson<TokenRecord>(io, K.token(name)));
  }

  listTokens(): Promise<TokenRecord[]> {
    return this.call(async (io) => (await tokens(io)).sort((a, b) => cmp(a.name, b.name)));
  }

  deleteToken(name: string): Promise<boolean> {
    return this.call((io) => deleteIfThere(io, K.token(name)));
  }

  getSetting<T = unknown>(key: string): Promise<T | undefined> {
    return this.call((io) => getJson<T>(io, K.setting(key)));
  }

  setSetting(key: string, value: unknown, _at: number): Promise<void> {
    return this.call((io) => {
      putJson(io, K.setting(key), value);
      return Promise.resolve();
    });
  }

  deleteSetting(key: string): Promise<boolean> {
    return this.call((io) => deleteIfThere(io, K.setting(key)));
  }
}

export function auditKey(e: AuditEntry): string {
  return `${K.audit}${pad(e.at)}/${pad(e.id)}`;
}

/** Delete audit entries older than `before`, at most `max` of them (all without `max`); returns how many. */
export async function pruneAuditSome(io: KvIo, before: number, max?: number): Promise<number> {
  const old = await io.range({ start: K.audit, end: K.audit + pad(before), limit: max });
  for (const { key } of old) io.del(key);
  return old.length;
}

async function tokens(io: KvIo): Promise<TokenRecord[]> {
  return values<TokenRecord>(await io.range(prefixRange(K.tokens)));
}
