// Every default value Glidepath uses, in one place: this object, assembled from src/defaults/ (one
// file per area, each value with the reason for it). Other modules import DEFAULTS from here; no magic
// numbers elsewhere.
import { DATA_PLANE } from './defaults/data-plane.js';
import { SIM } from './defaults/sim.js';
import { CONTROL } from './defaults/control.js';
import { ROLLOUT } from './defaults/rollout.js';
import { HEALTH } from './defaults/health.js';
import { DASHBOARD } from './defaults/dashboard.js';

export const DEFAULTS = {
  ...DATA_PLANE,
  ...SIM,
  ...CONTROL,
  ...ROLLOUT,
  ...HEALTH,
  ...DASHBOARD,
} as const;

export type Defaults = typeof DEFAULTS;
