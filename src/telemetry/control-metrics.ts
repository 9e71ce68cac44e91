// The control side's metrics on /metrics (kept through the ports): worker health (states, breakers, probes, failures, replacements,
// spares, each version's healthy share) and the progressive canary — what deploy/prometheus/alerts.yaml and the dashboard read.
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import { DEFAULTS } from '../defaults.js';
import { BREAKER_VALUE, STATE_VALUE } from '../health/machine.js';
import type { BreakerState, WorkerHealthState } from '../health/machine.js';

interface WorkerLabels {
  model: string;
  version: string;
  id: string;
  role: string;
}

export class HealthMetrics {
  private readonly state: Gauge<'model' | 'version' | 'worker' | 'role'>;
  private readonly breaker: Gauge<'model' | 'version' | 'worker'>;
  private readonly probeSeconds: Histogram<'model' | 'version' | 'check'>;
  private readonly probeFailures: Counter<'model' | 'version' | 'reason'>;
  private readonly probes: Counter<'model' | 'version' | 'check' | 'outcome'>;
  private readonly passiveFailures: Counter<'model' | 'version' | 'reason'>;
  private readonly replacements: Counter<'model' | 'version' | 'reason'>;
  private readonly sparesReady: Gauge<'model' | 'version'>;
  private readonly sparesWanted: Gauge<'model' | 'version'>;
  private readonly healthy: Gauge<'model' | 'version'>;
  private readonly serving: Gauge<'model' | 'version'>;
  private readonly level: Gauge<'model'>;
  /** Models whose level the gateway sets (admissionLevel): the health module's estimate is not reported for them. */
  private readonly admitted = new Set<string>();
  /** worker id → the role label it was last reported under (a spare promoted changes it). */
  private readonly roles = new Map<string, string>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.state = new Gauge({
      name: 'glidepath_worker_health_state',
      help: 'Health state per worker: 0 healthy, 1 suspicious, 2 unhealthy, 3 draining, 4 dead, -1 pending (not admitted yet).',
      labelNames: ['model', 'version', 'worker', 'role'] as const,
      registers,
    });
    this.breaker = new Gauge({
      name: 'glidepath_worker_breaker_state',
      help: 'Circuit breaker per worker: 0 closed, 1 open, 2 half-open.',
      labelNames: ['model', 'version', 'worker'] as const,
      registers,
    });
    this.probeSeconds = new Histogram({
      name: 'glidepath_health_probe_duration_seconds',
      help: 'Health probe round trips, by check (routine, half_open, admission, record).',
      labelNames: ['model', 'version', 'check'] as const,
      buckets: [...DEFAULTS.telemetry.latencyBucketsS],
      registers,
    });
    this.probes = new Counter({
      name: 'glidepath_health_probes_total',
      help: 'Health probes done (retries included in one), by check and outcome: pass, fail, inconclusive (the worker was saturated: nothing known).',
      labelNames: ['model', 'version', 'check', 'outcome'] as const,
      registers,
    });
    this.probeFailures = new Counter({
      name: 'glidepath_health_probe_failures_total',
      help: 'Failed health probes (after retries) by reason: token_mismatch, logprob_drift (silent corruption), latency_spike, timeout, error.',
      labelNames: ['model', 'version', 'reason'] as const,
      registers,
    });
    this.passiveFailures = new Counter({
      name: 'glidepath_health_passive_failures_total',
      help: 'Real requests that counted against a worker, by reason: error (5xx), reset, stall, timeout, ttft_outlier, exited.',
      labelNames: ['model', 'version', 'reason'] as const,
      registers,
    });
    this.replacements = new Counter({
      name: 'glidepath_worker_replacements_total',
      help: 'Dead workers replaced, by how: spare (a hot spare took its place) or started (a new worker).',
      labelNames: ['model', 'version', 'reason'] as const,
      registers,
    });
    this.sparesReady = new Gauge({
      name: 'glidepath_spares_ready',
      help: 'Hot spares loaded, probed and ready to take a failed worker’s place, per version.',
      labelNames: ['model', 'version'] as const,
      registers,
    });
    this.sparesWanted = new Gauge({
      name: 'glidepath_spares_wanted',
      help: 'Hot spares configured per version.',
      labelNames: ['model', 'version'] as const,
      registers,
    });
    this.healthy = new Gauge({
      name: 'glidepath_version_healthy_workers',
      help: 'Serving workers of a version that take traffic (healthy or suspicious).',
      labelNames: ['model', 'version'] as const,
      registers,
    });
    this.serving = new Gauge({
      name: 'glidepath_version_serving_workers',
      help: 'Serving workers of a version (spares not counted), whatever their health.',
      labelNames: ['model', 'version'] as const,
      registers,
    });
    this.level = new Gauge({
      name: 'glidepath_degradation_level',
      help: 'Degradation level per model, 0 (full capacity) to 4 (no new requests): for a model with `degradation` configured the level the gateway acts on (healthy capacity against required throughput; 2 sheds the lowest tier), for others an estimate from the share of its routed versions’ workers that take traffic.',
      labelNames: ['model'] as const,
      registers,
    });
  }

  worker(w: WorkerLabels, state: WorkerHealthState, breaker: BreakerState): void {
    const prev = this.roles.get(w.id);
    if (prev !== undefined && prev !== w.role) this.state.remove(w.model, w.version, w.id, prev);
    this.roles.set(w.id, w.role);
    this.state.labels(w.model, w.version, w.id, w.role).set(STATE_VALUE[state]);
    this.breaker.labels(w.model, w.version, w.id).set(BREAKER_VALUE[breaker]);
  }

  forget(w: WorkerLabels): void {
    const role = this.roles.get(w.id) ?? w.role;
    this.roles.delete(w.id);
    this.state.remove(w.model, w.version, w.id, role);
    this.breaker.remove(w.model, w.version, w.id);
  }

  probe(model: string, version: string, check: string, seconds: number): void {
    this.probeSeconds.labels(model, version, check).observe(seconds);
  }

  probeDone(model: string, version: string, check: string, outcome: string): void {
    this.probes.labels(model, version, check, outcome).inc();
  }

  probeFailure(model: string, version: string, reason: string): void {
    this.probeFailures.labels(model, version, reason).inc();
  }

  passiveFailure(model: string, version: string, reason: string): void {
    this.passiveFailures.labels(model, version, reason).inc();
  }

  replacement(model: string, version: string, reason: string): void {
    this.replacements.labels(model, version, reason).inc();
  }

  spares(model: string, version: string, ready: number, wanted: number): void {
    this.sparesReady.labels(model, version).set(ready);
    this.sparesWanted.labels(model, version).set(wanted);
  }

  version(model: string, version: string, healthy: number, serving: number): void {
    this.healthy.labels(model, version).set(healthy);
    this.serving.labels(model, version).set(serving);
  }

  /** The health module's estimate (share of serving workers up): reported for models whose level the gateway does not set itself. */
  degradation(model: string, level: number): void {
    if (!this.admitted.has(model)) this.level.labels(model).set(level);
  }

  /** The level the gateway acts on for a model with `degradation` configured (src/gateway/admission.ts); it replaces the estimate. */
  admissionLevel(model: string, level: number): void {
    this.admitted.add(model);
    this.level.labels(model).set(level);
  }
}

