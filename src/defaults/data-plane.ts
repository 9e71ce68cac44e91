// Defaults of the data plane: listeners, the gateway (timeouts, retries, pools, ejection), admission limits, telemetry windows, HTTP parsing bounds.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

import { KiB, MiB } from './units.js';

export const DATA_PLANE = {
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
    /**
     * A stream that breaks after it reached its client (worker died, stalled past the idle limit,
     * sent garbage; not one whose worker its health took out, nor a drained version's) continues
     * on another worker of its version this many
     * times at most (docs/resilience.md); 0 turns resumption off.
     */
    resumeMaxMigrations: 3,
    /** …and only while this much time has passed since its first break: a stream stalled longer is ended with its error. */
    resumeBudgetMs: 60_000,
    /**
     * A stream's sent bytes kept for resumption before they are read into text (one buffer per
     * stream; past this its text plus at most this much is held): 64 KiB is ~400 chat events.
     */
    resumeLogBytes: 65_536,
    /**
     * The most bytes of one answer copied for the quality judge (a sampled client answer, a shadow
     * answer): 1 MiB is ~6,000 chat events. A longer answer is not judged (a cut one would be judged
     * wrongly), and memory per sampled request stays bounded whatever `max_tokens` a client asks.
     */
    captureMaxBytes: 1_048_576,
    /**
     * Degradation (docs/resilience.md): the lowest capacity ratio of levels 0, 1, 2 and 3 (below the
     * last, level 4), as seed 004 sets them.
     */
    degradationThresholds: [1.0, 0.75, 0.5, 0.25],
    /**
     * Each level's share of a worker's request slots (its engine's max_num_seqs, or
     * connections_per_worker): seed 004's batch size, 0.75 at levels 1–2 and 0.5 from level 3. The
     * requests in flight finish; the next ones wait, by tier, in the worker's queue.
     */
    degradationConcurrency: [1, 0.75, 0.75, 0.5, 0.5],
    /** Each level's factor on the latency gates (the monitor's p99, health's latency checks): ×2 from level 3, as seed 004 says. */
    degradationLatencyFactor: [1, 1, 1, 2, 2],
    /** How often a degraded-aware model's engines' metrics are read for their measured capacity (ms; 0: never). */
    capacityMeasureMs: 5_000,
    /** …each read given at most this long (ms). */
    capacityScrapeTimeoutMs: 2_000,
    /** A better level must be cleared by this much of the ratio… */
    degradationMargin: 0.05,
    /** …for this long before the level improves (a worse level applies at once). */
    degradationRecoverMs: 10_000,
    /** Retry-After of a shed request (s): about the time a replacement worker takes to come up. */
    shedRetryAfterS: 5,
    /** Priority tiers, highest first, when a model names none; and the tier of a request that says nothing. */
    tiers: ['premium', 'standard', 'best_effort'],
    defaultTier: 'standard',
    /** At level 3 requests below the top tier get at most this many tokens. */
    degradedMaxTokens: 256,
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
    /**
     * Spare connections (gateway.preconnect): each worker keeps at least ratio × its requests in flight
     * (at most maxPerWorker) idle connections open to its origin, so that a burst — the streams of a
     * worker that died, continued elsewhere at once — is written out at once instead of each waiting a
     * turn of the event loop for its own connect (bench:resilience: 80 % of a killed worker's
     * continuations opened a connection, and waited for the whole burst to be handled first). 0: none.
     */
    preconnectRatio: 0.5,
    preconnectMaxPerWorker: 16,
    /**
     * The ratio applies to a worker's own requests in flight or its version's mean per worker,
     * whichever is more (a replacement just admitted, with none, is where most of a dead peer's
     * streams go); that mean is worked out again at most this often (ms), since every request's start
     * asks for it.
     */
    peerLoadMs: 50,
    /**
     * Preconnect opens no spare while the process holds this many idle upstream connections (all
     * workers together): spares come out of the descriptor reserve (limits.fdReserve), not the
     * two descriptors per stream the client-connection ceiling counts on.
     */
    preconnectMaxIdle: 64,
    /**
     * An adapter's request goes to a worker that has it unless that worker has more than this many
     * requests above the least busy one; then to the least busy, which loads it (bounded-load
     * affinity: a popular adapter spreads instead of piling onto one worker).
     */
    adapterAffinitySlack: 4,
    /** Adapters' requests go by affinity (above); `random` (any worker that can load it) is the baseline it is measured against. */
    adapterRouting: 'affinity' as 'affinity' | 'random',
    /**
     * The adapter prefetcher (docs/multi-model.md): each model's `topK` most wanted adapters loaded
     * ahead of their requests. 8: with vLLM's common `--max-loras 8` on 4 workers, a quarter of the
     * 32 slots, the rest left to on-demand loads (each worker keeps one slot out of the top-k's reach
     * anyway). Every 5 s: a load takes tens of ms to seconds, and demand over seconds is what
     * it follows. Half-life 30 s: recent enough to follow a shift within a minute, long enough that a
     * burst of one adapter does not push out the steady ones.
     */
    adapterPrefetch: { enabled: true, topK: 8, intervalMs: 5_000, halfLifeMs: 30_000 },
    /** Draining one worker (its health took it out): how often its in-flight count is looked at. */
    workerDrainPollMs: 25,
    /** A health probe's answer is a few tokens of JSON; more than this is garbage. */
    probeMaxBytes: 256 * KiB,
    /** Client connections: idle keep-alive limit, and the time a request's head and body may take. */
    clientKeepAliveMs: 65_000,
    /**
     * The listeners' accept queue (the kernel caps it at net.core.somaxconn, 4096 on current Linux).
     * Node's own default, 511, overflowed when thousands of streams opened at 250/s on a busy machine
     * (TcpExtListenOverflows): the kernel drops a handshake past it and the client sends it again
     * 1, 3, 7, 15 s later, which is what those clients' TTFT became (bench:scale, slow streams).
     */
    listenBacklog: 4096,
    clientHeadersTimeoutMs: 30_000,
    /**
     * HTTP/2 with prior knowledge (h2c) on the data plane's port, beside HTTP/1.1: a client or a balancer
     * in front (Envoy, gRPC-style proxies, httpx with http2=True) multiplexes its streams over a few
     * connections, so a stream costs the gateway one descriptor (its worker's) instead of two.
     * 256 streams per connection: Go's net/http allows 250, nginx 128; the ceiling on descriptors
     * bounds them all together.
     */
    http2Enabled: true,
    http2MaxConcurrentStreams: 256,
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
    /** Longest sticky salt (the gateway's, a route's): it is hashed with the key on every sticky request, and a salt is a short secret, not a document. */
    maxStickySaltChars: 256,
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
    /** A resumed stream's stall (break → the continuation's first bytes): a re-prefill takes milliseconds, a queue or a cold worker seconds. */
    /** An adapter load: tens of ms from local disk to seconds from network storage. */
    adapterLoadBucketsS: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    migrationStallBucketsS: [0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30],
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
} as const;
