// Admin route: the LLM judge's counters.
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import { judgeStatsView } from '../rollout-views.js';
import type { JudgeView } from '../types.js';
import type { AdminContext } from './context.js';

export function judgeRoutes({ controllers: { judge } }: AdminContext): RouteDef[] {
  return [
    get('/judge', { role: 'viewer', summary: 'LLM judge counters (judged, failures, dropped, queue)' }, (): JudgeView => ({
      configured: judge !== undefined,
      ...(judge ? judgeStatsView(judge.stats()) : {}),
    })),
  ];
}
