// The conditions a `wait_for` step understands, and the pipeline's bounds (from src/defaults.ts).
import { DEFAULTS } from '../../defaults.js';

/** Bounds of `glidepath pipeline run`: the `pipeline` section of src/defaults.ts. */
export const PIPELINE_DEFAULTS = DEFAULTS.pipeline;

/**
 * `green_ready`: the target version (step `version:`, else $VERSION, else any) is `ready`;
 * `version_ready`: the target version is loaded (ready, active or standby);
 * `healthy`: the admin API reports ready and the model has an active version whose workers are healthy;
 * `canary_succeeded`: the model's canary (of the target version) succeeded; any other end fails the step;
 * `rollout_done`: the model's canary (of the target version) ended, however it ended;
 * `rolling_succeeded`, `rolling_done`: the same of the model's rolling update (to the target version).
 */
export const WAIT_CONDITIONS = ['green_ready', 'version_ready', 'healthy', 'canary_succeeded', 'rollout_done', 'rolling_succeeded', 'rolling_done'] as const;
export type WaitCondition = (typeof WAIT_CONDITIONS)[number];
