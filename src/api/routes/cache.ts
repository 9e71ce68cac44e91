// Admin route: the weight cache (download, verify, evict least recently used).
import { z } from 'zod';
import { cacheDownload, cacheResultView } from '../../fleet/cache.js';
import type { RouteDef } from '../router.js';
import { post } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const cacheBody = z.object({ force: z.boolean().optional() }).strict();

export function cacheRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    post(
      '/models/:model/versions/:version/cache',
      {
        role: 'operator',
        body: cacheBody,
        summary:
          "cache download: copy the version's weights into the weight cache, verify the weight hash, evict least recently used (never active or standby); force re-downloads",
      },
      async (c, b) => cacheResultView(await cacheDownload(cp, modelOf(cp, c), c.params.version as string, actorOf(c), { force: b.force ?? false })),
    ),
  ];
}
