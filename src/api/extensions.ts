// Admin API extension point: feature modules (canary, experiments, cache, plan) add their endpoints here.
import type { ControlPlane } from '../control/plane.js';
import type { RouteDef } from './router.js';

export interface ApiExtension {
  readonly name: string;
  routes(cp: ControlPlane): RouteDef[];
}
