// Monitored rollback: a watcher that looks at each model's active version every interval (seed 000:
// 5 s) — in this process's window, or over every replica in Prometheus (`metrics_source`) — and
// rolls back to the standby on its own when the error rate or p99 latency crosses the thresholds,
// then notifies the webhooks with the numbers. At most once per activation; idle when
// there is nothing to roll back to. Settings come from the config and can be changed at runtime
// (persisted through the settings port; the admin API's PUT /models/:model/monitor calls `update`).
// Sees only the ports.
import type { MonitorConfig } from '../config/types.js';
import { NO_READING, binnedQuantile } from '../analysis/binned.js';
import { DEFAULTS } from '../defaults.js';
import { toGlidepathError } from '../errors.js';
import type { WindowStats } from '../telemetry/window.js';
import type { RollbackResult } from './bluegreen.js';
import type { Actor, ControllerPorts } from './ports.js';
import type { WebhookResult } from './webhooks.js';

export type MonitorSettings = MonitorConfig;
export type MonitorThresholds = Pick<MonitorConfig, 'maxErrorRate' | 'maxP99LatencyMs' | 'minRequests'>;
export type MonitorStats = Pick<WindowStats, 'requests' | 'errorRate'> & { latencyMs: Pick<WindowStats['latencyMs'], 'p99'> };

export interface Breach {
  metric: 'error_rate' | 'p99_latency_ms';
  value: number;
  threshold: number;
}

export interface Verdict {
  rollBack: boolean;
  /** One line for humans: what was compared and what it showed. */
  reason: string;
  breaches: Breach[];
}

/**
 * The monitor's decision, pure. Not judged below `minRequests` requests in the window. A breach is
 * strictly above its threshold (a rate exactly at the limit is allowed); a NaN p99 (no latency
 * samples) never breaches.
 */
export function shouldRollBack(stats: MonitorStats, t: MonitorThresholds): Verdict {
  if (stats.requests < t.minRequests) {
    return { rollBack: false, reason: `${stats.requests} request(s) in the window, fewer than ${t.minRequests}: not judged`, breaches: [] };
  }
  const breaches: Breach[] = [];
  if (stats.errorRate > t.maxErrorRate) breaches.push({ metric: 'error_rate', value: stats.errorRate, threshold: t.maxErrorRate });
  const p99 = stats.latencyMs.p99;
  if (p99 > t.maxP99LatencyMs) breaches.push({ metric: 'p99_latency_ms', value: p99, threshold: t.maxP99LatencyMs });
  const seen = `error rate ${stats.errorRate.toFixed(4)} (max ${t.maxErrorRate}), p99 latency ${Number.isNaN(p99) ? 'n/a' : `${Math.round(p99)} ms`} (max ${t.maxP99LatencyMs} ms) over ${stats.requests} requests`;
  if (breaches.length === 0) return { rollBack: false, reason: `within thresholds: ${seen}`, breaches };
  return { rollBack: true, reason: `${breaches.map(describeBreach).join(' and ')} over ${stats.requests} requests`, breaches };
}

function describeBreach(b: Breach): string {
  return b.metric === 'error_rate'
    ? `error rate ${b.value.toFixed(4)} exceeded threshold ${b.threshold}`
    : `p99 latency ${Math.round(b.value)} ms exceeded threshold ${b.threshold} ms`;
}

export type CheckAction =
  | 'disabled'
  | 'no_active'
  | 'rollout_in_progress'
  | 'no_standby'
  | 'already_fired'
  /** The metric source (Prometheus) did not answer: nothing judged, nothing rolled back. */
  | 'metrics_unavailable'
  | 'ok'
  | 'rolled_back'
  | 'rollback_failed';

export interface CheckResult {
  model: string;
  at: number;
  action: CheckAction;
  active?: string | undefined;
  standby?: string | undefined;
  stats?: MonitorStats | undefined;
  verdict?: Verdict | undefined;
  rollback?: RollbackResult | undefined;
  /** The rollout that has the model while one is in progress. */
  rollout?: string | undefined;
  notifications?: WebhookResult[] | undefined;
  error?: string | undefined;
}

/** How the monitor rolls back: the blue-green instant rollback (the composition root wires it). */
export type RollbackFn = (model: string, actor: Actor, reason: string) => Promise<RollbackResult>;

interface ModelState {
  cancel?: (() => void) | undefined;
  /** `${version}@${activatedAt}` the monitor already rolled back once. */
  firedFor?: string | undefined;
  noStandbyFor?: string | undefined;
  failedFor?: string | undefined;
  /** The metric source's failure while it lasts (said once when it starts, once when it ends). */
  sourceDown?: string | undefined;
  last?: CheckResult | undefined;
}

/** What PUT accepts and stores: any subset; stored overrides win over the config. */
/** A runtime change: any of the settings (built field by field, so not readonly like the config). */
export type MonitorOverride = { -readonly [K in keyof MonitorSettings]?: MonitorSettings[K] };