/**
 * A staged rollout on /metrics — what runs, at which stage since when, and its decisive verdicts —
 * for one subject: a model (the version canary) or a model's adapter (`scope: adapter`).
 */
class StagedMetrics {
  private readonly running: Gauge<string>;
  private readonly percent: Gauge<string>;
  private readonly stageStarted: Gauge<string>;
  private readonly verdicts: Counter<string>;
  /** subject → the (canary, phase) labels last set, removed when they change. */
  private readonly last = new Map<string, [string, string]>();

  constructor(
    registry: Registry,
    prefix: string,
    scope: readonly string[],
    help: { running: string; percent: string; stageStarted: string; verdicts: string },
  ) {
    const registers = [registry];
    const subject = ['model', ...scope];
    this.running = new Gauge({ name: `${prefix}_running`, help: help.running, labelNames: [...subject, 'canary', 'phase'], registers });
    this.percent = new Gauge({ name: `${prefix}_percent`, help: help.percent, labelNames: subject, registers });
    this.stageStarted = new Gauge({ name: `${prefix}_stage_started_timestamp_seconds`, help: help.stageStarted, labelNames: subject, registers });
    this.verdicts = new Counter({ name: `${prefix}_verdicts_total`, help: help.verdicts, labelNames: [...subject, 'outcome', 'action'], registers });
  }

