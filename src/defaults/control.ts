// Defaults of the control plane: providers (start, stop, sleep), the control loop, the monitor, the weight cache, the planner, the store.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

import { MiB } from './units.js';

export const CONTROL = {
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
    /**
     * `sim`: the longest wait between polls of a starting simulator. A Node process is up in 0.4–0.8 s,
     * so doubling to 500 ms found it up to ~0.5 s late (a replacement out of rotation that much longer);
     * polling a loopback /health every 50 ms for that long costs nothing.
     */
    simHealthPollMaxMs: 50,
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
    /** Loading a LoRA adapter: from local disk in well under a second, from network storage in seconds; a minute is broken. */
    adapterLoadTimeoutMs: 60_000,
    /** Engine wake (`POST /wake_up`, then healthy): after level 2 the weights are reloaded, as long as a start. */
    wakeTimeoutMs: 900_000,
    /** A worker adopted after a restart is not our child: its pid is probed (signal 0) this often to notice its exit. */
    adoptedPollMs: 500,
    /** Stopping an adopted worker: its exit is polled from this wait, doubling up to the longest. */
    stopPollFirstMs: 10,
    stopPollMaxMs: 100,
  },

  /** Bounds of the durations Glidepath takes from the admin API, the config and the CLI (src/config/schema-parts.ts). */
  durations: {
    /**
     * Node's timers (setTimeout, AbortSignal.timeout) wait at most 2^31 - 1 ms (~24.8 days): a longer
     * delay fires after 1 ms instead, so a timeout would strike at once and a loop would run every ms.
     * Every duration that can reach a timer is refused above it.
     */
    timerMaxMs: 2_147_483_647,
    /**
     * A loop's period or an operator's wait (the monitor's interval, a drain's timeout, the CLI's
     * --interval): one day. A longer one is a typo rather than a plan (the loop would never look).
     */
    maxIntervalMs: 86_400_000,
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
    /** SIGTERM → SIGKILL grace for a worker that never served (its start or its version's load failed): nothing to finish. */
    failedStartStopGraceMs: 1_000,
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
    /** Planner: seed 001's policy per risk level (strategy, canary share, evaluation duration). */
    planRisk: {
      low: { strategy: 'rolling', canaryShare: 0, evalDurationS: 0 },
      medium: { strategy: 'canary', canaryShare: 0.1, evalDurationS: 3_600 },
      high: { strategy: 'canary', canaryShare: 0.05, evalDurationS: 14_400 },
      critical: { strategy: 'canary', canaryShare: 0.02, evalDurationS: 86_400 },
    },
  },

  cluster: {
    /** A follower forwarding an admin call waits this long for the leader's answer to begin. */
    forwardHeadersTimeoutMs: 30_000,
    /** A worker drained in cluster mode: its engine's running requests are read this often until none (the other replicas' too). */
    drainPollMs: 100,
    /** …after waiting this long for the others to hear of the drain (route and worker propagation: p99 ≤ 20 ms measured). */
    drainSettleMs: 250,
    /** A follower sends its request records to the leader this often. */
    shipIntervalMs: 250,
    /** Records a follower keeps while no leader takes them (the oldest are dropped beyond). */
    shipBufferRecords: 50_000,
    /** …and at most this many numbers in all (fields and token gaps: ~8 bytes each, 16 MB). */
    shipBufferNumbers: 2_000_000,
    /** Token gaps kept per shipped record (the judge's inter-token samples). */
    shipMaxItl: 1_024,
    /** One shipment: at most this many records and this many bytes (the admin API takes 1 MiB bodies). */
    shipBatchRecords: 2_000,
    shipBatchBytes: 768 * 1024,
    shipTimeoutMs: 5_000,
    /** Sampled answers a follower keeps for the leader's LLM judge while none takes them, and their bytes in all. */
    shipBufferSamples: 2_000,
    shipBufferSampleBytes: 16 * 1024 * 1024,
    /** The leader stopping: how long it waits for another replica to take over before it stops the workers itself… */
    handoverWaitMs: 5_000,
    /** …and how long that one must have led (one elected while it stops too resigns at once). */
    handoverSettleMs: 500,
    /** A shipped sample's prompt and answer, each cut to this many characters (~8k tokens: what a judge reads). */
    shipSampleChars: 32_768,
    /** The leader's map of followers' pair ids to its own (a shadow pair's two answers arrive apart). */
    judgePairIds: 10_000,
  },

  /** `metrics_source: { kind: prometheus }` (src/telemetry/prometheus.ts, docs/cluster.md): PromQL instead of in-process windows. */
  metricsSource: {
    /**
     * One PromQL query (connect to last byte). A look's instant queries over a few hundred series
     * answer in milliseconds; a Prometheus that takes seconds is overloaded, and the look waits
     * (no data) rather than holding the canary's lock through a whole tick.
     */
    timeoutMs: 5_000,
    /**
     * Largest query answer read. A look reads ~50 series per replica and version (three histograms
     * of 16 buckets, a few counters), ~15 kB each way on a 20-replica fleet; 4 MiB bounds a label
     * selector that matches far more than it should without holding a 100 MB answer in memory.
     */
    maxResponseBytes: 4 * MiB,
    /**
     * The monitor's window when it reads Prometheus: the last 5 min, as the in-process window's
     * age limit (telemetry.windowMaxAgeMs), so a switch of source does not change what it judges.
     */
    monitorWindowMs: 5 * 60_000,
    /**
     * The longest range a canary look reads: a canary paused for days is judged on its last day.
     * Prometheus keeps 15 days by default; a window older than its retention reads nothing.
     */
    maxWindowMs: 24 * 60 * 60_000,
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
    /** Cluster store: how many times a transaction runs while other replicas' commits keep getting there first. */
    kvTxAttempts: 20,
    /** Cluster store: most audit entries one filtered query reads (newest first; page on with until / before_id). */
    kvAuditScanMax: 50_000,
    etcd: {
      /** Every key lives under it. */
      prefix: '/glidepath',
      /** One etcd call (not a watch): longer is an unreachable etcd (`store_unavailable`). */
      timeoutMs: 2_000,
      /** Connecting at start. */
      dialTimeoutMs: 3_000,
      /** etcd's own `--max-txn-ops` default: the most writes one commit carries. */
      maxTxnOps: 128,
      /** After three failed calls, calls are refused this long before the next try (etcd3's default: 5 s). */
      halfOpenAfterMs: 1_000,
      /** Most time between two reconnections of a lost watch (etcd3's default: 30 s). */
      watchRetryMaxMs: 1_000,
      /** The leader's lease: a dead leader's controllers move to another replica within it. */
      leaseTtlS: 5,
    },
  },
} as const;
