// Admin route: the strategy planner (seed 000's comparison table for this cluster, with a recommendation).
import { BadRequestError } from '../../errors.js';
import { planFor } from '../../rollout/planner.js';
import { strategyPlanView } from '../rollout-views.js';
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { AdminContext } from './context.js';
import { modelOf } from './context.js';

export function planRoutes({ cp, controllers: { ports } }: AdminContext): RouteDef[] {
  return [
    get(
      '/models/:model/plan',
      {
        role: 'viewer',
        summary:
          'strategy comparison (extra GPUs, downtime, capacity drop, rollback and deploy time) for moving the active version to ?to=V on this cluster, with a recommendation',
      },
      async (c) => {
        const to = c.query.get('to');
        if (to === null || to === '') throw new BadRequestError('invalid_query', 'to: the version to plan a move to is required (?to=V)');
        return strategyPlanView(await planFor(ports, modelOf(cp, c), to));
      },
    ),
  ];
}
