// Admin routes: the system at a glance, workers, GPUs.
import { gpuEntryView } from '../fleet-views.js';
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import { statusView, workersView } from '../views.js';
import type { AdminContext } from './context.js';

export function statusRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    get('/status', { role: 'viewer', summary: 'models, routes, versions and workers at a glance' }, () => statusView(cp)),
    get('/workers', { role: 'viewer', summary: 'every worker with its state, load and GPUs' }, (c) => workersView(cp, c.query.get('model') ?? undefined)),
    get('/gpus', { role: 'viewer', summary: 'the GPU inventory and who holds each GPU' }, async () => (await cp.inventory.list()).map(gpuEntryView)),
  ];
}
