// Defaults of worker health: probes, the state machine, breakers, replacement, spares.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

export const HEALTH = {
  /** Worker health (src/health/, docs/health.md): probes, the state machine, breakers, replacement, spares. */
  health: {
    /** Probe interval (seed 004: 30 s: silent corruption is caught within one); ± jitter so a fleet's probes never arrive together. */
    intervalMs: 30_000,
    jitter: 0.2,
    /** A probe without an answer in this long failed as `timeout` (seed 004's probes take 15–50 ms on a GPU). */
    timeoutMs: 10_000,
    /** Tries again at once before a failure counts (seed 004: 2): a transient timeout or a near-tie on a busy engine must not drain a healthy worker. */
    retries: 2,
    /** Tokens per probe: several, so later tokens attend to earlier ones (a single token skips attention). */
    maxTokens: 8,
    /** A model's probe prompts when its config names none: deterministic, answered with several dependent tokens. */
    prompts: [
      'The first five prime numbers are 2, 3, 5,',
      'Translate to French: the cat sleeps on the warm windowsill. Answer:',
      'Count from one to ten: one, two, three,',
    ],
    /**
     * Latency spike: slower than this × the worker's EMA baseline (and by at least the floor: 3× a 4 ms
     * probe is no spike). Seed 004 says 3×, but a GPU throttled to a third of its speed answers a probe a
     * little under 3× slower (the network's share does not slow down): 3 would miss that very throttle.
     */
    latencyFactor: 2.5,
    latencyFloorMs: 50,
    /** Weight of a new sample in the latency baseline and the TTFT average (seed 004: 0.1). */
    baselineAlpha: 0.1,
    /** A recorded logprob may move this far (nats): batch effects on bf16 are ~1e-3–1e-2, a corrupted GPU's drift several nats. */
    logprobTolerance: 0.2,
    /**
     * Recording keeps tokens up to the first whose lead over the runner-up is below this (nats): past
     * a near-tie a healthy engine may answer otherwise. At least twice the logprob tolerance (the
     * config refuses less): a drift the tolerance accepts must never flip a recorded token.
     */
    minMargin: 0.5,
    /** Reproducible tokens a probe needs, or it is left out of the set. */
    minTokens: 2,
    /** Failed probes (or failed requests in a row) that open the breaker (seed 004: 3); passes in a row that bring back a SUSPICIOUS worker (1 would let a flapper oscillate). */
    failureThreshold: 3,
    healthyAfter: 2,
    /** The breaker also opens when this share of the last `rateWindow` requests failed, once at least `rateMinCalls` are in it. */
    failureRate: 0.5,
    rateWindow: 20,
    rateMinCalls: 10,
    /** Open breaker: wait before half-open probes (seed 004: 60 s), doubled per failed recovery up to the max. */
    recoveryTimeoutMs: 60_000,
    recoveryTimeoutMaxMs: 600_000,
    /** Half-open: probes that must pass, then real requests tried at a trickle (this weight; a healthy worker's is 1). */
    halfOpenProbes: 2,
    halfOpenRequests: 5,
    trialWeight: 0.1,
    /** Failed recoveries after which a worker is drained and replaced. */
    deadAfterFailedRecoveries: 2,
    /**
     * A dead worker is stopped and replaced this long after it is declared dead (systemd's RestartSec
     * default): the streams it broke are continued elsewhere first. Starting a process forks the
     * gateway (~3 ms with the event loop held on 2 cores, measured), and its bookkeeping takes as
     * much again; in the moment a killed worker's 25 streams are being continued, that was most of
     * their stall (bench:resilience).
     */
    replaceDelayMs: 100,
    /** Back-off of a replacement that fails to start: doubling from the first to the max. */
    replaceBackoffMs: 1_000,
    replaceBackoffMaxMs: 60_000,
    /** Passive latency: TTFT (EMA) this × its pool's median is SUSPICIOUS (as latencyFactor), after this many requests since the last verdict. */
    ttftOutlierFactor: 2.5,
    ttftMinRequests: 20,
    /** Hot spares per version when its config says none. */
    spares: 0,
    /** A suspicious worker's routing weight: half a healthy one's (seed 004). */
    suspiciousWeight: 0.5,
    /**
     * Most of a version's serving workers health may hold out at once (at least one). A version-wide
     * failure of the same probe is likelier a wrong probe set or overload than every GPU failing at
     * once, and an outage made by the health checker is worse than what it guards against.
     */
    maxEjectedShare: 0.5,
    /** A worker that must prove itself (admission, half-open) is probed again this soon, not back to back. */
    probeGapMs: 250,
    /** A probe set that could not be recorded is tried again after this long (doubling per failure, up to the interval). */
    recordRetryMs: 5_000,
  },
} as const;
