// Admin routes: the audit log and the change-event stream (server-sent events).
import { BadRequestError } from '../../errors.js';
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { AdminContext } from './context.js';
import { eventSeq, eventStream } from './context.js';
import { auditView } from '../views.js';

/**
 * The latest time a JavaScript Date holds (ECMAScript: ±8.64e15 ms from the epoch). Audit times are
 * kept as 16-digit keys on etcd: anything past it, or before 1970, would not sort as a time.
 */
const MAX_TIME_MS = 8_640_000_000_000_000;

export function auditRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    get(
      '/audit',
      { role: 'viewer', summary: 'the audit log, newest first; filters since, until (epoch ms or ISO), actor, action, target, result, limit' },
      async (c) => {
        const q = c.query;
        const time = (k: string) => {
          const v = q.get(k);
          if (v === null) return undefined;
          const n = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
          if (!Number.isFinite(n)) throw new BadRequestError('invalid_query', `${k}: expected epoch ms or an ISO date, got ${JSON.stringify(v)}`);
          if (n < 0 || n > MAX_TIME_MS)
            throw new BadRequestError(
              'invalid_query',
              `${k}: expected a time from 1970 to the year 275760 (epoch ms 0 to ${MAX_TIME_MS}), got ${JSON.stringify(v.slice(0, 100))}`,
            );
          return n;
        };
        const limitS = q.get('limit');
        const limit = limitS === null ? undefined : Number(limitS);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 1))
          throw new BadRequestError('invalid_query', `limit: expected a positive integer, got ${JSON.stringify(limitS)}`);
        const result = q.get('result');
        if (result !== null && result !== 'ok' && result !== 'error')
          throw new BadRequestError('invalid_query', `result: expected ok or error, got ${JSON.stringify(result)}`);
        const entries = await cp.store.queryAudit({
          since: time('since'),
          until: time('until'),
          actor: q.get('actor') ?? undefined,
          action: q.get('action') ?? undefined,
          target: q.get('target') ?? undefined,
          result: result ?? undefined,
          limit,
        });
        return entries.map(auditView);
      },
    ),
    get(
      '/events',
      {
        role: 'viewer',
        summary: 'server-sent events of every change (Last-Event-ID resumes; unnamed=1 sends each without its event name, for EventSource clients)',
        raw: true,
      },
      (c) => {
        // the header (an EventSource reconnecting) wins over the query; a bad value is refused rather
        // than read as 0, which replayed the whole backlog
        const raw = c.req.headers['last-event-id'];
        const header = Array.isArray(raw) ? raw.join(', ') : raw;
        const since = c.query.get('since');
        // (an empty Last-Event-ID is what an EventSource whose last event had no id would mean: the start)
        const last = header !== undefined && header.trim() !== '' ? eventSeq(header, 'Last-Event-ID header') : since !== null ? eventSeq(since, 'since') : 0;
        // a browser's EventSource hears a named event only by that name, and there are dozens of kinds
        const named = c.query.get('unnamed') !== '1';
        eventStream(c.res, { behind: 'close' }, (send) => {
          const write = (e: { seq: number; kind: string }) => send(`id: ${e.seq}\n${named ? `event: ${e.kind}\n` : ''}data: ${JSON.stringify(e)}\n\n`);
          for (const e of cp.events.since(last)) write(e);
          return cp.events.subscribe(write);
        });
      },
    ),
  ];
}
