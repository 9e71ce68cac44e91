// Admin routes: the LLM judge's counters and its last decisions.
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import { judgeStatsView } from '../rollout-views.js';
import type { JudgeSamplesView, JudgeView } from '../types.js';
import type { AdminContext } from './context.js';
import { modelOf } from './context.js';

export function judgeRoutes({ cp, controllers: { judge } }: AdminContext): RouteDef[] {
  return [
    get('/judge', { role: 'viewer', summary: 'LLM judge counters (judged, failures, dropped, queue)' }, (): JudgeView => ({
      configured: judge !== undefined,
      ...(judge ? judgeStatsView(judge.stats()) : {}),
    })),
    get(
      '/judge/samples',
      { role: 'viewer', summary: "the judge's last decisions, newest first (?model= one model's); prompts and answers only with capture_prompts" },
      (c): JudgeSamplesView => {
        const m = c.query.get('model');
        const model = m === null ? undefined : modelOf(cp, { ...c, params: { ...c.params, model: m } });
        return {
          configured: judge !== undefined,
          capture_prompts: judge?.capturesPrompts ?? false,
          samples: (judge?.samples(model) ?? []).map((s) => ({
            at: s.at,
            model: s.model,
            kind: s.kind,
            version: s.version,
            adapter: s.adapter ?? null,
            score: s.score,
            against: s.against ?? null,
            prompt: s.prompt ?? null,
            answer: s.answer ?? null,
            answer_against: s.answerAgainst ?? null,
          })),
        };
      },
    ),
  ];
}
