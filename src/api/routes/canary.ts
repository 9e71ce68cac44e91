// Admin routes: the progressive canary (start, the operator view with live numbers, history,
// events, pause / resume / promote / abort).
import { z } from 'zod';
import { durationMs } from '../../config/schema-parts.js';
import { DEFAULTS } from '../../defaults.js';
import { TERMINAL, currentPercent } from '../../rollout/canary-state.js';
import type { Actor } from '../../rollout/ports.js';
import { stagePlanFor } from '../../rollout/stage-plan.js';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import { canaryEventView, canaryHistoryEntry, canaryStateView, judgeStatsView, stagePlanView, windowView } from '../rollout-views.js';
import type { CanaryEventView, CanaryStartView, CanaryView } from '../types.js';
import type { AdminContext } from './context.js';
import { actorOf, eventPage, modelOf } from './context.js';

const startBody = z
  .object({
    version: z.string().min(1),
    stages: z.array(z.number()).max(DEFAULTS.rollout.maxStages, `at most ${DEFAULTS.rollout.maxStages} stages`).optional(),
    stage_duration_ms: durationMs().optional(),
    shadow_share: z.number().min(0).max(1).optional(),
  })
  .strict();
const reasonBody = z.object({ reason: z.string().optional() }).strict();

/** Operator view of a canary: stage, weights, both versions' live windows, verdicts, next decision. */
export async function canaryView({ controllers }: AdminContext, model: string, id?: string): Promise<CanaryView> {
  const { canary, ports, judge } = controllers;
  const s = await canary.get(model, id);
  const now = ports.clock.now();
  const route = ports.routes.current(model);
  const win = (v: string) => ports.telemetry.stats(model, v, now);
  const live = canary.sampleCounts(model);
  const minSamples = live?.min_samples ?? DEFAULTS.canary.latency.minSamples;
  const canaryWin = win(s.canary);
  const rate = canaryWin.rps;
  const stageLeftMs = Math.max(0, s.stageStartedAt + s.stageDurationMs - now);
  const samplesLeft = live === undefined ? 0 : Math.max(0, minSamples - live.canary);
  const samplesEtaMs = samplesLeft === 0 ? 0 : rate > 0 ? (samplesLeft / rate) * 1000 : null;
  return {
    ...canaryStateView(s),
    percent: currentPercent(s),
    weights: Object.fromEntries(route.versions.map((v) => [v.id, v.weight])),
    windows: { [s.stable]: windowView(win(s.stable)), [s.canary]: windowView(canaryWin) },
    samples: live ?? null,
    next_decision: TERMINAL.includes(s.phase)
      ? null
      : {
          stage_holds_ms: stageLeftMs,
          samples_needed: samplesLeft,
          samples_eta_ms: samplesEtaMs,
          earliest_ms: samplesEtaMs === null ? null : Math.max(stageLeftMs, samplesEtaMs),
        },
    judge: judge ? judgeStatsView(judge.stats()) : null,
  };
}

export function canaryRoutes(ctx: AdminContext): RouteDef[] {
  const { cp } = ctx;
  const canary = ctx.controllers.canary;
  const command = (verb: 'pause' | 'resume' | 'promote' | 'abort', model: string, actor: Actor, reason: string | undefined) => {
    switch (verb) {
      case 'pause':
        return canary.pause(model, actor, reason);
      case 'resume':
        return canary.resume(model, actor);
      case 'promote':
        return canary.promote(model, actor);
      case 'abort':
        return canary.abort(model, actor, reason);
    }
  };
  return [
    post(
      '/models/:model/canary',
      { role: 'operator', body: startBody, summary: 'start a progressive canary of a version against the active one' },
      async (c, b): Promise<CanaryStartView> => {
        const s = await canary.start(
          modelOf(cp, c),
          { version: b.version, stages: b.stages, stageDurationMs: b.stage_duration_ms, shadowShare: b.shadow_share },
          actorOf(c),
        );
        // how long its stages should take at the live rate (the same power analysis as `plan`)
        return {
          ...(await canaryView(ctx, s.model, s.id)),
          stage_plan: stagePlanView(stagePlanFor(ctx.controllers.ports, s.model, { stages: s.stages, stageDurationMs: s.stageDurationMs })),
        };
      },
    ),
    get('/models/:model/canary', { role: 'viewer', summary: 'the running (or last) canary with live numbers' }, (c) =>
      canaryView(ctx, modelOf(cp, c), c.query.get('id') ?? undefined),
    ),
    get('/models/:model/canary/history', { role: 'viewer', summary: 'past canaries of the model, newest first' }, async (c) =>
      (await canary.history(modelOf(cp, c), 50)).map(canaryHistoryEntry),
    ),
    get(
      '/models/:model/canary/events',
      { role: 'viewer', summary: 'the events of a canary (id=…, default the current one), oldest first; after=SEQ and limit=N (at most 10,000) page them' },
      async (c): Promise<CanaryEventView[]> => {
        const m = modelOf(cp, c);
        const page = eventPage(c.query);
        // resolved here too so that each event can name its rollout
        const { id } = await canary.get(m, c.query.get('id') ?? undefined);
        return (await canary.events(m, id, page)).map((e) => canaryEventView(id, e));
      },
    ),
    ...(['pause', 'resume', 'promote', 'abort'] as const).map((verb) =>
      post(`/models/:model/canary/${verb}`, { role: 'operator', body: reasonBody, summary: `${verb} the running canary` }, async (c, b) => {
        const m = modelOf(cp, c);
        const s = await command(verb, m, actorOf(c), b.reason);
        return canaryView(ctx, m, s.id);
      }),
    ),
  ];
}
