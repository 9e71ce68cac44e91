// Defaults of rollouts: canary stages and the judge, the LLM judge, pipelines, the canary judge's gates.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

export const ROLLOUT = {
  rollout: {
    /** Canary stages in percent of traffic (seed 001's progressive rollout). */
    stages: [2, 5, 10, 25, 50, 100],
    /** Least time at each stage before it may advance (it also waits for enough samples). */
    stageDurationMs: 5 * 60_000,
    /** Most stages one canary (of a version or of an adapter) may have: the defaults have 6; more than 20 is a list gone wrong, and each stage is a row of every view. */
    maxStages: 20,
    /**
     * `canary start` warns when the power analysis expects the stages to take longer than this at
     * the live request rate: seed 000's whole canary takes ~30 min, and one that outlasts the
     * operator's working hour was rarely meant (too little traffic for the small stages).
     */
    canaryLongWarnMs: 60 * 60_000,
    /**
     * The canary's first requests (shadow copies included) are left out of its judgement: a
     * version that just started serving runs on cold caches, fresh connections and unoptimised
     * code (Kayenta's `beginCanaryAnalysisAfterMins` for the same reason). Counted again after a
     * gateway restart, when the same is true.
     */
    canaryIgnoreFirstRequests: 10,
    /** Canary rollback: how long the canary's in-flight requests may finish before they are aborted. */
    rollbackDrainTimeoutMs: 30_000,
    /**
     * Samples kept per version and metric for one rollout's analysis. Bounds memory and the judge's
     * CPU (it runs on the gateway's event loop: ~5 ms at 1000 × 200 samples, ~300 ms at 50k × 50k);
     * past the bound the earliest samples of the rollout stand for that version.
     */
    maxSamplesPerVersion: 5_000,
    /** Verdict history kept per rollout (every stage's final verdict is always kept). */
    maxVerdicts: 200,
    /** A/B experiments: default share of traffic to version B. */
    experimentSplit: 0.5,
    /** A/B experiments: power the "samples needed" figure is computed for. */
    experimentPower: 0.8,
  },

  /** Rolling updates (src/rollout/rolling-controller.ts, docs/rolling.md). */
  rolling: {
    /** Kubernetes Deployments' defaults are 25 % / 25 %; for GPU workers one extra worker and none unavailable never reduce serving capacity. */
    maxSurge: 1,
    maxUnavailable: 0,
    /**
     * A new worker must be ready (started, warmed, admitted by its probes) within this: a large
     * model's load from a cold cache takes minutes, and a worker stuck longer is not coming.
     */
    stepTimeoutMs: 10 * 60_000,
    /** Kubernetes' progressDeadlineSeconds default (600 s) plus the step timeout's room: no step and no new ready worker for this long fails the update. */
    progressDeadlineMs: 15 * 60_000,
    /** A failure stops the update where it is for a human (Argo Rollouts' abort leaves the choice too); `rollback` goes back at once. */
    onFailure: 'pause' as 'pause' | 'rollback',
    /** The longest step timeout or progress deadline an update takes (API, config): a week; past it a stuck update is never noticed. */
    maxLimitMs: 7 * 86_400_000,
  },

  judge: {
    /** Share of client responses sampled for pointwise LLM judging. */
    sampleShare: 0.1,
    /** Judge requests in flight at once. */
    concurrency: 4,
    /** Judge requests waiting; beyond it samples are dropped (judging is sampled, never a backlog). */
    queueMax: 256,
    /** Per judge request. */
    timeoutMs: 30_000,
    /** How long half of a shadow pair waits for the other half. */
    pairTtlMs: 120_000,
    /** The judge's last decisions kept for operators (`GET /judge/samples`, the dashboard), all models together. */
    recentSamples: 100,
    /** With `capture_prompts`: a prompt or answer kept for them is cut to this many characters. */
    capturedChars: 2_000,
    /** Expired halves are looked for only once this many wait (a pass over them each time). */
    pairSweepAt: 1_024,
    /** Halves waiting at most; beyond it (a flood of unmatched ones) the oldest are dropped. */
    pairsMax: 4_096,
    /** The judge's reply is `{"score": n}`: a few tokens, with room for a model that says a little more. */
    maxTokens: 64,
  },

  /** `glidepath pipeline run` (src/rollout/pipeline). */
  pipeline: {
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
  },

  canary: {
    /**
     * Canary judge (src/analysis/judge.ts). Family-wise false-fail rate: the chance that an equal
     * canary fails any check at any look on the same sample stream. Split evenly over the enabled
     * statistical checks (Bonferroni) and made valid under repeated looks by the mSPRT.
     */
    alpha: 0.05,
    /** 'msprt': always-valid p-values, judge as often as you like; 'none': one fixed-sample look only. */
    sequential: 'msprt' as 'msprt' | 'none',
    /** mSPRT mixing SD of the standardized effect; most powerful around n_eff * tau^2 ~ 8 (n_eff ~ 90). */
    msprtTau: 0.3,
    /** Confidence level of the reported Hodges-Lehmann interval (Kayenta's judge uses 0.98). */
    hlConfLevel: 0.98,
    /** Weighted score (0-100) at or above which the stage passes (Kayenta's example config). */
    scorePass: 95,
    /** Score at or above which an unpassed stage is marginal: pause for a human instead of rolling back. */
    scoreMarginal: 75,
    /** Share of metric weight without data at which the verdict is "nodata" (wait); Kayenta uses 50 %. */
    nodataWaitShare: 0.5,
    /** Quantile the absolute latency gates are stated at (p99). */
    gateQuantile: 0.99,
    /**
     * Tail test for latency metrics: share of each version above the pooled 95th percentile (Fisher),
     * so a slower tail fails even when the median does not move. p99 itself has too few values above it.
     */
    tailQuantile: 0.95,
    /** Whole-request latency: weight 40 so that failing it alone scores 60 < 75 and rolls back. */
    latency: { weight: 40, critical: false, mustHaveData: false, minSamples: 50, maxP99Increase: 0.2 },
    /** Time to first token: relative like latency, plus the absolute gate p99 <= 500 ms (seeds). */
    ttft: { weight: 15, critical: false, mustHaveData: false, minSamples: 50, maxP99Increase: 0.2, maxP99Ms: 500 },
    /** Time per output token: relative like latency, plus the absolute gate p99 <= 50 ms (seeds). */
    tpot: { weight: 15, critical: false, mustHaveData: false, minSamples: 50, maxP99Increase: 0.2, maxP99Ms: 50 },
    /**
     * Errors (critical): fail when the increase (canary - stable) / max(stable, rateFloor) exceeds 50 %
     * (seed 001) and Fisher's test agrees, or the rate is significantly above the absolute 0.1 %.
     */
    errors: { weight: 15, critical: true, mustHaveData: false, minRequests: 100, maxRelativeIncrease: 0.5, rateFloor: 0.001, maxRate: 0.001 },
    /** Quality (critical): judge scores on a 0-1 scale; fail when the mean drops by more than 0.05 (seed 001). */
    quality: { weight: 15, critical: true, mustHaveData: false, minSamples: 30, maxDecrease: 0.05 },
    /**
     * Output tokens per second of serving time, canary / stable. One number per window, so no
     * sample-level test: reported, but weight 0 by default — as a scored gate it paused 17 % of equal
     * canaries in seeded runs (shares differ per stage, and so does load per worker). Give it weight
     * to make it count.
     */
    throughput: { weight: 0, critical: false, mustHaveData: false, minRequests: 50, minRatio: 0.9 },
  },
  /** The multi-model scheduler (src/scheduler/, docs/multi-model.md; seed 003). */
  scheduler: {
    /** A round every 10 s (seed 003), and one at once when a model's p99 is twice its SLO. */
    intervalMs: 10_000,
    /** The p99s it judges are over this much recent traffic: long enough for a p99, short enough to see a surge within a round. */
    windowMs: 30_000,
    /** Samples kept per model for those p99s (older ones drop off first). */
    windowMaxSamples: 4_096,
    /** A model without a request for 5 min goes down to its min replicas. */
    idleAfterMs: 300_000,
    /** No scale-down within 60 s of a change: a model just raised is measured on its new replicas first. */
    cooldownMs: 60_000,
    /** Below half its SLO (past the cool-down), a model gives back one replica a round. */
    relaxBelow: 0.5,
    /** A p99 over fewer requests is little more than their slowest one: no replicas are added or given back on it. */
    minSamples: 20,
    /** Replica counts sized for 80 % of what holds the SLO (seed 003 scales linearly; headroom stops the next breach). */
    headroom: 0.8,
    /** A preempted or scaled-down worker's in-flight requests get this long to finish (then they are continued elsewhere). */
    drainTimeoutMs: 30_000,
    /** A round at once when a model's p99 reaches this multiple of its SLO (the seed's "on a traffic spike"). */
    spikeFactor: 2,
    /** Decisions kept for `scheduler status`. */
    historyMax: 200,
  },
  /** Time-shared GPUs (docs/multi-model.md#temporal-sharing). */
  timeShare: {
    /** vLLM sleep level 1: the sleeper's weights wait in CPU memory, a wake copies them back (seconds). */
    sleepLevel: 1 as 1 | 2,
    /** The awake model keeps the GPUs at least this long while another's requests wait (no switch back and forth). */
    minActiveMs: 10_000,
    /** An awake model without a request this long gives way at once to one whose requests wait. */
    idleMs: 2_000,
    /** A sleeping model's requests wait at most this long (then 503 hold_timeout); above a quantum plus a switch. */
    maxWaitMs: 30_000,
    /** Requests held at most per sleeping model (then 503 hold_queue_full). */
    maxHeld: 1_024,
    /** Switches kept for `scheduler status`. */
    historyMax: 50,
    /** A model whose switch failed (its engine would not wake) is passed over a second, then 2, 4… up to a minute. */
    backoffBaseMs: 1_000,
    backoffMaxMs: 60_000,
    /** After a wake, its held requests wait at most this long for a worker its probes admit (one started asleep never was). */
    admitAfterWakeMs: 10_000,
  },
} as const;
