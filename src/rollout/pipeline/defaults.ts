// Bounds and defaults of `glidepath pipeline run` (kept beside the pipeline code until they move
// into src/defaults.ts with the rest), and the conditions a `wait_for` step understands.

export const PIPELINE_DEFAULTS = {
  /** The whole pipeline, every stage and step included. */
  totalTimeoutMs: 2 * 3_600_000,
  /** One `run` or `on_failure` command (loading 70B weights takes minutes, seed 000: 45–120 s). */
  runTimeoutMs: 30 * 60_000,
  /** One `wait_for` step. */
  waitTimeoutMs: 15 * 60_000,
  /** How long `monitor: health_gates` watches when the step has no `for:`. */
  monitorForMs: 5 * 60_000,
  /** How long `monitor: health_gates` with `until:` may wait for its condition (a canary takes a while). */
  monitorUntilMs: 2 * 3_600_000,
  /** How often the trigger is evaluated when the step has no `every:` (seed 001 checks every 5 s). */
  monitorEveryMs: 5_000,
  /** How often `wait_for` polls the admin API. */
  pollMs: 1_000,
  /** After SIGTERM, how long a timed-out command gets before SIGKILL. */
  killGraceMs: 5_000,
  /** One admin API call made by the runner. */
  apiTimeoutMs: 10_000,
  /** Consecutive admin API failures after which a wait_for or monitor step fails. */
  maxApiFailures: 3,
  /** One notification POST. */
  notifyTimeoutMs: 5_000,
} as const;

/**
 * `green_ready`: the target version (step `version:`, else $VERSION, else any) is `ready`;
 * `version_ready`: the target version is loaded (ready, active or standby);
 * `healthy`: the admin API reports ready and the model has an active version whose workers are healthy;
 * `canary_succeeded`: the model's canary (of the target version) succeeded; any other end fails the step;
 * `rollout_done`: the model's canary (of the target version) ended, however it ended.
 */
export const WAIT_CONDITIONS = ['green_ready', 'version_ready', 'healthy', 'canary_succeeded', 'rollout_done'] as const;
export type WaitCondition = (typeof WAIT_CONDITIONS)[number];
