// The shape of glidepath.yaml as written by people (snake_case), with defaults, as zod schemas.
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { RESUME_MODES } from '../domain/spec.js';

import { bool, fraction, msg, name, nonNeg, nonNegInt, posInt, positive, show, str, url } from './schema-parts.js';
import { durationMs, durationMsFraction, durationMsOrZero, stickySalt } from './schema-parts.js';
import { storeSchema } from './store.js';
import { metricsSourceSchema } from './metrics-source.js';
import { degradationSchema, tiersSchema } from './admission.js';
import { timeSharingSchema } from './time-sharing.js';

export { nonNeg, posInt, positive, fraction, name, show };

const hostPort = () => z.string(msg('HOST:PORT')).regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, msg('HOST:PORT such as 127.0.0.1:8080'));

/** Simulator settings of one version (all optional; defaults in DEFAULTS.sim). */
const simSchema = z
  .object({
    seed: nonNegInt().optional(),
    load_time_ms: durationMsFraction().optional(),
    prefill_tokens_per_s: positive().optional(),
    inter_token_ms: durationMsFraction().optional(),
    itl_growth_per_seq: nonNeg().optional(),
    jitter: fraction().optional(),
    kv_capacity_tokens: posInt().optional(),
    max_num_seqs: posInt().optional(),
    max_model_len: posInt().optional(),
    hallucination_rate: fraction().optional(),
    max_loras: nonNegInt().optional(),
    lora_load_ms: durationMsFraction().optional(),
    wake_ms: durationMsFraction().optional(),
    reload_ms: durationMsFraction().optional(),
    warmup_requests: nonNegInt()
      .max(DEFAULTS.sim.maxWarmupRequests, msg(`an integer from 0 to ${DEFAULTS.sim.maxWarmupRequests}`))
      .optional(),
    faults: z
      .object({
        error_rate: fraction().optional(),
        error_status: z.number(msg('an HTTP status 400-599')).int().min(400).max(599).optional(),
        crash_after_tokens: nonNegInt().optional(),
        stall_after_tokens: nonNegInt().optional(),
        garbage_after_tokens: nonNegInt().optional(),
        hang: bool().optional(),
        latency_multiplier: positive().optional(),
        corrupt: bool().optional(),
        logprob_drift: nonNeg().optional(),
        flap_ms: durationMs().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

const architectureSchema = z
  .object({
    layers: posInt().default(32),
    kv_heads: posInt().default(8),
    head_dim: posInt().default(128),
    block_size: posInt().default(16),
    max_context: posInt().default(8192),
    tokenizer: str().default('default'),
    family: str().optional(),
  })
  .strict();

/** How the provider's engine continues a broken stream (domain/spec.ts ResumeMode). */
const resumeMode = z.enum(RESUME_MODES, msg(RESUME_MODES.map((m) => `"${m}"`).join(', ')));

const providerSchema = z.discriminatedUnion(
  'kind',
  [
    z.object({ kind: z.literal('sim'), sim: simSchema.prefault({}) }).strict(),
    z
      .object({
        kind: z.literal('static'),
        endpoints: z.array(url()).min(1, msg('at least one endpoint URL')),
        resume: resumeMode.default('continue_final_message'),
        token_id_prompts: bool().default(true),
      })
      .strict(),
    z
      .object({
        kind: z.literal('process'),
        /** Command template: {weights} {port} {tp} {model} {version} {host} are substituted. */
        command: str('a command template'),
        env: z.record(z.string(), z.string()).default({}),
        health_path: str().default('/health'),
        grace_period_ms: durationMsFraction().default(DEFAULTS.control.stopGraceMs),
        resume: resumeMode.default('continue_final_message'),
        token_id_prompts: bool().default(true),
      })
      .strict(),
  ],
  {
    error: (iss: { input?: unknown }) =>
      `expected a provider kind of "sim", "static" or "process", got ${show((iss.input as { kind?: unknown } | undefined)?.kind)}`,
  },
);

export const versionSchema = z
  .object({
    id: name('a version id'),
    weights: str('a weights path or URL').default('sim://weights'),
    weight_hash: str().optional(),
    base_model: str().default('unknown'),
    quantization: str().default('fp16'),
    tp: posInt().default(1),
    gpu_memory_gb: positive().default(16),
    architecture: architectureSchema.prefault({}),
    /** Extra engine settings that must match for workers to be interchangeable (go into the card checksum). */
    engine: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
      .default({})
      .refine((e) => e.max_num_seqs === undefined || /^[1-9]\d*$/.test(String(e.max_num_seqs)), {
        message: "max_num_seqs must be a positive integer: the engine's --max-num-seqs, the most requests the gateway sends one worker at once",
        path: ['max_num_seqs'],
      }),
    replicas: posInt().default(1),
    /**
     * Disaggregated serving: prefill and decode workers with their own counts (replaces `replicas`);
     * absent, every worker serves whole requests (docs/rolling.md).
     */
    roles: z.object({ prefill: posInt(), decode: posInt() }).strict().optional(),
    provider: providerSchema.prefault({ kind: 'sim' }),
    warmup: z
      .object({ requests: nonNegInt().default(1), max_tokens: posInt().default(8) })
      .strict()
      .prefault({}),
    metadata: z.record(z.string(), z.unknown()).default({}),
    /** Hot spares: loaded and probed workers out of rotation that take a failed worker's place at once; a count or a share of replicas ("10%", rounded up). */
    spares: z
      .union(
        [
          nonNegInt(),
          z
            .string(msg('a count or a percentage such as "10%"'))
            .regex(/^(100|\d{1,2}(\.\d+)?)%$/, msg('a count, or a percentage of the replicas from 0% to 100% such as "10%"')),
        ],
        msg('a count or a percentage such as "10%"'),
      )
      .optional(),
    /** Known-good answers to the health probes, to check a version recorded from a single worker against. */
    probe_reference: z
      .array(z.object({ prompt: str('a prompt'), tokens: z.array(z.string(msg('a token text'))).min(1, msg('at least one token')) }).strict())
      .optional(),
  })
  .strict();

const H = DEFAULTS.health;

/** Worker health of one model (src/health/, docs/health.md); every field defaults to DEFAULTS.health. */
const healthSchema = z
  .object({
    enabled: bool().default(true),
    interval_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(H.intervalMs),
    jitter: z.number(msg('a number from 0 to 0.5')).min(0, msg('a number from 0 to 0.5')).max(0.5, msg('a number from 0 to 0.5')).default(H.jitter),
    timeout_ms: durationMs().default(H.timeoutMs),
    retries: nonNegInt().default(H.retries),
    /** Probe prompts: text, or {prompt, max_tokens}. */
    probes: z
      .array(
        z.union([str('a prompt'), z.object({ prompt: str('a prompt'), max_tokens: posInt().optional() }).strict()], msg('a prompt or {prompt, max_tokens}')),
      )
      .min(1, msg('at least one probe prompt'))
      .optional(),
    max_tokens: posInt().default(H.maxTokens),
    latency_factor: z.number(msg('a number above 1')).gt(1, msg('a number above 1')).default(H.latencyFactor),
    latency_floor_ms: durationMsFraction().default(H.latencyFloorMs),
    logprob_tolerance: nonNeg().default(H.logprobTolerance),
    min_margin: nonNeg().default(H.minMargin),
    failure_threshold: posInt().default(H.failureThreshold),
    healthy_after: posInt().default(H.healthyAfter),
    failure_rate: z.number(msg('a number in (0, 1]')).gt(0, msg('a number in (0, 1]')).max(1, msg('a number in (0, 1]')).default(H.failureRate),
    rate_window: posInt().default(H.rateWindow),
    rate_min_calls: posInt().default(H.rateMinCalls),
    recovery_timeout_ms: durationMs().default(H.recoveryTimeoutMs),
    recovery_timeout_max_ms: durationMs().default(H.recoveryTimeoutMaxMs),
    half_open_probes: posInt().default(H.halfOpenProbes),
    half_open_requests: nonNegInt().default(H.halfOpenRequests),
    dead_after_failed_recoveries: posInt().default(H.deadAfterFailedRecoveries),
    /** Replace dead workers through the provider (a `static` worker is never replaced, only held out). */
    replace: bool().default(true),
    /** Count real traffic's failures (5xx, resets, stalls, TTFT outliers) as well as probes'. */
    passive: bool().default(true),
    ttft_outlier_factor: z.number(msg('a number above 1')).gt(1, msg('a number above 1')).default(H.ttftOutlierFactor),
    /** Most of a version's serving workers held out at once (at least one): a version-wide failure is likelier the probes' or the load's. */
    max_ejected_share: fraction().default(H.maxEjectedShare),
  })
  .strict()
  .prefault({});

const routeSchema = z
  .object({
    /** version id → weight; fractions summing to 1 or integers that are normalised. */
    weights: z.record(z.string(), nonNeg()).default({}),
    /** category (x-glidepath-category) → version id. */
    overrides: z.record(z.string(), z.string()).default({}),
    sticky_salt: stickySalt().optional(),
    /** Mirror a share of requests to a version; the shadow's answer never reaches the client. */
    shadow: z.object({ version: z.string(), share: fraction() }).strict().optional(),
  })
  .strict();

/** A rolling update's budget as text: a count, or a percentage from 0 to 100. */
const budgetText = (what: string) => z.string(msg(what)).regex(/^(\d+|100(\.0+)?%|\d{1,2}(\.\d+)?%)$/, msg(what));

const modelSchema = z
  .object({
    name: name('a model name'),
    /** The scheduler's priority (docs/multi-model.md); `medium` and `low` are the older names of `standard` and `batch`. */
    priority: z.enum(['critical', 'high', 'standard', 'batch', 'medium', 'low'], msg('one of critical, high, standard, batch')).default('standard'),
    slo: z.object({ ttft_p99_ms: positive().optional(), tpot_p99_ms: positive().optional() }).strict().default({}),
    /** A load each replica is sized for, beside the SLO (docs/multi-model.md, "A scale signal"). */
    scale_signal: z
      .object({ queue_depth: positive().optional(), tokens_per_s: positive().optional() })
      .strict()
      .refine((x) => x.queue_depth !== undefined || x.tokens_per_s !== undefined, msg('queue_depth, tokens_per_s or both'))
      .optional(),
    min_replicas: nonNegInt().default(1),
    max_replicas: posInt().default(8),
    versions: z.array(versionSchema).min(1, msg('at least one version')),
    /** LoRA adapters served on this model's workers under their own names (docs/multi-model.md). */
    adapters: z
      .array(
        z
          .object({
            // `--` is kept for the names an adapter's versions are loaded under (`<name>--<version>`, adapter canaries)
            name: name('an adapter name').refine((n) => !n.includes('--'), msg('an adapter name without "--" (kept for its versions\' names)')),
            source: str('a path or URI the engine loads from'),
            version: str().optional(),
          })
          .strict(),
      )
      .default([]),
    route: routeSchema.optional(),
    /** Blue-green with the standby asleep on the active version's GPUs (docs/multi-model.md): half the GPUs, a rollback of a wake. */
    time_shared_standby: bool().default(false),
    /** Progressive canary settings of this model (src/rollout/canary-controller.ts); judge gates are in docs/analysis.md. */
    canary: z
      .object({
        stages: z
          .array(z.number(msg('a percentage 0 < p <= 100')).gt(0, msg('a percentage 0 < p <= 100')).max(100, msg('a percentage 0 < p <= 100')))
          .min(1)
          .max(DEFAULTS.rollout.maxStages, msg(`at most ${DEFAULTS.rollout.maxStages} stages`))
          .optional(),
        stage_duration_ms: durationMs().optional(),
        alpha: z.number(msg('a number in (0, 0.5]')).gt(0).max(0.5).optional(),
        max_p99_increase: nonNeg().optional(),
        max_error_rate: fraction().optional(),
        max_error_increase: nonNeg().optional(),
        max_quality_decrease: fraction().optional(),
        min_samples: posInt().optional(),
        /** Pairwise judging: mirror this share of stable requests to the canary as shadow traffic. */
        shadow_share: fraction().optional(),
        /** The canary's first requests (cold caches and connections) are not judged. */
        ignore_first_requests: nonNegInt().optional(),
      })
      .strict()
      .optional(),
    /** Rolling updates of this model (src/rollout/rolling-controller.ts, docs/rolling.md); flags of `rollout rolling` override them. */
    rolling: z
      .object({
        max_surge: z.union([nonNegInt(), budgetText('a count or a percentage such as "25%"')]).optional(),
        max_unavailable: z.union([nonNegInt(), budgetText('a count or a percentage such as "10%"')]).optional(),
        step_timeout_ms: durationMs(DEFAULTS.rolling.maxLimitMs).optional(),
        progress_deadline_ms: durationMs(DEFAULTS.rolling.maxLimitMs).optional(),
        on_failure: z.enum(['pause', 'rollback'], msg('pause or rollback')).optional(),
      })
      .strict()
      .optional(),
    health: healthSchema,
    /** Priority tiers of its requests, and its degradation when capacity falls (docs/resilience.md). */
    tiers: tiersSchema,
    degradation: degradationSchema,
    /** Monitored rollback of this model's active version (src/rollout/monitor.ts). */
    monitor: z
      .object({
        enabled: bool().default(DEFAULTS.control.monitorEnabled),
        max_error_rate: fraction().default(DEFAULTS.control.monitorMaxErrorRate),
        max_p99_latency_ms: positive().default(DEFAULTS.control.monitorMaxP99LatencyMs),
        min_requests: nonNegInt().default(DEFAULTS.control.monitorMinRequests),
        interval_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(DEFAULTS.control.monitorIntervalMs),
      })
      .strict()
      .prefault({}),
  })
  .strict();

const tokenSchema = z
  .object({
    name: name('a token name'),
    role: z.enum(['viewer', 'operator', 'admin'], msg('one of viewer, operator, admin')),
    token: str('a token').optional(),
    token_sha256: z
      .string(msg('a hex SHA-256'))
      .regex(/^[0-9a-f]{64}$/, msg('64 lowercase hex digits'))
      .optional(),
  })
  .strict();

const gpuSchema = z.object({ id: z.union([z.string(), nonNegInt()]), memory_gb: positive().default(80) }).strict();

const G = DEFAULTS.gateway;
const T = DEFAULTS.telemetry;
const L = DEFAULTS.limits;

/** One listener's admission limits; 0 turns a limit off (max_connections 0 on the data plane: derived from the descriptor limit). */
function listenerLimits(maxConnections: number, perClientConnections: number, perClientRps: number, perClientBurst: number) {
  return z
    .object({
      max_connections: nonNegInt().default(maxConnections),
      per_client_connections: nonNegInt().default(perClientConnections),
      per_client_requests_per_s: z.number(msg('a non-negative number')).min(0, msg('a non-negative number')).default(perClientRps),
      /** Requests above the sustained rate one address may start at once; 0: the rate rounded up. */
      per_client_burst: nonNegInt().default(perClientBurst),
    })
    .strict()
    .prefault({});
}

export const configSchema = z
  .object({
    server: z
      .object({
        listen: hostPort().default(DEFAULTS.server.listen),
        admin_listen: hostPort().default(DEFAULTS.server.adminListen),
        data_dir: str('a directory').default(DEFAULTS.server.dataDir),
      })
      .strict()
      .prefault({}),
    auth: z
      .object({
        tokens: z.array(tokenSchema).default([]),
        session_idle_ms: durationMs().default(DEFAULTS.dashboard.sessionIdleMs),
        session_max_ms: durationMs().default(DEFAULTS.dashboard.sessionMaxMs),
      })
      .strict()
      .prefault({}),
    gpus: z
      .union([z.array(gpuSchema), z.object({ count: nonNegInt(), memory_gb: positive().default(80) }).strict()], msg('a list of GPUs or {count, memory_gb}'))
      .default({ count: 8, memory_gb: 80 }),
    gateway: z
      .object({
        max_body_bytes: posInt().default(G.maxBodyBytes),
        capture_max_bytes: posInt().default(G.captureMaxBytes),
        connect_timeout_ms: durationMs().default(G.connectTimeoutMs),
        first_token_timeout_ms: durationMs().default(G.firstTokenTimeoutMs),
        request_timeout_ms: durationMs().default(G.requestTimeoutMs),
        idle_timeout_ms: durationMs().default(G.idleTimeoutMs),
        max_retries: nonNegInt().default(G.maxRetries),
        resume: z
          .object({
            max_migrations: nonNegInt().default(G.resumeMaxMigrations),
            budget_ms: durationMs().default(G.resumeBudgetMs),
            log_bytes: z
              .number(msg('an integer of at least 4096'))
              .int(msg('an integer of at least 4096'))
              .min(4096, msg('an integer of at least 4096'))
              .default(G.resumeLogBytes),
          })
          .strict()
          .prefault({}),
        eject_base_ms: durationMs().default(G.ejectBaseMs),
        eject_max_ms: durationMs().default(G.ejectMaxMs),
        connections_per_worker: posInt().default(G.connectionsPerWorker),
        preconnect: z
          .object({
            ratio: z.number(msg('a number from 0 to 4')).min(0, msg('a number from 0 to 4')).max(4, msg('a number from 0 to 4')).default(G.preconnectRatio),
            max_per_worker: nonNegInt().default(G.preconnectMaxPerWorker),
          })
          .strict()
          .prefault({}),
        http2: z
          .object({
            enabled: bool().default(G.http2Enabled),
            max_concurrent_streams: posInt().default(G.http2MaxConcurrentStreams),
          })
          .strict()
          .prefault({}),
        worker_queue_max: nonNegInt().default(G.workerQueueMax),
        queue_timeout_ms: durationMs().default(G.queueTimeoutMs),
        allow_version_header: bool().default(G.allowVersionHeader),
        sticky_header: str().default(G.stickyHeader),
        category_header: str().default(G.categoryHeader),
        version_header: str().default(G.versionHeader),
        sticky_salt: stickySalt().default(G.stickySalt),
        picker: z.enum(['p2c', 'round_robin'], msg('"p2c" or "round_robin"')).default(G.picker),
        drain_timeout_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(G.drainTimeoutMs),
        hold_queue_max: posInt().default(G.holdQueueMax),
        hold_queue_timeout_ms: durationMs().default(G.holdQueueTimeoutMs),
        send_timeout_ms: durationMsOrZero().default(G.sendTimeoutMs),
        adapter_routing: z.enum(['affinity', 'random'], msg('"affinity" or "random"')).default(G.adapterRouting),
        adapter_prefetch: z
          .object({
            enabled: bool().default(G.adapterPrefetch.enabled),
            top_k: posInt().default(G.adapterPrefetch.topK),
            interval_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(G.adapterPrefetch.intervalMs),
            half_life_ms: durationMs().default(G.adapterPrefetch.halfLifeMs),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    /** Connection admission per listener (src/gateway/limits.ts, docs/security.md). */
    limits: z
      .object({
        data_plane: listenerLimits(L.dataMaxConnections, L.dataPerClientConnections, L.dataPerClientRps, L.dataPerClientBurst),
        admin: listenerLimits(L.adminMaxConnections, L.adminPerClientConnections, L.adminPerClientRps, L.adminPerClientBurst),
      })
      .strict()
      .prefault({}),
    telemetry: z
      .object({
        window_max_samples: posInt().default(T.windowMaxSamples),
        window_max_age_ms: posInt().default(T.windowMaxAgeMs),
      })
      .strict()
      .prefault({}),
    /** Where the canary judge and the monitor read their series (config/metrics-source.ts, docs/cluster.md). */
    metrics_source: metricsSourceSchema,
    notifications: z
      .object({ webhooks: z.array(url()).default([]) })
      .strict()
      .prefault({}),
    control: z
      .object({ tick_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(DEFAULTS.control.tickMs) })
      .strict()
      .prefault({}),
    /** The multi-model scheduler (src/scheduler/, docs/multi-model.md): off unless enabled. */
    scheduler: z
      .object({
        enabled: bool().default(false),
        /** Decide and explain every round, change nothing. */
        dry_run: bool().default(false),
        interval_ms: durationMs(DEFAULTS.durations.maxIntervalMs).default(DEFAULTS.scheduler.intervalMs),
        window_ms: posInt().default(DEFAULTS.scheduler.windowMs),
        idle_after_ms: durationMs().default(DEFAULTS.scheduler.idleAfterMs),
        cooldown_ms: durationMsOrZero().default(DEFAULTS.scheduler.cooldownMs),
        // below 1: a model at its SLO never gives back (that would lower and raise it in turn)
        relax_below: z
          .number(msg('a number in (0, 1)'))
          .gt(0, msg('a number in (0, 1)'))
          .lt(1, msg('a number in (0, 1)'))
          .default(DEFAULTS.scheduler.relaxBelow),
        min_samples: posInt().default(DEFAULTS.scheduler.minSamples),
        headroom: z.number(msg('a number in (0, 1]')).gt(0, msg('a number in (0, 1]')).max(1, msg('a number in (0, 1]')).default(DEFAULTS.scheduler.headroom),
        drain_timeout_ms: durationMsOrZero(DEFAULTS.durations.maxIntervalMs).default(DEFAULTS.scheduler.drainTimeoutMs),
      })
      .strict()
      .prefault({}),
    /** Models taking turns on the same GPUs (config/time-sharing.ts, docs/multi-model.md). */
    /** Where state lives: the embedded SQLite file (default) or etcd (cluster mode, docs/cluster.md). */
    store: storeSchema,
    time_sharing: timeSharingSchema,
    /** LLM-as-judge: any OpenAI-compatible endpoint and model (src/analysis/llmjudge.ts). */
    judge: z
      .object({
        url: url(),
        model: str('a model name'),
        /** Environment variable holding the judge's API key (never the key itself in the file). */
        api_key_env: str().optional(),
        mode: z.enum(['pointwise', 'pairwise'], msg('"pointwise" or "pairwise"')).default('pointwise'),
        sample_share: fraction().default(DEFAULTS.judge.sampleShare),
        concurrency: posInt().default(DEFAULTS.judge.concurrency),
        timeout_ms: durationMs().default(DEFAULTS.judge.timeoutMs),
        /** Keep the prompt and answers of the judge's last decisions for operators (off: scores and versions only). */
        capture_prompts: z.boolean(msg('true or false')).default(false),
      })
      .strict()
      .optional(),
    /** Weight cache (src/fleet/cache.ts); dir defaults to <data_dir>/cache. */
    cache: z
      .object({
        dir: str('a directory').optional(),
        max_versions: posInt().default(DEFAULTS.control.cacheMaxVersions),
        max_bytes: posInt().default(DEFAULTS.control.cacheMaxBytes),
      })
      .strict()
      .prefault({}),
    models: z.array(modelSchema).min(1, msg('at least one model')),
  })
  .strict();

export type RawConfig = z.output<typeof configSchema>;
export type RawVersion = z.output<typeof versionSchema>;
export type RawSim = z.output<typeof simSchema>;