const settingKey = (model: string): string => `monitor:${model}`;

export class RollbackMonitor {
  private readonly state = new Map<string, ModelState>();
  private readonly inflight = new Set<Promise<unknown>>();
  private running = false;

  constructor(
    private readonly ports: ControllerPorts,
    private readonly rollback: RollbackFn,
  ) {}

  private st(model: string): ModelState {
    let s = this.state.get(model);
    if (!s) {
      s = {};
      this.state.set(model, s);
    }
    return s;
  }

  /** The config's settings for a model (defaults when the config predates the monitor keys). */
  configured(model: string): MonitorSettings {
    const C = DEFAULTS.control;
    return (
      this.ports.models.config(model).monitor ?? {
        enabled: C.monitorEnabled,
        maxErrorRate: C.monitorMaxErrorRate,
        maxP99LatencyMs: C.monitorMaxP99LatencyMs,
        minRequests: C.monitorMinRequests,
        intervalMs: C.monitorIntervalMs,
      }
    );
  }

  override(model: string): Promise<MonitorOverride | undefined> {
    return this.ports.settings.get<MonitorOverride>(settingKey(model));
  }

  /** Effective settings: the config, then the runtime override (which survives restarts). */
  async settings(model: string): Promise<MonitorSettings> {
    return { ...this.configured(model), ...((await this.override(model)) ?? {}) };
  }

  /** Change (or with `reset`, drop) the runtime override; the loop picks the new interval at once. */
  async update(model: string, patch: MonitorOverride | 'reset'): Promise<MonitorSettings> {
    this.ports.models.config(model);
    const merged = patch === 'reset' ? {} : { ...((await this.override(model)) ?? {}), ...patch };
    if (Object.keys(merged).length === 0) await this.ports.settings.delete(settingKey(model));
    else await this.ports.settings.set(settingKey(model), merged);
    const s = await this.settings(model);
    this.ports.emit({
      kind: 'monitor_settings',
      model,
      message: `${model}: monitored rollback ${s.enabled ? 'enabled' : 'disabled'} (error rate > ${s.maxErrorRate}, p99 > ${s.maxP99LatencyMs} ms, ≥ ${s.minRequests} requests, every ${s.intervalMs} ms)`,
      data: s,
    });
    if (this.running) this.schedule(model, s.intervalMs);
    return s;
  }

  lastCheck(model: string): CheckResult | undefined {
    return this.state.get(model)?.last;
  }

  /** Whether the monitor already acted on the model's current activation. */
  firedFor(model: string): string | undefined {
    return this.state.get(model)?.firedFor;
  }

