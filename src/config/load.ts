// The config pipeline: parse YAML → validate with defaults → normalize → cross-field rules → freeze.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { degradationConfig, tierConfig } from './admission.js';
import path from 'node:path';
import { LineCounter, parseDocument, isNode } from 'yaml';
import type { Document } from 'yaml';
import { ConfigError } from '../errors.js';
import type { ConfigIssue } from '../errors.js';
import { cardChecksum } from '../domain/card.js';
import { DEFAULTS } from '../defaults.js';
import { formatPath, zodIssues } from './issues.js';
import { configSchema } from './schema.js';
import { advertiseIssue, storeConfig } from './store.js';
import { fromSnakeFaults } from './sim-faults.js';
import { normalizeTimeSharing, standbySlots } from './time-sharing.js';
import { normalizeMetricsSource } from './metrics-source.js';
import type { RawConfig, RawSim, RawVersion } from './schema.js';
import type { GlidepathConfig, HealthConfig, ListenerLimitsConfig, ModelConfig, ProviderConfig, RouteConfig, SimSettings, VersionConfig } from './types.js';

function lineOf(doc: Document | undefined, lc: LineCounter | undefined, p: readonly PropertyKey[]): number | undefined {
  if (!doc || !lc) return undefined;
  // walk up until a node exists (a missing key is reported at its parent)
  for (let n = p.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(p.slice(0, n) as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** Integers are proportions; fractions must sum to 1 within 1e-9. Returns an error message or the normalised weights. */
function normalizeWeights(w: Record<string, number>): Record<string, number> | string {
  const entries = Object.entries(w);
  if (entries.length === 0) return 'no versions have a weight';
  for (const [k, v] of entries) {
    if (!Number.isFinite(v) || v < 0) return `weight of ${k} must be a finite non-negative number, got ${v}`;
  }
  const total = entries.reduce((s, [, v]) => s + v, 0);
  if (total <= 0) return 'weights sum to 0: at least one version needs a positive weight';
  const allInts = entries.every(([, v]) => Number.isInteger(v));
  if (!allInts && Math.abs(total - 1) > 1e-9) return `fractional weights must sum to 1 (within 1e-9), got ${total}`;
  const out: Record<string, number> = {};
  for (const [k, v] of entries) out[k] = v / total;
  return out;
}

/**
 * A simulated version's settings. Its wake times, unless given, follow its size (`gpu_memory_gb`) at
 * the rates the planner estimates with: the weights copied back from CPU memory (sleep level 1), or
 * read again from storage (level 2). A 16 GB model wakes in ~2.3 s and reloads in ~15 s; 140 GB in
 * ~20 s and ~2 min (seed 000).
 */
function simSettings(s: RawSim, gpuMemoryGb: number): SimSettings {
  const out: SimSettings = {};
  if (s.seed !== undefined) out.seed = s.seed;
  if (s.load_time_ms !== undefined) out.loadTimeMs = s.load_time_ms;
  if (s.prefill_tokens_per_s !== undefined) out.prefillTokensPerS = s.prefill_tokens_per_s;
  if (s.inter_token_ms !== undefined) out.interTokenMs = s.inter_token_ms;
  if (s.itl_growth_per_seq !== undefined) out.itlGrowthPerSeq = s.itl_growth_per_seq;
  if (s.jitter !== undefined) out.jitter = s.jitter;
  if (s.kv_capacity_tokens !== undefined) out.kvCapacityTokens = s.kv_capacity_tokens;
  if (s.max_num_seqs !== undefined) out.maxNumSeqs = s.max_num_seqs;
  if (s.max_model_len !== undefined) out.maxModelLen = s.max_model_len;
  if (s.hallucination_rate !== undefined) out.hallucinationRate = s.hallucination_rate;
  // always said: the gateway serves adapters on a version whose workers have LoRA slots
  out.maxLoras = s.max_loras ?? DEFAULTS.sim.maxLoras;
  if (s.lora_load_ms !== undefined) out.loraLoadMs = s.lora_load_ms;
  out.wakeMs = s.wake_ms ?? Math.round((gpuMemoryGb / DEFAULTS.control.planWakeGbPerS) * 1000);
  out.reloadMs = s.reload_ms ?? Math.round((gpuMemoryGb / DEFAULTS.control.planLoadGbPerS) * 1000);
  if (s.warmup_requests !== undefined) out.warmupRequests = s.warmup_requests;
  if (s.faults) out.faults = fromSnakeFaults(s.faults);
  return out;
}

/** One version in glidepath.yaml's snake_case form (already validated by `versionSchema`) → its VersionConfig. */
export function normalizeVersion(model: string, v: RawVersion): VersionConfig {
  const architecture = {
    layers: v.architecture.layers,
    kvHeads: v.architecture.kv_heads,
    headDim: v.architecture.head_dim,
    blockSize: v.architecture.block_size,
    maxContext: v.architecture.max_context,
    tokenizer: v.architecture.tokenizer,
    family: v.architecture.family,
  };
  const p = v.provider;
  const provider: ProviderConfig =
    p.kind === 'sim'
      ? { kind: 'sim', sim: simSettings(p.sim, v.gpu_memory_gb) }
      : p.kind === 'static'
        ? { kind: 'static', endpoints: p.endpoints, resume: p.resume, tokenIdPrompts: p.token_id_prompts }
        : {
            kind: 'process',
            command: p.command,
            env: p.env,
            healthPath: p.health_path,
            gracePeriodMs: p.grace_period_ms,
            resume: p.resume,
            tokenIdPrompts: p.token_id_prompts,
          };
  const card = { model, weights: v.weights, weightHash: v.weight_hash, quantization: v.quantization, tp: v.tp, architecture, engine: v.engine };
  return {
    id: v.id,
    model,
    weights: v.weights,
    weightHash: v.weight_hash,
    baseModel: v.base_model,
    quantization: v.quantization,
    tp: v.tp,
    gpuMemoryGb: v.gpu_memory_gb,
    architecture,
    engine: v.engine,
    cardChecksum: cardChecksum(card),
    replicas: v.roles ? v.roles.prefill + v.roles.decode : v.replicas,
    roles: v.roles && { prefill: v.roles.prefill, decode: v.roles.decode },
    provider,
    warmup: { requests: v.warmup.requests, maxTokens: v.warmup.max_tokens },
    metadata: v.metadata,
    spares: spareCount(v.spares, v.provider.kind === 'static' ? v.provider.endpoints.length : v.replicas),
    probeReference: v.probe_reference,
  };
}

/** `spares` as a count: a percentage of the replicas rounded up (asked for spares, you get at least one). */
function spareCount(s: number | string | undefined, replicas: number): number {
  if (s === undefined) return DEFAULTS.health.spares;
  if (typeof s === 'number') return s;
  return Math.ceil((Number(s.slice(0, -1)) / 100) * replicas);
}

function healthConfig(h: RawConfig['models'][number]['health']): HealthConfig {
  const prompts = h.probes ?? DEFAULTS.health.prompts;
  return {
    enabled: h.enabled,
    intervalMs: h.interval_ms,
    jitter: h.jitter,
    timeoutMs: h.timeout_ms,
    retries: h.retries,
    probes: prompts.map((p) =>
      typeof p === 'string' ? { prompt: p, maxTokens: h.max_tokens } : { prompt: p.prompt, maxTokens: p.max_tokens ?? h.max_tokens },
    ),
    latencyFactor: h.latency_factor,
    latencyFloorMs: h.latency_floor_ms,
    logprobTolerance: h.logprob_tolerance,
    minMargin: h.min_margin,
    failureThreshold: h.failure_threshold,
    healthyAfter: h.healthy_after,
    failureRate: h.failure_rate,
    rateWindow: h.rate_window,
    rateMinCalls: h.rate_min_calls,
    recoveryTimeoutMs: h.recovery_timeout_ms,
    recoveryTimeoutMaxMs: h.recovery_timeout_max_ms,
    halfOpenProbes: h.half_open_probes,
    halfOpenRequests: h.half_open_requests,
    deadAfterFailedRecoveries: h.dead_after_failed_recoveries,
    replace: h.replace,
    passive: h.passive,
    ttftOutlierFactor: h.ttft_outlier_factor,
    maxEjectedShare: h.max_ejected_share,
  };
}

/** Cross-field rules; every problem is pushed with its path. */
function normalize(raw: RawConfig, issues: ConfigIssue[]): GlidepathConfig {
  const gpus = Array.isArray(raw.gpus)
    ? raw.gpus.map((g) => ({ id: String(g.id), memoryGb: g.memory_gb }))
    : Array.from({ length: raw.gpus.count }, (_, i) => ({ id: String(i), memoryGb: (raw.gpus as { memory_gb: number }).memory_gb }));
  const gpuIds = new Set<string>();
  gpus.forEach((g, i) => {
    if (gpuIds.has(g.id)) issues.push({ path: `gpus[${i}].id`, message: `duplicate GPU id ${JSON.stringify(g.id)}` });
    gpuIds.add(g.id);
  });

  const tokens = raw.auth.tokens.map((t, i) => {
    if ((t.token === undefined) === (t.token_sha256 === undefined)) {
      issues.push({ path: `auth.tokens[${i}]`, message: 'give exactly one of token or token_sha256' });
    }
    return { name: t.name, role: t.role, sha256: t.token_sha256 ?? sha256(t.token ?? '') };
  });

  const modelNames = new Set<string>();
  // adapters are named in `model` as models are: one namespace (checked once every model is known)
  const adapterNames = new Map<string, string>();
  const allModels = new Set(raw.models.map((m) => m.name));
  raw.models.forEach((m, mi) =>
    m.adapters.forEach((a, ai) => {
      const at = `models[${mi}].adapters[${ai}].name`;
      if (allModels.has(a.name)) issues.push({ path: at, message: `adapter ${JSON.stringify(a.name)} has the name of a model` });
      else if (adapterNames.has(a.name))
        issues.push({ path: at, message: `adapter ${JSON.stringify(a.name)} is also listed under ${adapterNames.get(a.name) as string}` });
      adapterNames.set(a.name, m.name);
    }),
  );
  const models: ModelConfig[] = raw.models.map((m, mi) => {
    const at = `models[${mi}]`;
    if (modelNames.has(m.name)) issues.push({ path: `${at}.name`, message: `duplicate model name ${JSON.stringify(m.name)}` });
    modelNames.add(m.name);
    if (m.min_replicas > m.max_replicas) {
      issues.push({ path: `${at}.min_replicas`, message: `min_replicas (${m.min_replicas}) is larger than max_replicas (${m.max_replicas})` });
    }
    const ids = new Set<string>();
    const versions = m.versions.map((v, vi) => {
      if (ids.has(v.id)) issues.push({ path: `${at}.versions[${vi}].id`, message: `duplicate version id ${JSON.stringify(v.id)}` });
      ids.add(v.id);
      if (v.tp > gpus.length && v.provider.kind !== 'static') {
        issues.push({ path: `${at}.versions[${vi}].tp`, message: `tp ${v.tp} needs more GPUs than the ${gpus.length} in the inventory` });
      }
      if (v.roles !== undefined && (v.provider.kind === 'static' || (v.spares !== undefined && v.spares !== 0 && v.spares !== '0%'))) {
        issues.push({
          path: `${at}.versions[${vi}].roles`,
          message:
            v.provider.kind === 'static'
              ? 'prefill and decode roles need workers Glidepath starts (sim or process), not static endpoints'
              : 'prefill and decode roles have no hot spares yet: leave `spares` out',
        });
      }
      if (v.provider.kind === 'static' && typeof v.spares === 'number' && v.spares >= v.provider.endpoints.length) {
        issues.push({
          path: `${at}.versions[${vi}].spares`,
          message: `${v.spares} spare(s) of ${v.provider.endpoints.length} static endpoint(s) leave none serving (the last \`spares\` endpoints are the spares)`,
        });
      }
      return normalizeVersion(m.name, v);
    });
    if (m.health.min_margin < 2 * m.health.logprob_tolerance) {
      issues.push({
        path: `${at}.health.min_margin`,
        message: `min_margin (${m.health.min_margin}) must be at least twice logprob_tolerance (${m.health.logprob_tolerance}): a drift the tolerance accepts could otherwise flip a recorded token`,
      });
    }
    const rawRoute = m.route ?? { weights: { [m.versions[0]?.id ?? '']: 1 }, overrides: {} };
    const weightsIn = Object.keys(rawRoute.weights).length > 0 ? rawRoute.weights : { [m.versions[0]?.id ?? '']: 1 };
    for (const vid of Object.keys(weightsIn)) {
      if (!ids.has(vid))
        issues.push({ path: `${at}.route.weights.${vid}`, message: `unknown version ${JSON.stringify(vid)} (versions: ${[...ids].join(', ')})` });
    }
    const norm = normalizeWeights(weightsIn);
    if (typeof norm === 'string') issues.push({ path: `${at}.route.weights`, message: norm });
    for (const [cat, vid] of Object.entries(rawRoute.overrides)) {
      if (!ids.has(vid)) issues.push({ path: `${at}.route.overrides.${cat}`, message: `unknown version ${JSON.stringify(vid)}` });
    }
    if (rawRoute.shadow && !ids.has(rawRoute.shadow.version)) {
      issues.push({ path: `${at}.route.shadow.version`, message: `unknown version ${JSON.stringify(rawRoute.shadow.version)}` });
    }
    const route: RouteConfig = {
      weights: typeof norm === 'string' ? {} : norm,
      overrides: rawRoute.overrides,
      stickySalt: rawRoute.sticky_salt,
      shadow: rawRoute.shadow,
    };
    return {
      name: m.name,
      priority: m.priority === 'medium' ? 'standard' : m.priority === 'low' ? 'batch' : m.priority,
      slo: { ttftP99Ms: m.slo.ttft_p99_ms, tpotP99Ms: m.slo.tpot_p99_ms },
      scaleSignal: m.scale_signal && { queueDepth: m.scale_signal.queue_depth, tokensPerS: m.scale_signal.tokens_per_s },
      minReplicas: m.min_replicas,
      timeSharedStandby: m.time_shared_standby,
      adapters: m.adapters.map((a) => ({ name: a.name, source: a.source, version: a.version })),
      maxReplicas: m.max_replicas,
      versions,
      route,
      canary: m.canary && {
        stages: m.canary.stages,
        stageDurationMs: m.canary.stage_duration_ms,
        alpha: m.canary.alpha,
        maxP99Increase: m.canary.max_p99_increase,
        maxErrorRate: m.canary.max_error_rate,
        maxErrorIncrease: m.canary.max_error_increase,
        maxQualityDecrease: m.canary.max_quality_decrease,
        minSamples: m.canary.min_samples,
        shadowShare: m.canary.shadow_share,
        ignoreFirstRequests: m.canary.ignore_first_requests,
      },
      rolling: m.rolling && {
        maxSurge: m.rolling.max_surge,
        maxUnavailable: m.rolling.max_unavailable,
        stepTimeoutMs: m.rolling.step_timeout_ms,
        progressDeadlineMs: m.rolling.progress_deadline_ms,
        onFailure: m.rolling.on_failure,
      },
      health: healthConfig(m.health),
      tiers: tierConfig(m.tiers, at, issues),
      degradation: degradationConfig(m.degradation, servingWorkers(versions[0])),
      monitor: {
        enabled: m.monitor.enabled,
        maxErrorRate: m.monitor.max_error_rate,
        maxP99LatencyMs: m.monitor.max_p99_latency_ms,
        minRequests: m.monitor.min_requests,
        intervalMs: m.monitor.interval_ms,
      },
    };
  });

  const timeSharing = normalizeTimeSharing(raw.time_sharing, models, issues);
  const advertise = advertiseIssue(storeConfig(raw.store), raw.server.admin_listen);
  if (advertise) issues.push(advertise);
  const g = raw.gateway;
  return {
    server: { listen: raw.server.listen, adminListen: raw.server.admin_listen, dataDir: raw.server.data_dir },
    store: storeConfig(raw.store),
    auth: { tokens, sessionIdleMs: raw.auth.session_idle_ms, sessionMaxMs: raw.auth.session_max_ms },
    gpus,
    gateway: {
      maxBodyBytes: g.max_body_bytes,
      captureMaxBytes: g.capture_max_bytes,
      connectTimeoutMs: g.connect_timeout_ms,
      firstTokenTimeoutMs: g.first_token_timeout_ms,
      requestTimeoutMs: g.request_timeout_ms,
      idleTimeoutMs: g.idle_timeout_ms,
      maxRetries: g.max_retries,
      resume: { maxMigrations: g.resume.max_migrations, budgetMs: g.resume.budget_ms, logBytes: g.resume.log_bytes },
      ejectBaseMs: g.eject_base_ms,
      ejectMaxMs: g.eject_max_ms,
      connectionsPerWorker: g.connections_per_worker,
      preconnect: { ratio: g.preconnect.ratio, maxPerWorker: g.preconnect.max_per_worker },
      http2: { enabled: g.http2.enabled, maxConcurrentStreams: g.http2.max_concurrent_streams },
      workerQueueMax: g.worker_queue_max,
      queueTimeoutMs: g.queue_timeout_ms,
      allowVersionHeader: g.allow_version_header,
      stickyHeader: g.sticky_header.toLowerCase(),
      categoryHeader: g.category_header.toLowerCase(),
      versionHeader: g.version_header.toLowerCase(),
      stickySalt: g.sticky_salt,
      picker: g.picker,
      drainTimeoutMs: g.drain_timeout_ms,
      holdQueueMax: g.hold_queue_max,
      holdQueueTimeoutMs: g.hold_queue_timeout_ms,
      sendTimeoutMs: g.send_timeout_ms,
      adapterRouting: g.adapter_routing,
      adapterPrefetch: {
        enabled: g.adapter_prefetch.enabled,
        topK: g.adapter_prefetch.top_k,
        intervalMs: g.adapter_prefetch.interval_ms,
        halfLifeMs: g.adapter_prefetch.half_life_ms,
      },
    },
    limits: { dataPlane: listenerLimits(raw.limits.data_plane), admin: listenerLimits(raw.limits.admin) },
    telemetry: { windowMaxSamples: raw.telemetry.window_max_samples, windowMaxAgeMs: raw.telemetry.window_max_age_ms },
    metricsSource: normalizeMetricsSource(raw.metrics_source),
    notifications: { webhooks: raw.notifications.webhooks },
    control: { tickMs: raw.control.tick_ms },
    scheduler: {
      enabled: raw.scheduler.enabled,
      dryRun: raw.scheduler.dry_run,
      intervalMs: raw.scheduler.interval_ms,
      windowMs: raw.scheduler.window_ms,
      idleAfterMs: raw.scheduler.idle_after_ms,
      cooldownMs: raw.scheduler.cooldown_ms,
      relaxBelow: raw.scheduler.relax_below,
      headroom: raw.scheduler.headroom,
      minSamples: raw.scheduler.min_samples,
      drainTimeoutMs: raw.scheduler.drain_timeout_ms,
    },
    timeSharing,
    sharedStandby: standbySlots(models, timeSharing, issues),
    judge: raw.judge && {
      url: raw.judge.url,
      model: raw.judge.model,
      apiKeyEnv: raw.judge.api_key_env,
      mode: raw.judge.mode,
      sampleShare: raw.judge.sample_share,
      concurrency: raw.judge.concurrency,
      timeoutMs: raw.judge.timeout_ms,
      capturePrompts: raw.judge.capture_prompts,
    },
    cache: {
      dir: raw.cache.dir ?? path.join(raw.server.data_dir, DEFAULTS.control.cacheDirName),
      maxVersions: raw.cache.max_versions,
      maxBytes: raw.cache.max_bytes,
    },
    models,
  };
}

function listenerLimits(l: RawConfig['limits']['admin']): ListenerLimitsConfig {
  const rps = l.per_client_requests_per_s;
  return {
    maxConnections: l.max_connections,
    perClientConnections: l.per_client_connections,
    perClientRps: rps,
    perClientBurst: rps > 0 ? Math.max(1, l.per_client_burst > 0 ? l.per_client_burst : Math.ceil(rps)) : 0,
  };
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

/** Validate an already-parsed value (e.g. from tests). Throws ConfigError with every problem. */
export function parseConfig(value: unknown, opts: { source?: string; doc?: Document; lineCounter?: LineCounter } = {}): GlidepathConfig {
  const res = configSchema.safeParse(value ?? {}, { reportInput: true });
  if (!res.success) {
    const issues: ConfigIssue[] = zodIssues(res.error).map(({ path: p, message }) => {
      const line = lineOf(opts.doc, opts.lineCounter, p);
      return line === undefined ? { path: formatPath(p), message } : { path: formatPath(p), message, line };
    });
    throw new ConfigError(issues, opts.source);
  }
  const issues: ConfigIssue[] = [];
  let cfg = normalize(res.data, issues);
  if (issues.length > 0) {
    const withLines = issues.map((i) => {
      const segs = i.path
        .split(/\.|\[(\d+)\]/)
        .filter((s) => s !== undefined && s !== '')
        .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
      const line = lineOf(opts.doc, opts.lineCounter, segs);
      return line === undefined ? i : { ...i, line };
    });
    throw new ConfigError(withLines, opts.source);
  }
  if (opts.source) {
    // relative directories are relative to the file that names them
    const at = (p: string): string => (path.isAbsolute(p) ? p : path.resolve(path.dirname(opts.source as string), p));
    cfg = {
      ...cfg,
      source: opts.source,
      server: { ...cfg.server, dataDir: at(cfg.server.dataDir) },
      cache: { ...cfg.cache, dir: at(cfg.cache.dir) },
      store: storeConfig(res.data.store, at),
    };
  }
  return deepFreeze(cfg);
}

/** Parse YAML text; syntax errors are reported with their line. */
export function parseConfigText(text: string, source = '<config>'): GlidepathConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({ path: '', message: e.message.split('\n')[0] ?? e.message, line: lineCounter.linePos(e.pos[0]).line })),
      source,
    );
  }
  return parseConfig(doc.toJS(), { source, doc, lineCounter });
}

export function loadConfigFile(file: string): GlidepathConfig {
  const abs = path.resolve(file);
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError([{ path: '', message: code === 'ENOENT' ? 'file not found' : `cannot read: ${(err as Error).message}` }], abs);
  }
  return parseConfigText(text, abs);
}

/** The workers a version serves with when whole: its replicas, or a static provider's endpoints that are not spares. */
function servingWorkers(v: VersionConfig | undefined): number {
  if (v === undefined) return 1;
  return v.provider.kind === 'static' ? Math.max(1, v.provider.endpoints.length - (v.spares ?? 0)) : v.replicas;
}
