// Admin routes: a model's LoRA adapters — list (with the workers that hold each), register, remove;
// and an adapter's canary (start, the view with its live samples, history, events, pause / resume /
// promote / abort).
import { z } from 'zod';
import { durationMs } from '../../config/schema-parts.js';
import { DEFAULTS } from '../../defaults.js';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import { NotFoundError } from '../../errors.js';
import { adapterCanaryStateView } from '../../rollout/adapter-canary-views.js';
import type { Actor } from '../../rollout/ports.js';
import { canaryEventView } from '../rollout-views.js';
import type { AdapterCanaryView, CanaryEventView } from '../types.js';
import type { AdminContext } from './context.js';
import { actorOf, eventPage, modelOf } from './context.js';

const registerBody = z
  .object({ name: z.string().min(1).max(128), source: z.string().min(1).max(4_096), version: z.string().min(1).max(128).optional() })
  .strict();
const removeBody = z.object({ name: z.string().min(1).max(128) }).strict();
const canaryBody = z
  .object({
    source: z.string().min(1).max(4_096),
    version: z.string().min(1).max(64),
    stages: z.array(z.number()).max(DEFAULTS.rollout.maxStages, `at most ${DEFAULTS.rollout.maxStages} stages`).optional(),
    stage_duration_ms: durationMs().optional(),
  })
  .strict();
const reasonBody = z.object({ reason: z.string().max(1_000).optional() }).strict();

/** The adapter named in the path, of the model named there (NotFoundError otherwise). */
function adapterOf(cp: AdminContext['cp'], c: Parameters<typeof modelOf>[1]): string {
  const model = modelOf(cp, c);
  const name = c.params.name as string;
  if (!cp.adapters.list(model).some((a) => a.name === name)) throw new NotFoundError('adapter_not_found', `${model} has no adapter ${name}`);
  return name;
}

/** The canary with the samples it is judged on now (null when it does not run in this process). */
async function canaryView(ctx: AdminContext, name: string, id?: string): Promise<AdapterCanaryView> {
  const ac = ctx.controllers.adapterCanary;
  const s = await ac.get(name, id);
  return { ...adapterCanaryStateView(s), samples: s.phase === 'progressing' || s.phase === 'paused' ? (ac.sampleCounts(name) ?? null) : null };
}

export function adapterRoutes(ctx: AdminContext): RouteDef[] {
  const { cp } = ctx;
  const ac = ctx.controllers.adapterCanary;
  const command = (verb: 'pause' | 'resume' | 'promote' | 'abort', name: string, actor: Actor, reason: string | undefined) => {
    switch (verb) {
      case 'pause':
        return ac.pause(name, actor, reason);
      case 'resume':
        return ac.resume(name, actor);
      case 'promote':
        return ac.promote(name, actor);
      case 'abort':
        return ac.abort(name, actor, reason);
    }
  };
  return [
    get(
      '/models/:model/adapters',
      { role: 'viewer', summary: "the model's LoRA adapters: source, version, where they come from, and the workers that hold each" },
      (c) => cp.adapters.list(modelOf(cp, c)),
    ),
    post(
      '/models/:model/adapters',
      {
        role: 'operator',
        body: registerBody,
        summary: 'register a LoRA adapter (or a new source or version of one): requests naming it go to the model’s workers',
      },
      (c, b) => cp.adapters.register(modelOf(cp, c), b, actorOf(c)),
    ),
    post(
      '/models/:model/adapters/remove',
      { role: 'operator', body: removeBody, summary: 'remove an adapter registered through the API (one from the config is changed there)' },
      (c, b) => cp.adapters.remove(modelOf(cp, c), b.name, actorOf(c)),
    ),
    post(
      '/models/:model/adapters/:name/canary',
      {
        role: 'operator',
        body: canaryBody,
        summary: 'start a canary of a new version of the adapter: a share of its requests, stage by stage, judged against the registered one',
      },
      async (c, b) => {
        const name = adapterOf(cp, c);
        const s = await ac.start(name, { source: b.source, version: b.version, stages: b.stages, stageDurationMs: b.stage_duration_ms }, actorOf(c));
        return canaryView(ctx, name, s.id);
      },
    ),
    get('/models/:model/adapters/:name/canary', { role: 'viewer', summary: "the adapter's running (or last) canary" }, (c) =>
      canaryView(ctx, adapterOf(cp, c), c.query.get('id') ?? undefined),
    ),
    get('/models/:model/adapters/:name/canary/history', { role: 'viewer', summary: "the adapter's past canaries, newest first" }, async (c) =>
      (await ac.history(adapterOf(cp, c), 50)).map((r) => adapterCanaryStateView(r.state)),
    ),
    get(
      '/models/:model/adapters/:name/canary/events',
      {
        role: 'viewer',
        summary: "the events of the adapter's canary (id=…, default the current one), oldest first; after=SEQ and limit=N (at most 10,000) page them",
      },
      async (c): Promise<CanaryEventView[]> => {
        const name = adapterOf(cp, c);
        const page = eventPage(c.query);
        const { id } = await ac.get(name, c.query.get('id') ?? undefined);
        return (await ac.events(name, id, page)).map((e) => canaryEventView(id, e));
      },
    ),
    ...(['pause', 'resume', 'promote', 'abort'] as const).map((verb) =>
      post(
        `/models/:model/adapters/:name/canary/${verb}`,
        { role: 'operator', body: reasonBody, summary: `${verb} the adapter's running canary` },
        async (c, b) => {
          const name = adapterOf(cp, c);
          const s = await command(verb, name, actorOf(c), b.reason);
          return canaryView(ctx, name, s.id);
        },
      ),
    ),
  ];
}
