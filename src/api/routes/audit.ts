// Admin routes: the audit log and the change-event stream (server-sent events).
import { BadRequestError } from '../../errors.js';
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { AdminContext } from './context.js';
import { eventStream } from './context.js';
import { auditView } from '../views.js';

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
        const last = Number(c.req.headers['last-event-id'] ?? c.query.get('since') ?? '0');
        // a browser's EventSource hears a named event only by that name, and there are dozens of kinds
        const named = c.query.get('unnamed') !== '1';
        eventStream(c.res, { behind: 'close' }, (send) => {
          const write = (e: { seq: number; kind: string }) => send(`id: ${e.seq}\n${named ? `event: ${e.kind}\n` : ''}data: ${JSON.stringify(e)}\n\n`);
          for (const e of cp.events.since(Number.isFinite(last) ? last : 0)) write(e);
          return cp.events.subscribe(write);
        });
      },
    ),
  ];
}
