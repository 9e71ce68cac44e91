// Admin routes: the route in force (read, replace by hand).
import { z } from 'zod';
import { stickySalt } from '../../config/schema-parts.js';
import type { RouteSpec } from '../../domain/route.js';
import { ConflictError } from '../../errors.js';
import { routeChangeView, routeView } from '../fleet-views.js';
import type { RouteDef } from '../router.js';
import { get, put } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';
import { takesTurns } from '../../config/time-sharing.js';

const routeBody = z
  .object({
    weights: z.record(z.string(), z.number()),
    stable: z.string().optional(),
    overrides: z.record(z.string(), z.string()).optional(),
    // as the config's: non-empty, at most DEFAULTS.gateway.maxStickySaltChars (hashed on every sticky request)
    sticky_salt: stickySalt().optional(),
    // GET answered `stickySalt` before the API was snake_case: a client that sends it back gets a
    // 400 naming the field, rather than a bare "unknown key" (it was never accepted here)
    stickySalt: z
      .never({ error: 'renamed: the field is sticky_salt (the admin API is snake_case)' })
      .optional()
      .meta({ description: 'refused: renamed sticky_salt' }),
    shadow: z
      .object({ version: z.string(), share: z.number().min(0).max(1) })
      .strict()
      .nullable()
      .optional(),
    expect_revision: z.number().int().nonnegative().optional(),
  })
  .strict();

export function routeRoutes({ cp, controllers: { ports } }: AdminContext): RouteDef[] {
  return [
    get('/models/:model/route', { role: 'viewer', summary: 'the route in force, with configured vs actual shares' }, (c) => {
      const st = cp.dp.model(modelOf(cp, c));
      return routeView(st.route, st.split.shares());
    }),
    put(
      '/models/:model/route',
      { role: 'operator', body: routeBody, summary: 'replace the route (weights, overrides, shadow); validated, atomic, persisted' },
      (c, b) => {
        const m = modelOf(cp, c);
        return ports.exclusive(m, () =>
          ports.audited(actorOf(c), 'set_route', m, b, async () => {
            const cur = ports.routes.current(m);
            if (b.expect_revision !== undefined && b.expect_revision !== cur.revision) {
              throw new ConflictError('route_revision_conflict', `route of ${m} is at revision ${cur.revision}, not ${b.expect_revision}`);
            }
            const spec: RouteSpec = {
              model: m,
              weights: b.weights,
              stable: b.stable,
              overrides: b.overrides ?? cur.overrides,
              stickySalt: b.sticky_salt ?? cur.stickySalt,
              shadow: b.shadow === null ? undefined : (b.shadow ?? cur.shadow),
            };
            refuseSharedRoute(
              cp,
              m,
              spec,
              cur.versions.filter((v) => v.weight > 0).map((v) => v.id),
            );
            const { route, switchMs } = await ports.routes.publish(spec);
            return routeChangeView(route, switchMs);
          }),
        );
      },
    ),
  ];
}

/**
 * A model whose versions take turns on the same GPUs (a time-share group's member, a time-shared
 * standby): its route keeps serving the one version it serves (no split, no shadow, no override);
 * another version is put in by a swap or a rollback, which sleep one before waking the other.
 */
function refuseSharedRoute(cp: AdminContext['cp'], model: string, spec: RouteSpec, serving: readonly string[]): void {
  if (!takesTurns(cp.modelConfig(model), cp.cfg.timeSharing)) return;
  const weighted = Object.entries(spec.weights)
    .filter(([, w]) => w > 0)
    .map(([id]) => id);
  const wrong =
    weighted.length !== 1
      ? `it serves one version, not ${weighted.length}`
      : spec.shadow !== undefined
        ? 'it mirrors to no shadow'
        : Object.keys(spec.overrides ?? {}).length > 0
          ? 'it has no category overrides'
          : !serving.includes(weighted[0] as string)
            ? `${weighted[0] as string} is put in by a swap or a rollback (they wake it after ${serving.join(', ')} sleeps)`
            : undefined;
  if (wrong !== undefined)
    throw new ConflictError('time_shared_standby', `model ${model}'s versions take turns on the same GPUs: its route cannot be changed so (${wrong})`);
}
