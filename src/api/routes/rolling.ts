// Admin routes: rolling updates (start, the live view with per-role progress, history, events,
// pause / resume / abort / undo; docs/rolling.md).
import { z } from 'zod';
import { durationMs } from '../../config/schema-parts.js';
import { DEFAULTS } from '../../defaults.js';
import { budgetText } from '../../rollout/rolling-plan.js';
import type { RoleNow } from '../../rollout/rolling-plan.js';
import { ROLLING_TERMINAL, budgetsNow, etaMs } from '../../rollout/rolling-state.js';
import type { RollingState } from '../../rollout/rolling-state.js';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf, eventPage, modelOf } from './context.js';

const budget = z.union([z.number().int().nonnegative(), z.string().min(1)]);
/** A step's or an update's limit: up to a week. */
const limitMs = durationMs(DEFAULTS.rolling.maxLimitMs);
const settings = {
  max_surge: budget.optional(),
  max_unavailable: budget.optional(),
  step_timeout_ms: limitMs.optional(),
  progress_deadline_ms: limitMs.optional(),
  on_failure: z.enum(['pause', 'rollback']).optional(),
};
const startBody = z.object({ to: z.string().min(1), partition: z.number().int().nonnegative().optional(), ...settings }).strict();
const undoBody = z.object(settings).strict();
const reasonBody = z.object({ reason: z.string().max(1_000).optional() }).strict();
const resumeBody = z.object({ partition: z.number().int().nonnegative().optional() }).strict();

/** One role's progress: what serves, what the budgets allow and how much of them is used. */
export interface RollingRoleView {
  desired: number;
  old: number;
  ready: number;
  starting: number;
  max_surge: number;
  surge_used: number;
  max_unavailable: number;
  unavailable_used: number;
}

export interface RollingView {
  id: string;
  model: string;
  from: string;
  to: string;
  phase: string;
  message: string | null;
  paused_reason: string | null;
  rollback_reason: string | null;
  direction: 'forward' | 'back';
  /** A restart in place (`rollout restart`): one version, its workers replaced by fresh ones. */
  in_place: boolean;
  max_surge: number | string;
  max_unavailable: number | string;
  partition: number;
  step_timeout_ms: number;
  progress_deadline_ms: number;
  on_failure: string;
  step: number;
  roles: Record<string, RollingRoleView>;
  /** Old workers being drained and stopped right now. */
  stopping: number;
  weights: Record<string, number>;
  started_at: number;
  updated_at: number;
  finished_at: number | null;
  elapsed_ms: number;
  eta_ms: number | null;
  deadline_exceeded_at: number | null;
  failures: { at: number; worker: string | null; reason: string }[];
  trace: { at: number; step: number; direction: string; share: number; roles: Record<string, RoleNow>; started: Record<string, number>; stopped: string[] }[];
}

export async function rollingView({ controllers, cp }: AdminContext, model: string, id?: string): Promise<RollingView> {
  const rc = controllers.rolling;
  const s: RollingState = await rc.get(model, id);
  const now = controllers.ports.clock.now();
  const live = ROLLING_TERMINAL.includes(s.phase) ? undefined : rc.liveCounts(model);
  const counts = live?.roles ?? s.trace.at(-1)?.roles ?? {};
  const roles: Record<string, RollingRoleView> = {};
  for (const [r, b] of Object.entries(budgetsNow(s))) {
    const c = counts[r] ?? { old: 0, ready: 0, starting: 0 };
    roles[r] = {
      desired: b.desired,
      old: c.old,
      ready: c.ready,
      starting: c.starting,
      max_surge: b.surge,
      surge_used: Math.max(0, c.old + c.ready + c.starting - b.desired),
      max_unavailable: b.unavailable,
      unavailable_used: Math.max(0, b.desired - c.old - c.ready),
    };
  }
  const back = s.inPlace === undefined && (s.phase === 'rolling_back' || s.resumeTo === 'rolling_back' || s.phase === 'aborted' || s.phase === 'rolled_back');
  return {
    id: s.id,
    model: s.model,
    from: s.from,
    to: s.to,
    phase: s.phase,
    message: s.message ?? null,
    paused_reason: s.pausedReason ?? null,
    rollback_reason: s.rollbackReason ?? null,
    direction: back ? 'back' : 'forward',
    in_place: s.inPlace !== undefined,
    max_surge: budgetText(s.maxSurge),
    max_unavailable: budgetText(s.maxUnavailable),
    partition: s.partition,
    step_timeout_ms: s.stepTimeoutMs,
    progress_deadline_ms: s.progressDeadlineMs,
    on_failure: s.onFailure,
    step: s.step,
    roles,
    stopping: live?.stopping ?? 0,
    weights: Object.fromEntries(cp.route(model).versions.map((v) => [v.id, v.weight])),
    started_at: s.startedAt,
    updated_at: s.updatedAt,
    finished_at: s.finishedAt ?? null,
    elapsed_ms: (s.finishedAt ?? now) - s.startedAt,
    eta_ms: live && !back ? etaMs(s, counts, now) : null,
    deadline_exceeded_at: s.deadlineExceededAt ?? null,
    failures: s.failures.map((f) => ({ at: f.at, worker: f.worker ?? null, reason: f.reason })),
    trace: s.trace.map((t) => ({ at: t.at, step: t.step, direction: t.direction, share: t.share, roles: t.roles, started: t.started, stopped: t.stopped })),
  };
}

