// Admin routes: blue-green (deploy green, swap, instant rollback, retire) and stop-start.
import { z } from 'zod';
import { durationMs } from '../../config/schema-parts.js';
import { DEFAULTS } from '../../defaults.js';
import type { RouteDef } from '../router.js';
import { post } from '../router.js';
import { versionView } from '../views.js';
import type { AdminContext } from './context.js';
import { actorOf, longOp, modelOf } from './context.js';

/** A drain's limit: at most a day (a timer past 2^31 - 1 ms would fire at once). */
const drainTimeout = durationMs(DEFAULTS.durations.maxIntervalMs);
const deployBody = z.object({ version: z.string().min(1) }).strict();
const swapBody = z
  .object({
    to: z.string().optional(),
    mode: z.enum(['overlap', 'drain-first']).optional(),
    drain_timeout_ms: drainTimeout.optional(),
    standby: z.enum(['warm', 'sleep']).optional(),
    confirm: z.boolean().optional(),
  })
  .strict();
const rollbackBody = z.object({ reason: z.string().optional() }).strict();
const retireBody = z.object({ force: z.boolean().optional() }).strict();
const stopStartBody = z.object({ to: z.string().min(1), drain_timeout_ms: drainTimeout.optional() }).strict();

export function blueGreenRoutes({ cp, controllers }: AdminContext): RouteDef[] {
  const bg = controllers.blueGreen;
  return [
    post(
      '/models/:model/deploy',
      { role: 'operator', body: deployBody, summary: 'deploy green: load a version on free GPUs beside the active one, warm it, mark it ready' },
      (c, b) => {
        const m = modelOf(cp, c);
        return longOp(c, async (progress) => versionView(cp, await bg.deploy(m, b.version, actorOf(c), progress)));
      },
    ),
    post('/models/:model/swap', { role: 'operator', body: swapBody, summary: 'make the ready (green) version active; overlap or drain-first' }, (c, b) =>
      bg.swap(modelOf(cp, c), { to: b.to, mode: b.mode, drainTimeoutMs: b.drain_timeout_ms, standby: b.standby }, actorOf(c)),
    ),
    post(
      '/models/:model/stop-start',
      {
        role: 'operator',
        body: stopStartBody,
        summary:
          'replace the active version without spare GPUs: hold new requests, drain and unload it, load `to` on its GPUs (the old one back if `to` fails); the downtime measured',
      },
      (c, b) => {
        const m = modelOf(cp, c);
        return longOp(c, (progress) => controllers.stopStart.run(m, b.to, { drainTimeoutMs: b.drain_timeout_ms }, actorOf(c), progress));
      },
    ),
    post('/models/:model/rollback', { role: 'operator', body: rollbackBody, summary: 'instant rollback to the standby version (one route swap)' }, (c, b) =>
      bg.rollback(modelOf(cp, c), actorOf(c), b.reason),
    ),
    post(
      '/models/:model/versions/:version/retire',
      { role: 'operator', body: retireBody, summary: 'unload a version and free its GPUs (never the active one; standby only with force)' },
      (c, b) => bg.retire(modelOf(cp, c), c.params.version as string, { force: b.force ?? false }, actorOf(c)),
    ),
  ];
}