  /** The state after a step; `done` when it ended (every series back to none). */
  state(subject: readonly string[], canary: string, phase: string, percent: number, stageStartedAt: number, done: boolean): void {
    const key = subject.join('\u0000');
    const prev = this.last.get(key);
    if (prev) this.running.remove(...subject, prev[0], prev[1]);
    if (done) {
      this.last.delete(key);
      this.percent.labels(...subject).set(0);
      this.stageStarted.labels(...subject).set(0);
      return;
    }
    this.last.set(key, [canary, phase]);
    this.running.labels(...subject, canary, phase).set(1);
    this.percent.labels(...subject).set(percent);
    this.stageStarted.labels(...subject).set(stageStartedAt / 1000);
  }

  verdict(subject: readonly string[], outcome: string, action: string): void {
    this.verdicts.labels(...subject, outcome, action).inc();
  }
}

/** The progressive canary on /metrics: what runs, at which stage since when, and its decisive verdicts (the stuck-canary alert, the dashboard). */
export class CanaryMetrics {
  private readonly m: StagedMetrics;
  constructor(registry: Registry) {
    this.m = new StagedMetrics(registry, 'glidepath_canary', [], {
      running: 'A canary of this model is under way (1), by candidate version and phase (progressing, paused, promoting, rolling_back).',
      percent: "The running canary's share of traffic, percent (0 when none runs).",
      stageStarted: "When the running canary's current stage began (Unix seconds; 0 when none runs): time() minus it is how long it has held.",
      verdicts: 'Decisive canary verdicts by outcome (pass, fail, inconclusive, nodata) and action (advance, rollback, pause).',
    });
  }

  state(model: string, canary: string, phase: string, percent: number, stageStartedAt: number, done: boolean): void {
    this.m.state([model], canary, phase, percent, stageStartedAt, done);
  }

  verdict(model: string, outcome: string, action: string): void {
    this.m.verdict([model], outcome, action);
  }
}

/** An adapter's canary on /metrics, by model and adapter (`glidepath_adapter_canary_*`, the same series as a version canary's). */
export class AdapterCanaryMetrics {
  private readonly m: StagedMetrics;
  constructor(registry: Registry) {
    this.m = new StagedMetrics(registry, 'glidepath_adapter_canary', ['adapter'], {
      running: 'A canary of this adapter is under way (1), by candidate version and phase (progressing, paused, promoting, rolling_back).',
      percent: "The running adapter canary's share of the adapter's requests, percent (0 when none runs).",
      stageStarted: "When the running adapter canary's current stage began (Unix seconds; 0 when none runs): time() minus it is how long it has held.",
      verdicts: 'Decisive adapter canary verdicts by outcome (pass, fail, inconclusive, nodata) and action (advance, rollback, pause).',
    });
  }

  state(model: string, adapter: string, candidate: string, phase: string, percent: number, stageStartedAt: number, done: boolean): void {
    this.m.state([model, adapter], candidate, phase, percent, stageStartedAt, done);
  }

  verdict(model: string, adapter: string, outcome: string, action: string): void {
    this.m.verdict([model, adapter], outcome, action);
  }
}