export function rollingRoutes(ctx: AdminContext): RouteDef[] {
  const { cp } = ctx;
  const rc = ctx.controllers.rolling;
  const opts = (b: z.infer<typeof undoBody>) => ({
    maxSurge: b.max_surge,
    maxUnavailable: b.max_unavailable,
    stepTimeoutMs: b.step_timeout_ms,
    progressDeadlineMs: b.progress_deadline_ms,
    onFailure: b.on_failure,
  });
  return [
    post(
      '/models/:model/rolling',
      {
        role: 'operator',
        body: startBody,
        summary: 'start a rolling update to a registered version: new workers a few at a time as their own pool, old ones drained and stopped',
      },
      async (c, b) => {
        const m = modelOf(cp, c);
        const s = await rc.start(m, { to: b.to, partition: b.partition, ...opts(b) }, actorOf(c));
        return rollingView(ctx, m, s.id);
      },
    ),
    get('/models/:model/rolling', { role: 'viewer', summary: 'the running (or last) rolling update with live per-role progress' }, (c) =>
      rollingView(ctx, modelOf(cp, c), c.query.get('id') ?? undefined),
    ),
    get('/models/:model/rolling/history', { role: 'viewer', summary: 'past rolling updates of the model, newest first' }, async (c) =>
      (await rc.history(modelOf(cp, c), 50)).map((r) => ({
        id: r.state.id,
        phase: r.state.phase,
        from: r.state.from,
        to: r.state.to,
        steps: r.state.step,
        created_at: r.createdAt,
        finished_at: r.state.finishedAt ?? null,
        message: r.state.message ?? null,
      })),
    ),
    get(
      '/models/:model/rolling/events',
      {
        role: 'viewer',
        summary: 'the events of a rolling update (id=…, default the current one), oldest first; after=SEQ and limit=N (at most 10,000) page them',
      },
      async (c) => {
        const m = modelOf(cp, c);
        const page = eventPage(c.query);
        const { id } = await rc.get(m, c.query.get('id') ?? undefined);
        return (await rc.events(m, id, page)).map((e) => ({ rollout: id, seq: e.seq, at: e.at, kind: e.kind, message: e.message ?? null }));
      },
    ),
    post('/models/:model/rolling/pause', { role: 'operator', body: reasonBody, summary: 'hold the rolling update where it is' }, async (c, b) => {
      const m = modelOf(cp, c);
      return rollingView(ctx, m, (await rc.pause(m, actorOf(c), b.reason)).id);
    }),
    post(
      '/models/:model/rolling/resume',
      { role: 'operator', body: resumeBody, summary: 'continue a paused rolling update (optionally with a new partition)' },
      async (c, b) => {
        const m = modelOf(cp, c);
        return rollingView(ctx, m, (await rc.resume(m, actorOf(c), { partition: b.partition })).id);
      },
    ),
    post('/models/:model/rolling/abort', { role: 'operator', body: reasonBody, summary: 'roll back to the old pool with the same budgets' }, async (c, b) => {
      const m = modelOf(cp, c);
      return rollingView(ctx, m, (await rc.abort(m, actorOf(c), b.reason)).id);
    }),
    post(
      '/models/:model/rolling/restart',
      {
        role: 'operator',
        body: undoBody,
        summary: "replace the active version's workers by fresh ones of the same version, a few at a time (a setting that keeps the card applied in place)",
      },
      async (c, b) => {
        const m = modelOf(cp, c);
        return rollingView(ctx, m, (await rc.restart(m, opts(b), actorOf(c))).id);
      },
    ),
    post(
      '/models/:model/rolling/undo',
      { role: 'operator', body: undoBody, summary: 'roll a finished update back to the version it replaced (a new rolling update)' },
      async (c, b) => {
        const m = modelOf(cp, c);
        return rollingView(ctx, m, (await rc.undo(m, actorOf(c), opts(b))).id);
      },
    ),
  ];
}
