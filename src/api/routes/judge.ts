// Admin route: the LLM judge's counters.
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { AdminContext } from './context.js';

export function judgeRoutes({ controllers: { judge } }: AdminContext): RouteDef[] {
  return [
    get('/judge', { role: 'viewer', summary: 'LLM judge counters (judged, failures, dropped, queue)' }, () => ({
      configured: judge !== undefined,
      ...(judge?.stats() ?? {}),
    })),
  ];
}
