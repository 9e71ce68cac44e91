// Every default value Glidepath uses, in one place, each with the reason for its value.
// Other modules import from here; no magic numbers elsewhere.

const KiB = 1024;
const MiB = 1024 * KiB;

export const DEFAULTS = {
  server: {
    /** Data plane listener. Loopback by default: exposing it is a deliberate choice. */
    listen: '127.0.0.1:8080',
    /** Admin API listener; loopback so the control plane is never open by accident. */
    adminListen: '127.0.0.1:8081',
    /** Directory for SQLite state, the generated admin token and the weight cache. */
    dataDir: '.glidepath',
  },

  gateway: {
    /** Largest accepted request body. Long-context chat fits easily; abuse does not. */
    maxBodyBytes: 4 * MiB,
    /** TCP connect to a worker. Loopback/LAN connects take well under a second. */
    connectTimeoutMs: 2_000,
    /**
     * Request written to a worker's connection → first byte of the response (covers queueing and
     * prefill on the worker; the gateway's own wait for a connection has queueTimeoutMs instead).
     */
    firstTokenTimeoutMs: 60_000,
    /**
     * Non-streaming requests: the worker sends its first byte only when generation ends, so the
     * first-token limit would cut long completions; they get this limit for the whole answer.
     */
    requestTimeoutMs: 600_000,
    /** Longest silence between two chunks of a stream before the upstream is declared hung. */
    idleTimeoutMs: 30_000,
    /** Retries on another worker before the first byte reaches the client (connect error / 5xx). */
    maxRetries: 2,
    /** A worker that refuses connections is skipped for this long, doubling per failure. */
    ejectBaseMs: 1_000,
    /** Upper bound on the passive-ejection back-off. */
    ejectMaxMs: 30_000,
    /** Keep-alive connections per worker (further requests wait their turn in arrival order). */
    connectionsPerWorker: 128,
    /**
     * Requests waiting for a connection to one worker: two rounds of its 128 connections. With
     * streams of 10–15 s the last of 256 waits two rounds, 20–30 s, about queueTimeoutMs: a longer
     * line would only end in queue timeouts. Past it the request goes to another worker of the pool,
     * or gets 503 + Retry-After at once rather than after a wait that fails anyway.
     */
    workerQueueMax: 256,
    /**
     * Longest a request waits for a connection to a worker before 503 + Retry-After. Half the
     * first-token limit: a client's own timeout (often 60 s) should see the gateway's answer first,
     * and a request that could not start in 30 s will rarely finish soon enough to be useful.
     */
    queueTimeoutMs: 30_000,
    /**
     * An idle keep-alive connection to a worker is closed after this long. uvicorn (vLLM, SGLang)
     * closes idle connections after 5 s; a worker's own `keep-alive: timeout=N` hint, less 1 s,
     * wins when shorter. A connection the worker closed anyway is retried once on a fresh one.
     */
    upstreamKeepAliveMs: 4_000,
    /** Draining one worker (its health took it out): how often its in-flight count is looked at. */
    workerDrainPollMs: 25,
    /** A health probe's answer is a few tokens of JSON; more than this is garbage. */
    probeMaxBytes: 256 * KiB,
    /** Client connections: idle keep-alive limit, and the time a request's head and body may take. */
    clientKeepAliveMs: 65_000,
    clientHeadersTimeoutMs: 30_000,
    /**
     * A response the client does not take: when the bytes already handed to its socket have not
     * drained for this long, the connection is closed and the worker released (nginx's
     * `send_timeout` is 60 s). A client reading a stream at any pace keeps it alive.
     */
    sendTimeoutMs: 60_000,
    /**
     * Deepest JSON nesting accepted in a request body of more than 16 KiB (smaller ones are not
     * scanned). Chat requests with tool schemas nest a few dozen levels; megabytes of brackets
     * would otherwise hold JSON.parse, and every other client, for seconds.
     */
    maxJsonDepth: 256,
    /**
     * While a request is being answered, at most this much of what the client sends next
     * (pipelined requests) is read ahead before the socket is paused: a pipelining client gains
     * nothing from more, and a hostile one cannot park megabytes per connection.
     */
    clientReadAheadBytes: 64 * KiB,
    /** Whether clients may pick a version with `x-glidepath-version`. */
    allowVersionHeader: true,
    /** Sticky-session header; the body's `user` is the fallback key. */
    stickyHeader: 'x-session-id',
    /** Category override header. */
    categoryHeader: 'x-glidepath-category',
    /** Explicit version header. */
    versionHeader: 'x-glidepath-version',
    /** Salt for sticky hashing. Same salt on every replica → same assignment everywhere. */
    stickySalt: 'glidepath',
    /** Worker picker: least-outstanding with power-of-two choices. */
    picker: 'p2c' as 'p2c' | 'round_robin',
    /** Drain: how long in-flight requests may take before they are aborted with a counted error. */
    drainTimeoutMs: 30_000,
    /** Hold queue (drain-first swaps): most requests waiting per model. */
    holdQueueMax: 1_024,
    /** Hold queue: longest a request waits before 503 + Retry-After. */
    holdQueueTimeoutMs: 30_000,
    /** Retry-After seconds sent with 503s from the hold queue / no healthy worker. */
    retryAfterS: 1,
    /**
     * Retry-After seconds with 503s for the gateway's own exhaustion (descriptors, ports, memory):
     * such an episode lasts until connections close (idle keep-alive ones after 4 s), not a moment.
     */
    localResourceRetryAfterS: 5,
  },

  /** Connection admission per listener (src/gateway/limits.ts); 0 means off, or "auto" where noted. */
  limits: {
    /**
     * Descriptors kept back from the client-connection ceiling for everything else the process opens
     * (store, logs, the admin API, pipes to child processes), or this share of the limit if larger.
     */
    fdReserve: 256,
    fdReserveShare: 0.05,
    /**
     * The per-client table is swept of idle entries when it reaches this size, then again each time
     * it doubles: sweeping costs a pass over the table, so it runs about once per doubling.
     */
    clientTableSweepAt: 1_024,
    /**
     * Data plane: most client connections at once; 0 = auto, half of the descriptor limit after the
     * reserve (each client connection may hold a worker connection too). Past it new connections get
     * 503 + Retry-After at once, before the process runs out of descriptors.
     */
    dataMaxConnections: 0,
    /**
     * Data plane, per client address: off. Behind a load balancer every request comes from the
     * balancer's few addresses, so a per-address default would throttle everyone; set them when
     * clients connect directly.
     */
    dataPerClientConnections: 0,
    dataPerClientRps: 0,
    dataPerClientBurst: 0,
    /** Admin API: operators and their tools are few; 256 connections is far above any real use. */
    adminMaxConnections: 256,
    /** Admin API per address: a CLI or dashboard uses a handful of connections and a few requests a second; polling scripts fit under 100/s. */
    adminPerClientConnections: 64,
    adminPerClientRps: 100,
    adminPerClientBurst: 200,
    /**
     * Data plane at its ceiling: this many more connections are taken for /health, /ready and
     * /metrics only (one request each, then closed): a saturated gateway must not fail its liveness
     * probe and get restarted, nor vanish from Prometheus. Counted in the descriptor reserve.
     */
    probeConnections: 8,
    /** Retry-After seconds on a 503 for a full listener. */
    retryAfterS: 1,
    /** A log line about refused connections or local resource errors at most this often (the count of the rest goes into the next line). */
    logIntervalMs: 10_000,
  },

  telemetry: {
    /** Per (model, version) window: most recent records kept. Enough for p99 with ~10 samples above it. */
    windowMaxSamples: 1_000,
    /** Per (model, version) window: records older than this drop out. */
    windowMaxAgeMs: 5 * 60_000,
    /** Histogram buckets for TTFT and request duration (seconds): LLM latencies span ms to minutes. */
    latencyBucketsS: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160],
    /** Histogram buckets for time per output token (seconds): 1 ms to 1 s. */
    tpotBucketsS: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1],
    /**
     * Histogram buckets for time waiting for a connection to a worker (seconds): from a token's
     * time (another stream on the connection just ending) to the 30 s queue limit.
     */
    queueBucketsS: [0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30],
  },

  /** The HTTP helpers of node:http servers: the simulator and the admin API (src/http). */
  http: {
    /**
     * After refusing a body (413), how long the connection keeps reading and dropping what the
     * client still sends, our side already closed, before it is destroyed: a client that writes its
     * whole body before reading gets the answer instead of EPIPE, and one that never stops cannot
     * hold the socket. The data plane's own HTTP/1 server lingers as long.
     */
    closeLingerMs: 5_000,
  },

  sim: {
    /** Time until /health turns 200 after start (ms). Real 70B loads take 45–120 s; tests want fast. */
    loadTimeMs: 0,
    /** Prompt tokens per second during prefill (ms of TTFT = prompt tokens / rate). */
    prefillTokensPerS: 20_000,
    /** Base time between two generated tokens at one running sequence (ms). */
    interTokenMs: 0,
    /** Fractional ITL growth per additional running sequence (batching slows each decode step). */
    itlGrowthPerSeq: 0.01,
    /** Relative standard deviation of seeded timing jitter (0 = exact). */
    jitter: 0.1,
    /** KV capacity in tokens; requests beyond it wait in the queue. */
    kvCapacityTokens: 262_144,
    /** Most sequences running at once (vLLM's max_num_seqs). */
    maxNumSeqs: 256,
    /** Tokens generated when the request gives no max_tokens. */
    defaultMaxTokens: 64,
    /** Context window (prompt + completion tokens). */
    maxModelLen: 8_192,
    /** Share of generated words replaced by a marked ("hallucinated") word. */
    hallucinationRate: 0.03,
    /** LoRA slots (vLLM's --max-loras). */
    maxLoras: 4,
    /** Largest accepted request body. */
    maxBodyBytes: 4 * MiB,
    /** Model name served when none is given. */
    model: 'sim-model',
    /** Version id reported when none is given. */
    version: 'v1',
    /** Name of the built-in judge model every simulator also serves. */
    judgeModel: 'judge',
    /** Chance per generated token that the sequence ends (EOS); mean answer ~100 tokens. */
    eosRate: 0.01,
    /** Requests waiting for a KV/sequence slot before new ones get 503 (bounded queue). */
    maxWaitingRequests: 4_096,
    /** Most top logprobs a request may ask for (vLLM's --max-logprobs default). */
    maxLogprobs: 20,
    /** HTTP status of injected errors when the fault names none. */
    faultErrorStatus: 500,
    /** Time to wake from sleep level 1 (weights were kept in CPU memory). */
    wakeLevel1Ms: 0,
    /** Number of candidate tokens the sampler draws from when temperature > 0. */
    sampleCandidates: 5,
    /** Healthy top-1 logprob lies in [-maxTopLogprobDepth - 0.01, -0.01]; health probes check this range. */
    maxTopLogprobDepth: 0.6,
    /** Silent corruption shifts every logprob down by this much (outside the healthy range). */
    corruptLogprobShift: 3,
    /** `glidepath sim` listen port when none is given (vLLM's default). */
    port: 8000,
    /**
     * Idle keep-alive connections are closed after this long: longer than any client's own idle
     * limit (the gateway closes its idle upstream connections after 4 s), so the simulator never
     * closes a connection under a request that is just being sent.
     */
    keepAliveTimeoutMs: 65_000,
    /** Encoded token literals kept for reuse; the vocabulary is a few hundred words, so this is only a bound. */
    jsonCacheMax: 4_096,
  },

  /** How workers are started, probed, put to sleep and woken (src/providers). */
  providers: {
    /** One health probe of an engine; one that has not opened its port yet fails at once anyway. */
    probeTimeoutMs: 2_000,
    /**
     * Polling a starting or waking engine's health endpoint (vLLM's /health has no push): the first
     * wait, doubling up to the longest, so a fast simulator is seen in tens of ms and a loading
     * engine is asked twice a second.
     */
    healthPollFirstMs: 20,
    healthPollMaxMs: 500,
    /** `process`: start → healthy. Real engines load 70B weights in 45–120 s (seed 000); from network storage, minutes. */
    processStartTimeoutMs: 900_000,
    /** `sim`: allowed beyond the configured load time before a start fails (a Node process starting on a busy machine). */
    simStartSlackMs: 15_000,
    /** `sim`: tries with a fresh port (the port picked may be taken before the simulator binds it). */
    simStartAttempts: 3,
    /** `sim`: SIGTERM → SIGKILL for a simulator whose start failed: it serves nothing to finish. */
    failedStartGraceMs: 1_000,
    /** `static`: an existing endpoint must answer /health within this (it is already running, or soon). */
    staticStartTimeoutMs: 30_000,
    /** Engine sleep (vLLM `POST /sleep`): level 1 copies the weights to CPU memory, tens of seconds for 70B. */
    sleepTimeoutMs: 60_000,
    /** Engine wake (`POST /wake_up`, then healthy): after level 2 the weights are reloaded, as long as a start. */
    wakeTimeoutMs: 900_000,
    /** A worker adopted after a restart is not our child: its pid is probed (signal 0) this often to notice its exit. */
    adoptedPollMs: 500,
    /** Stopping an adopted worker: its exit is polled from this wait, doubling up to the longest. */
    stopPollFirstMs: 10,
    stopPollMaxMs: 100,
  },

  control: {
    /** Controller reconcile tick (rollouts, watchers). */
    tickMs: 1_000,
    /** Monitored rollback: how often the active version's window is checked (seed 000: every 5 s). */
    monitorIntervalMs: 5_000,
    /** Monitored rollback: error rate of the active version that triggers a rollback. */
    monitorMaxErrorRate: 0.05,
    /** Monitored rollback: p99 latency (ms) of the active version that triggers a rollback. */
    monitorMaxP99LatencyMs: 30_000,
    /** Monitored rollback: fewest requests in the window before it judges anything. */
    monitorMinRequests: 20,
    /** A warm-up request may take this long before the load counts as failed. */
    warmupTimeoutMs: 120_000,
    /** SIGTERM → SIGKILL grace when stopping a worker. */
    stopGraceMs: 10_000,
    /** Webhook notifications: per-attempt timeout and attempts. */
    webhookTimeoutMs: 5_000,
    webhookAttempts: 3,
    /** Weight cache: versions kept before least-recently-used eviction (seed 000's max_versions). */
    cacheMaxVersions: 3,
    /** Monitored rollback: shortest interval the admin API accepts (a tighter loop only burns CPU). */
    monitorMinIntervalMs: 100,
    /** Monitored rollback is opt-in per model: it acts on production traffic on its own. */
    monitorEnabled: false,
    /** Webhook notifications: wait before retry n is webhookBackoffMs × 2^(n-1). */
    webhookBackoffMs: 500,
    /** Weight cache: its directory under the data directory when the config names none. */
    cacheDirName: 'cache',
    /** Weight cache: largest download accepted per version (a 405B fp16 checkpoint is ~810 GB). */
    cacheMaxBytes: 1024 * 1024 * MiB,
    /** Weight cache: an HTTP source may be silent this long (until headers, or between chunks). */
    cacheIdleTimeoutMs: 60_000,
    /** Weight cache: HTTP redirects followed (model hubs send downloads to a CDN, once or twice). */
    cacheMaxRedirects: 5,
    /** Weight cache: one whole download; 140 GB at 0.5 GB/s (seed 000's single-stream S3) takes ~5 min. */
    cacheDownloadTimeoutMs: 2 * 60 * 60_000,
    /** Planner: load-time estimate for a version never loaded: weights GB / this (seed 000: NFS 1.1 GB/s, 70B in ~127 s). */
    planLoadGbPerS: 1.1,
    /** Planner: wake of a sleeping standby (CPU → GPU copy) GB/s (seed 000: time-shared rollback ~20 s for 140 GB). */
    planWakeGbPerS: 7,
    /** Planner: canary analysis time at low risk (seed 000: ~30 min, stages 1,5,10,25,50,100 % × 5 min). */
    planCanaryAnalysisMs: 30 * 60_000,
    /** Planner: rollback by route switch, upper bound reported (target p99 < 1 ms). */
    planRouteSwitchMs: 1,
    /** Planner: steady-state GPU overhead of time-shared blue-green (seed 000's cost table). */
    planTimeSharedOverhead: 0.5,
    /** Planner: seed 001's policy per risk level (strategy, canary share, evaluation duration). */
    planRisk: {
      low: { strategy: 'rolling', canaryShare: 0, evalDurationS: 0 },
      medium: { strategy: 'canary', canaryShare: 0.1, evalDurationS: 3_600 },
      high: { strategy: 'canary', canaryShare: 0.05, evalDurationS: 14_400 },
      critical: { strategy: 'canary', canaryShare: 0.02, evalDurationS: 86_400 },
    },
  },

  rollout: {
    /** Canary stages in percent of traffic (seed 001's progressive rollout). */
    stages: [2, 5, 10, 25, 50, 100],
    /** Least time at each stage before it may advance (it also waits for enough samples). */
    stageDurationMs: 5 * 60_000,
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

  store: {
    /** SQLite file inside the data directory. */
    fileName: 'glidepath.db',
    /** How long a writer waits for another process's write lock before SQLITE_BUSY. Writes take ms. */
    busyTimeoutMs: 5_000,
    /** Audit entries returned when the query gives no limit. */
    auditQueryLimit: 100,
    /** Most audit entries one query returns, whatever it asks for. */
    auditQueryMaxLimit: 10_000,
    /** Most rollout events one query returns. */
    rolloutEventsMaxLimit: 10_000,
    /** Most rollouts / active periods one list returns when no limit is given. */
    listLimit: 1_000,
  },

  /** Worker health (src/health/, docs/health.md): probes, the state machine, breakers, replacement, spares. */
  health: {
    /** Probe every worker this often (seed 004: 30 s; a GPU's silent corruption is caught within one interval). */
    intervalMs: 30_000,
    /** Each worker's next probe is the interval ± this share, so a fleet's probes never arrive together. */
    jitter: 0.2,
    /** A probe that has not answered in this long failed as `timeout` (seed 004's probes take 15–50 ms on a GPU). */
    timeoutMs: 10_000,
    /**
     * A failed probe is tried again this many times at once before it counts (seed 004: 2): a transient
     * timeout or a near-tie token on a busy engine must not drain a healthy worker.
     */
    retries: 2,
    /** Tokens each probe asks for: several, so that later tokens attend to earlier ones (a single token skips attention). */
    maxTokens: 8,
    /**
     * The prompts of a model's probe set when its config names none: short, deterministic, and
     * answered with several tokens so that every layer's attention takes part.
     */
    prompts: [
      'The first five prime numbers are 2, 3, 5,',
      'Translate to French: the cat sleeps on the warm windowsill. Answer:',
      'Count from one to ten: one, two, three,',
    ],
    /**
     * Latency spike: a probe slower than this many times the worker's own EMA baseline. Seed 004
     * says 3×, but a GPU throttled to a third of its speed answers a probe a little under 3× slower
     * (the network's and the HTTP stack's share does not slow down), so 3 would miss exactly the
     * throttle it is meant for; 2.5 catches it and stays above the probe's own spread under load.
     */
    latencyFactor: 2.5,
    /** …and slower than the baseline by at least this much: 3× a 4 ms probe is no spike worth a weight cut. */
    latencyFloorMs: 50,
    /** Weight of a new sample in the worker's latency baseline (seed 004: 0.1). */
    baselineAlpha: 0.1,
    /**
     * A recorded token's logprob may move this far (nats) either way and still pass. Engines are not
     * batch-invariant: the same prompt's logprobs move by ~1e-3–1e-2 with batch size on bf16; 0.2 is
     * far above that and far below a corrupted GPU's drift (the simulator shifts by several nats).
     */
    logprobTolerance: 0.2,
    /**
     * Recording keeps a probe's tokens only up to the first one whose lead over the runner-up is
     * below this (nats): past a near-tie, a healthy engine may legitimately answer otherwise.
     */
    minMargin: 0.05,
    /** A probe needs this many reproducible tokens, or it is left out of the set. */
    minTokens: 2,
    /** Hard failures in a row (probes or traffic) that make a worker UNHEALTHY and open its breaker (seed 004: 3). */
    failureThreshold: 3,
    /** Passing probes in a row that bring a SUSPICIOUS worker back to HEALTHY (1 would let a flapping worker oscillate). */
    healthyAfter: 2,
    /** The breaker also opens when this share of the worker's last `rateWindow` requests failed… */
    failureRate: 0.5,
    /** …over this many requests… */
    rateWindow: 20,
    /** …once at least this many are in the window (fewer say nothing about a rate). */
    rateMinCalls: 10,
    /** An open breaker waits this long before half-open probes (seed 004: 60 s); doubled per failed recovery. */
    recoveryTimeoutMs: 60_000,
    /** Upper bound of the doubled recovery timeout. */
    recoveryTimeoutMaxMs: 600_000,
    /** Half-open: probes that must pass in a row before real traffic is tried. */
    halfOpenProbes: 2,
    /** Half-open: real requests let through (at a trickle) that must succeed before the breaker closes. */
    halfOpenRequests: 5,
    /** Half-open: the routing weight of the trickle (a healthy worker's is 1). */
    trialWeight: 0.1,
    /** Failed recoveries after which a worker is given up: drained and replaced. */
    deadAfterFailedRecoveries: 2,
    /** Replacing a dead worker that fails to start: back-off doubles from this… */
    replaceBackoffMs: 1_000,
    /** …up to this. */
    replaceBackoffMaxMs: 60_000,
    /** Passive latency: a worker whose time to first token (EMA) is this many times its pool's median is SUSPICIOUS (as latencyFactor). */
    ttftOutlierFactor: 2.5,
    /** Passive latency: requests a worker must have served since the last verdict before its TTFT is compared. */
    ttftMinRequests: 20,
    /** Hot spares per version when its config says none. */
    spares: 0,
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
} as const;

export type Defaults = typeof DEFAULTS;