  /** One look at one model; the loop calls it every interval, tests call it directly. */
  async check(model: string): Promise<CheckResult> {
    const p = this.ports;
    const st = this.st(model);
    const at = p.clock.now();
    const done = (r: Omit<CheckResult, 'model' | 'at'>): CheckResult => {
      st.last = { model, at, ...r };
      return st.last;
    };
    const s = await this.settings(model);
    if (!s.enabled) return done({ action: 'disabled' });
    const active = await p.versions.active(model);
    if (!active) return done({ action: 'no_active' });
    const activation = `${active.id}@${active.activatedAt ?? 0}`;
    if (st.firedFor === activation) return done({ action: 'already_fired', active: active.id });
    // a rollout (canary, rolling…) owns the model's traffic and its own rollback until it ends
    const rollout = await p.rollouts.inProgress(model);
    if (rollout) return done({ action: 'rollout_in_progress', active: active.id, rollout: rollout.id });
    const target = await p.versions.standby(model);
    if (!target) {
      if (st.noStandbyFor !== activation) {
        st.noStandbyFor = activation;
        p.emit({
          kind: 'monitor_idle',
          model,
          version: active.id,
          message: `${model}: monitored rollback is idle: ${active.id} is active and there is no rollback-eligible standby`,
        });
      }
      return done({ action: 'no_standby', active: active.id });
    }
    st.noStandbyFor = undefined;
    let stats: MonitorStats;
    try {
      stats = await this.read(model, active.id, at);
    } catch (err) {
      const message = (err as Error).message;
      if (st.sourceDown === undefined) {
        p.emit({
          kind: 'monitor_metrics_unavailable',
          model,
          version: active.id,
          message: `${model}: monitored rollback cannot judge ${active.id} while its metric source does not answer: ${message}`,
        });
      }
      st.sourceDown = message;
      return done({ action: 'metrics_unavailable', active: active.id, standby: target.id, error: message });
    }
    if (st.sourceDown !== undefined) {
      st.sourceDown = undefined;
      p.emit({ kind: 'monitor_metrics_available', model, version: active.id, message: `${model}: the monitor's metric source answers again` });
    }
    // a model degraded to level 3 or worse is slower by its lost capacity, not by its version
    const factor = p.routes.latencyFactor(model);
    const limits = factor === 1 ? s : { ...s, maxP99LatencyMs: s.maxP99LatencyMs * factor };
    const verdict = shouldRollBack(stats, limits);
    if (factor !== 1) verdict.reason += ` (the p99 limit is ${factor}× while the model is degraded)`;
    if (!verdict.rollBack) return done({ action: 'ok', active: active.id, standby: target.id, stats, verdict });

    let res: RollbackResult;
    try {
      res = await this.rollback(model, { name: 'monitor' }, `monitored rollback: ${verdict.reason}`);
    } catch (err) {
      const e = toGlidepathError(err);
      const message = (err as Error).message || e.message;
      if (st.failedFor !== activation) {
        st.failedFor = activation;
        p.emit({
          kind: 'monitor_rollback_failed',
          model,
          version: active.id,
          message: `${model}: monitored rollback of ${active.id} failed (${e.code}): ${message}`,
          data: { verdict, stats },
        });
        await p.notify({
          kind: 'monitored_rollback_failed',
          model,
          version: active.id,
          message: `Auto-rollback of ${model}/${active.id} triggered (${verdict.reason}) but failed: ${message}`,
          data: { stats, verdict, error: { code: e.code, message } },
        });
      }
      return done({ action: 'rollback_failed', active: active.id, standby: target.id, stats, verdict, error: message });
    }
    st.firedFor = activation;
    st.failedFor = undefined;
    const message =
      `Auto-rollback triggered on ${model}: ${verdict.reason}. ` +
      `Rolled back from ${active.id} to ${res.rolled_back_to} in ${res.elapsed_ms.toFixed(3)} ms` +
      (res.wake_ms > 0 ? ` after waking it (${Math.round(res.wake_ms)} ms)` : '') +
      '.';
    p.emit({ kind: 'monitored_rollback', model, version: res.rolled_back_to, message, data: { from: active.id, stats, verdict, rollback: res } });
    const notifications = await p.notify({
      kind: 'monitored_rollback',
      model,
      version: res.rolled_back_to,
      message,
      data: {
        from: active.id,
        to: res.rolled_back_to,
        requests: stats.requests,
        error_rate: stats.errorRate,
        p99_latency_ms: Number.isNaN(stats.latencyMs.p99) ? null : stats.latencyMs.p99,
        thresholds: { max_error_rate: s.maxErrorRate, max_p99_latency_ms: limits.maxP99LatencyMs, min_requests: s.minRequests },
        breaches: verdict.breaches,
        elapsed_ms: res.elapsed_ms,
        wake_ms: res.wake_ms,
      },
    });
    return done({ action: 'rolled_back', active: active.id, standby: target.id, stats, verdict, rollback: res, notifications });
  }

  /**
   * The active version's numbers: this process's window, or with a remote source (Prometheus) every
   * replica's traffic over its monitor window, the p99 interpolated in the histogram's buckets.
   */
  private async read(model: string, version: string, at: number): Promise<MonitorStats> {
    const remote = this.ports.telemetry.remote;
    if (remote === undefined) {
      const w = this.ports.telemetry.stats(model, version, at);
      return { requests: w.requests, errorRate: w.errorRate, latencyMs: { p99: w.latencyMs.p99 } };
    }
    const r = (await remote.read(model, [version], at - remote.monitorWindowMs, at)).get(version) ?? NO_READING;
    return { requests: r.requests, errorRate: r.requests > 0 ? r.errors / r.requests : NaN, latencyMs: { p99: binnedQuantile(r.latency, 0.99) * 1000 } };
  }

  /** Start watching every configured model, each on its own interval. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    for (const m of this.ports.models.names()) this.schedule(m, (await this.settings(m)).intervalMs);
  }

  shutdown(): void {
    this.running = false;
    for (const s of this.state.values()) {
      s.cancel?.();
      s.cancel = undefined;
    }
  }

  /** Resolves when no check is running (tests: advance the fake clock, then await this). */
  async whenIdle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private schedule(model: string, intervalMs: number): void {
    const st = this.st(model);
    st.cancel?.();
    st.cancel = undefined;
    if (!this.running) return;
    // within the bound the API and config enforce, whatever an override stored before it says (past
    // 2^31 - 1 ms a timer fires after 1 ms: a look every ms)
    const every = Math.min(intervalMs, DEFAULTS.durations.maxIntervalMs);
    st.cancel = this.ports.clock.after(every, () => {
      st.cancel = undefined;
      const p = this.check(model)
        .catch((err: unknown) => {
          // a monitor that throws must keep watching; say so once per occurrence
          this.ports.emit({ kind: 'monitor_error', model, message: `${model}: monitor check failed: ${(err as Error).message}` });
        })
        .then(async () => {
          // the interval of the settings in force now (an update may have changed it meanwhile)
          if (this.running && st.cancel === undefined) this.schedule(model, (await this.settings(model)).intervalMs);
        })
        .catch(() => {
          if (this.running && st.cancel === undefined) this.schedule(model, intervalMs);
        })
        .finally(() => this.inflight.delete(p));
      this.inflight.add(p);
    });
  }
}
