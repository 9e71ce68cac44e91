// The gateway's Prometheus metrics: per-request ones array-backed with children cached per pool, the rest prom-client's.
import { SchedulerMetrics } from './scheduler-metrics.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { DEFAULTS } from '../defaults.js';
import { AdapterCanaryMetrics, CanaryMetrics, HealthMetrics } from './control-metrics.js';
import { ArrayCounter, ArrayHistogram } from './prom.js';
import type { CounterChild, HistogramChild } from './prom.js';

export class GatewayMetrics {
  readonly registry = new Registry();
  constructor() {
    // process_open_fds / process_max_fds (a gateway near its descriptor limit refuses connections),
    // CPU, memory, event-loop lag and GC: prom-client's standard process metrics, read at scrape time
    collectDefaultMetrics({ register: this.registry });
    // gauges that prom-client names *_total, which `promtool check metrics` rejects (and which say
    // little about a gateway: libuv handles and requests)
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) this.registry.removeSingleMetric(name);
  }
  readonly requests = new ArrayCounter({
    name: 'glidepath_requests_total',
    help: 'Requests finished, by model, version and HTTP status code sent to the client.',
    labelNames: ['model', 'version', 'code'] as const,
    registers: [this.registry],
  });
  /**
   * Requests that failed by their version's fault (telemetry/record.ts isVersionError): 5xx, and streams
   * that broke after their 200 — which glidepath_requests_total's code cannot show. The canary judge
   * and the monitor read their error rates from it when Prometheus is their metric source.
   */
  readonly versionErrors = new ArrayCounter({
    name: 'glidepath_version_errors_total',
    help: "Requests that failed by their version's fault: 5xx sent, or a stream broken after its 200 (client errors and the gateway's own exhaustion excluded).",
    labelNames: ['model', 'version'] as const,
    registers: [this.registry],
  });
  readonly ttft = new ArrayHistogram({
    name: 'glidepath_time_to_first_token_seconds',
    help: 'Time from receiving a request to its first token.',
    labelNames: ['model', 'version'] as const,
    buckets: [...DEFAULTS.telemetry.latencyBucketsS],
    registers: [this.registry],
  });
  readonly tpot = new ArrayHistogram({
    name: 'glidepath_time_per_output_token_seconds',
    help: 'Mean time between output tokens after the first, per request.',
    labelNames: ['model', 'version'] as const,
    buckets: [...DEFAULTS.telemetry.tpotBucketsS],
    registers: [this.registry],
  });
  readonly duration = new ArrayHistogram({
    name: 'glidepath_request_duration_seconds',
    help: 'Time from receiving a request to its last byte.',
    labelNames: ['model', 'version'] as const,
    buckets: [...DEFAULTS.telemetry.latencyBucketsS],
    registers: [this.registry],
  });
  /** In-flight counts are read from the pools when scraped: nothing to update per request. */
  readonly inflight = poolGauge(this.registry, 'glidepath_inflight_requests', 'Requests in flight to workers, by model and version.');
  /** Like in-flight counts, queue depths are read from the pools when scraped. */
  readonly queueDepth = poolGauge(
    this.registry,
    'glidepath_upstream_queue_depth',
    'Requests waiting for a free connection to a worker (every connection busy), by model and version.',
  );

  /** Report `size()` as the in-flight count of (model, version) at every scrape. */
  trackInflight(model: string, version: string, size: () => number): void {
    this.inflight.track(model, version, size);
  }

  /** Report `size()` as the number of requests of (model, version) waiting for a connection, at every scrape. */
  trackQueued(model: string, version: string, size: () => number): void {
    this.queueDepth.track(model, version, size);
  }
  /** Observed only for requests that waited: its count over glidepath_requests_total is the share that did. */
  readonly queueTime = new ArrayHistogram({
    name: 'glidepath_upstream_queue_seconds',
    help: 'Time a request waited for a free connection to a worker (requests that found one free are not observed).',
    labelNames: ['model', 'version'] as const,
    buckets: [...DEFAULTS.telemetry.queueBucketsS],
    registers: [this.registry],
  });
  readonly queueRejected = new Counter({
    name: 'glidepath_upstream_queue_rejected_total',
    help: 'Requests answered 503 because workers were saturated: every queue of the pool full (reason full) or waited past queue_timeout_ms (reason timeout).',
    labelNames: ['model', 'version', 'reason'] as const,
    registers: [this.registry],
  });
  readonly localResourceErrors = new Counter({
    name: 'glidepath_local_resource_errors_total',
    help: 'Connections to workers the gateway could not open for lack of its own resources (descriptors, ports, memory), by errno; never counted against a worker.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly capturesDropped = new Counter({
    name: 'glidepath_capture_dropped_total',
    help: 'Answers sampled for the quality judge (source client or shadow) not handed to it: longer than gateway.capture_max_bytes.',
    labelNames: ['model', 'version', 'source'] as const,
    registers: [this.registry],
  });
  readonly tokens = new ArrayCounter({
    name: 'glidepath_tokens_total',
    help: 'Tokens processed, by kind (prompt or completion).',
    labelNames: ['model', 'version', 'kind'] as const,
    registers: [this.registry],
  });
  readonly routeWeight = new Gauge({
    name: 'glidepath_route_weight',
    help: 'Configured share of traffic per version in the current route (0..1).',
    labelNames: ['model', 'version'] as const,
    registers: [this.registry],
  });
  readonly routeRevision = new Gauge({
    name: 'glidepath_route_revision',
    help: 'Revision of the route snapshot in force per model.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  /** Cluster mode (docs/cluster.md): how long a route took from the leader's swap to this replica's. */
  readonly routePropagation = new Histogram({
    name: 'glidepath_cluster_route_propagation_seconds',
    help: "Cluster mode: time from the leader's route swap to this follower's, by model (clocks of both machines).",
    labelNames: ['model'] as const,
    buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  /** Cluster mode: 1 while this replica leads (runs the controllers), 0 while it follows. */
  readonly clusterLeader = new Gauge({
    name: 'glidepath_cluster_leader',
    help: 'Cluster mode: 1 while this replica leads (runs the control plane and the controllers), 0 while it follows.',
    registers: [this.registry],
  });
  /** Cluster mode: 1 while this replica's watch on etcd is connected. */
  readonly clusterStoreConnected = new Gauge({
    name: 'glidepath_cluster_store_connected',
    help: 'Cluster mode: 1 while this replica is connected to etcd; 0: it serves its last routes and refuses admin writes.',
    registers: [this.registry],
  });
  readonly splitRequests = new ArrayCounter({
    name: 'glidepath_split_requests_total',
    help: 'Requests assigned to each version by the splitter, by reason (header, override, sticky, weighted): the actual share.',
    labelNames: ['model', 'version', 'reason'] as const,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'glidepath_upstream_retries_total',
    help: 'Requests retried on another worker before the first byte reached the client.',
    labelNames: ['model', 'version'] as const,
    registers: [this.registry],
  });
  readonly ejections = new Counter({
    name: 'glidepath_worker_ejections_total',
    help: 'Times a worker was taken out of rotation by passive health (connection refused).',
    labelNames: ['model', 'version', 'worker'] as const,
    registers: [this.registry],
  });
  readonly drainAborted = new Counter({
    name: 'glidepath_drain_aborted_total',
    help: 'In-flight requests aborted because a drain timed out.',
    labelNames: ['model', 'version'] as const,
    registers: [this.registry],
  });
  readonly migrations = new Counter({
    name: 'glidepath_stream_migrations_total',
    help: 'Broken streams by what broke them (reason: an error code) and what came of it (outcome: resumed on another worker, not_resumable, exhausted: out of migrations or time, failed: the new worker failed too).',
    labelNames: ['model', 'version', 'reason', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly migrationStall = new Histogram({
    name: 'glidepath_stream_migration_stall_seconds',
    help: "Time a resumed stream stood still: from its break to the continuation's first bytes at the client.",
    labelNames: ['model', 'version'] as const,
    buckets: [...DEFAULTS.telemetry.migrationStallBucketsS],
    registers: [this.registry],
  });
  readonly reprefillTokens = new Counter({
    name: 'glidepath_stream_reprefill_tokens_total',
    help: 'Prompt tokens the workers that continued broken streams prefilled again (the original prompt and the text already generated).',
    labelNames: ['model', 'version'] as const,
    registers: [this.registry],
  });
  readonly adapterRequests = new Counter({
    name: 'glidepath_adapter_requests_total',
    help: 'Requests for LoRA adapters by worker and whether the worker had the adapter loaded (hit) or loaded it first (miss): the hit rate per worker.',
    labelNames: ['model', 'worker', 'result'] as const,
    registers: [this.registry],
  });
  readonly adapterRequestsByName = new Counter({
    name: 'glidepath_adapter_requests_by_adapter_total',
    help: 'Requests per LoRA adapter (registered adapters only: bounded by the registry).',
    labelNames: ['model', 'adapter'] as const,
    registers: [this.registry],
  });
  readonly adapterLoads = new Counter({
    name: 'glidepath_adapter_loads_total',
    help: "LoRA adapter loads the gateway asked of workers, by outcome (loaded, failed) and trigger (demand: a request's; prefetch: the prefetcher's, ahead of requests).",
    labelNames: ['model', 'outcome', 'trigger'] as const,
    registers: [this.registry],
  });
  readonly adapterEvictions = new Counter({
    name: 'glidepath_adapter_evictions_total',
    help: 'LoRA adapters unloaded from a full worker to make room (least recently used, none in use), by the trigger of the load that needed the room (demand, prefetch).',
    labelNames: ['model', 'trigger'] as const,
    registers: [this.registry],
  });
  readonly adapterLoadSeconds = new Histogram({
    name: 'glidepath_adapter_load_seconds',
    help: 'Time a LoRA adapter load took on a worker, as the request that waited for it saw it.',
    labelNames: ['model'] as const,
    buckets: [...DEFAULTS.telemetry.adapterLoadBucketsS],
    registers: [this.registry],
  });
  readonly capacityRatio = new Gauge({
    name: 'glidepath_capacity_ratio',
    help: "A model's healthy capacity over the throughput it must serve (degradation.required_tokens_per_s).",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly workerCapacity = new Gauge({
    name: 'glidepath_worker_capacity_tokens_per_s',
    help: "A routed worker's worth in completion tokens/s: measured from its engine's vLLM metrics at saturation, else the configured worker_tokens_per_s.",
    labelNames: ['model', 'version', 'worker'] as const,
    registers: [this.registry],
  });
  readonly shed = new Counter({
    name: 'glidepath_shed_total',
    help: 'Requests refused by degradation, by the tier they were placed in and the level (level_2, level_3: the lowest tier; level_4: every request).',
    labelNames: ['model', 'tier', 'reason'] as const,
    registers: [this.registry],
  });
  readonly holdQueue = new Gauge({
    name: 'glidepath_hold_queue_depth',
    help: 'Requests waiting in a model hold queue (drain-first swaps).',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly holdRejected = new Counter({
    name: 'glidepath_hold_queue_rejected_total',
    help: 'Requests refused by a hold queue (full or waited past its limit).',
    labelNames: ['model', 'reason'] as const,
    registers: [this.registry],
  });
  readonly holdWait = new Histogram({
    name: 'glidepath_hold_wait_seconds',
    help: "How long a released request waited in its model's hold queue (a drain-first swap, a time-shared model's switch); not in its version's TTFT or latency.",
    labelNames: ['model'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60],
    registers: [this.registry],
  });
  readonly workerUp = new Gauge({
    name: 'glidepath_worker_up',
    help: '1 when a worker is routable, 0 otherwise.',
    labelNames: ['model', 'version', 'worker'] as const,
    registers: [this.registry],
  });

  /** Open client connections per listener, read from the listeners when scraped. */
  private readonly connectionSources = new Map<string, { open: () => number; max: number }>();
  readonly clientConnections = new Gauge({
    name: 'glidepath_client_connections',
    help: 'Client connections open now, by listener (data, admin).',
    labelNames: ['listener'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [l, s] of this.connectionSources) this.clientConnections.labels(l).set(s.open());
    },
  });
  readonly clientConnectionsMax = new Gauge({
    name: 'glidepath_client_connections_max',
    help: 'The ceiling on client connections per listener (0: none); past it new connections get 503.',
    labelNames: ['listener'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [l, s] of this.connectionSources) this.clientConnectionsMax.labels(l).set(s.max);
    },
  });
  readonly clientRefused = new Counter({
    name: 'glidepath_client_refused_total',
    help: 'Connections and requests refused by admission, by listener and reason (capacity: 503 at the ceiling; client_connections, client_rate: 429 for one address).',
    labelNames: ['listener', 'reason'] as const,
    registers: [this.registry],
  });
  readonly sendTimeouts = new Counter({
    name: 'glidepath_client_send_timeouts_total',
    help: 'Client connections closed because the client did not take what was written to it within the send timeout (its worker released).',
    registers: [this.registry],
  });

  /** Worker health (src/health): states, breakers, probes, replacements, spares. */
  readonly health = new HealthMetrics(this.registry);
  /** The progressive canary: stage, phase, verdicts. */
  readonly canary = new CanaryMetrics(this.registry);
  /** Adapter canaries: stage, phase, verdicts, by model and adapter. */
  readonly adapterCanary = new AdapterCanaryMetrics(this.registry);
  /** The multi-model scheduler: replicas, targets, shortfalls, decisions. */
  readonly scheduler = new SchedulerMetrics(this.registry);

  /** Report a listener's open connections and ceiling at every scrape. */
  trackConnections(listener: string, open: () => number, max: number): void {
    this.connectionSources.set(listener, { open, max });
  }

  /** Cached children for one (model, version): label lookup once, not per request. */
  forVersion(model: string, version: string): VersionMetrics {
    return new VersionMetrics(this, model, version);
  }
}

/**
 * A gauge per (model, version) whose values are read from sources when scraped. A re-deployed
 * version's new pool replaces the old one's source.
 */
function poolGauge(
  registry: Registry,
  name: string,
  help: string,
): Gauge<'model' | 'version'> & { track(model: string, version: string, size: () => number): void } {
  const sources = new Map<string, { model: string; version: string; size: () => number }>();
  const g: Gauge<'model' | 'version'> = new Gauge({
    name,
    help,
    labelNames: ['model', 'version'] as const,
    registers: [registry],
    collect: () => {
      for (const src of sources.values()) g.labels(src.model, src.version).set(src.size());
    },
  });
  return Object.assign(g, {
    track(model: string, version: string, size: () => number): void {
      sources.set(`${model}\u0000${version}`, { model, version, size });
    },
  });
}

export class VersionMetrics {
  readonly ttft: HistogramChild;
  readonly tpot: HistogramChild;
  readonly duration: HistogramChild;
  readonly queueTime: HistogramChild;
  readonly promptTokens: CounterChild;
  readonly completionTokens: CounterChild;
  readonly versionErrors: CounterChild;
  readonly retries;
  private readonly codes = new Map<number, CounterChild>();
  private readonly parent: GatewayMetrics;
  readonly model: string;
  readonly version: string;

  constructor(m: GatewayMetrics, model: string, version: string) {
    this.parent = m;
    this.model = model;
    this.version = version;
    this.ttft = m.ttft.labels(model, version);
    this.tpot = m.tpot.labels(model, version);
    this.duration = m.duration.labels(model, version);
    this.queueTime = m.queueTime.labels(model, version);
    this.promptTokens = m.tokens.labels(model, version, 'prompt');
    this.completionTokens = m.tokens.labels(model, version, 'completion');
    this.versionErrors = m.versionErrors.labels(model, version);
    this.retries = m.retries.labels(model, version);
  }

  /** An answer sampled for the quality judge was too long to hand over (rare: no child kept). */
  captureDropped(source: 'client' | 'shadow'): void {
    this.parent.capturesDropped.inc({ model: this.model, version: this.version, source });
  }

  /** Report the pool's in-flight count under this (model, version) at every scrape. */
  trackInflight(size: () => number): void {
    this.parent.trackInflight(this.model, this.version, size);
  }

  /** Report the pool's waiting requests under this (model, version) at every scrape. */
  trackQueued(size: () => number): void {
    this.parent.trackQueued(this.model, this.version, size);
  }

  code(status: number): CounterChild {
    let c = this.codes.get(status);
    if (!c) {
      c = this.parent.requests.labels(this.model, this.version, String(status));
      this.codes.set(status, c);
    }
    return c;
  }
}
