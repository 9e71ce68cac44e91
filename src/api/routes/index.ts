// Every admin route, area by area (one file each); the OpenAPI document is built from this list.
import type { RouteDef } from '../router.js';
import { adapterRoutes } from './adapters.js';
import { auditRoutes } from './audit.js';
import { blueGreenRoutes } from './bluegreen.js';
import { cacheRoutes } from './cache.js';
import { canaryRoutes } from './canary.js';
import { clusterRoutes } from './cluster.js';
import { capacityRoutes } from './capacity.js';
import type { AdminContext } from './context.js';
import { experimentRoutes } from './experiments.js';
import { healthRoutes } from './health.js';
import { judgeRoutes } from './judge.js';
import { monitorRoutes } from './monitor.js';
import { planRoutes } from './plan.js';
import { rollingRoutes } from './rolling.js';
import { schedulerRoutes } from './scheduler.js';
import { routeRoutes } from './routes.js';
import { seriesRoutes } from './series.js';
import type { SeriesRecorder } from '../series.js';
import { statusRoutes } from './status.js';
import { versionRoutes } from './versions.js';

export type { AdminContext } from './context.js';

export function adminRoutes(ctx: AdminContext, series: SeriesRecorder): RouteDef[] {
  return [
    ...statusRoutes(ctx),
    ...versionRoutes(ctx),
    ...healthRoutes(ctx),
    ...capacityRoutes(ctx),
    ...adapterRoutes(ctx),
    ...blueGreenRoutes(ctx),
    ...routeRoutes(ctx),
    ...planRoutes(ctx),
    ...cacheRoutes(ctx),
    ...canaryRoutes(ctx),
    ...experimentRoutes(ctx),
    ...rollingRoutes(ctx),
    ...schedulerRoutes(ctx),
    ...judgeRoutes(ctx),
    ...monitorRoutes(ctx),
    ...auditRoutes(ctx),
    ...clusterRoutes(ctx),
    ...seriesRoutes(ctx, series),
  ];
}
