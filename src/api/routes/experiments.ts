// Admin routes: A/B experiments (start, show, analyse, stop).
import { z } from 'zod';
import { EXPERIMENT_METRICS } from '../../rollout/experiment-state.js';
import type { ExperimentMetric } from '../../rollout/experiment-state.js';
import type { RouteDef } from '../router.js';
import { get, noBody, post } from '../router.js';
import { experimentAnalysisView, experimentView } from '../rollout-views.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const createBody = z
  .object({
    a: z.string().min(1),
    b: z.string().min(1),
    split: z.number().gt(0).lt(1).optional(),
    metric: z.enum(EXPERIMENT_METRICS as [ExperimentMetric, ...ExperimentMetric[]]),
    min_detectable_effect: z.number().positive().optional(),
    alpha: z.number().gt(0).lt(0.5).optional(),
    power: z.number().gt(0).lt(1).optional(),
  })
  .strict();
const stopBody = z.object({ promote: z.enum(['a', 'b']).optional() }).strict();

export function experimentRoutes({ cp, controllers }: AdminContext): RouteDef[] {
  const exp = controllers.experiments;
  return [
    post('/models/:model/experiments', { role: 'operator', body: createBody, summary: 'start an A/B experiment between two loaded versions' }, async (c, b) =>
      experimentView(
        await exp.create(
          modelOf(cp, c),
          { a: b.a, b: b.b, split: b.split, metric: b.metric, minDetectableEffect: b.min_detectable_effect, alpha: b.alpha, power: b.power },
          actorOf(c),
        ),
      ),
    ),
    get('/models/:model/experiments', { role: 'viewer', summary: 'the running (or last) experiment' }, async (c) =>
      experimentView(await exp.get(modelOf(cp, c), c.query.get('id') ?? undefined)),
    ),
    post('/models/:model/experiments/analyze', { role: 'viewer', body: noBody, summary: 'analyse the running experiment now' }, async (c) =>
      experimentAnalysisView(await exp.analyze(modelOf(cp, c))),
    ),
    post(
      '/models/:model/experiments/stop',
      { role: 'operator', body: stopBody, summary: 'stop the experiment: restore the previous route, or promote a or b' },
      async (c, b) => experimentView(await exp.stopExperiment(modelOf(cp, c), { promote: b.promote }, actorOf(c))),
    ),
  ];
}
