// Monitored rollback: a watcher that looks at each model's active version every interval (seed 000:
// 5 s) and rolls back to the standby on its own when the error rate or p99 latency crosses the
// thresholds, then notifies the webhooks with the numbers. At most once per activation; idle when
// there is nothing to roll back to. Settings come from the config and can be changed at runtime
// (persisted in the store) through GET/PUT /admin/v1/models/:model/monitor.
import { z } from 'zod';
import type { RouteDef } from '../api/router.js';
import type { MonitorConfig } from '../config/types.js';
import type { Feature } from '../control/app.js';
import type { WebhookResult } from './webhooks.js';
import { notify } from './webhooks.js';
import type { NotifyEvent } from './webhooks.js';
import type { ControlPlane } from '../control/plane.js';
import { DEFAULTS } from '../defaults.js';
import { toGlidepathError } from '../errors.js';
import type { WindowStats } from '../telemetry/window.js';
import { rollback } from './bluegreen.js';
import type { RollbackResult } from './bluegreen.js';

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
  return b.metric === 'error_rate' ? `error rate ${b.value.toFixed(4)} exceeded threshold ${b.threshold}` : `p99 latency ${Math.round(b.value)} ms exceeded threshold ${b.threshold} ms`;
}

export type CheckAction = 'disabled' | 'no_active' | 'rollout_in_progress' | 'no_standby' | 'already_fired' | 'ok' | 'rolled_back' | 'rollback_failed';

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

/** setTimeout-like seam so tests drive the loop with a fake clock. */
export interface MonitorTimer {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimer: MonitorTimer = {
  set(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref(); // a watcher never keeps the process alive
    return t;
  },
  clear(h) {
    clearTimeout(h as ReturnType<typeof setTimeout>);
  },
};

export interface MonitorDeps {
  timer?: MonitorTimer;
  now?: () => number;
  rollback?: typeof rollback;
  notify?: (cp: ControlPlane, e: NotifyEvent) => Promise<WebhookResult[]>;
}

interface ModelState {
  handle?: unknown;
  /** `${version}@${activatedAt}` the monitor already rolled back once. */
  firedFor?: string | undefined;
  noStandbyFor?: string | undefined;
  failedFor?: string | undefined;
  last?: CheckResult | undefined;
}

/** What PUT accepts and stores: any subset; stored overrides win over the config. */
export type MonitorOverride = Partial<MonitorSettings>;

const settingKey = (model: string): string => `monitor:${model}`;

export class RollbackMonitor {
  private readonly timer: MonitorTimer;
  private readonly now: () => number;
  private readonly rollbackFn: typeof rollback;
  private readonly notifyFn: NonNullable<MonitorDeps['notify']>;
  private readonly state = new Map<string, ModelState>();
  private readonly inflight = new Set<Promise<unknown>>();
  private running = false;

  constructor(
    private readonly cp: ControlPlane,
    deps: MonitorDeps = {},
  ) {
    this.timer = deps.timer ?? realTimer;
    this.now = deps.now ?? Date.now;
    this.rollbackFn = deps.rollback ?? rollback;
    this.notifyFn = deps.notify ?? ((c, e) => notify(c.cfg.notifications.webhooks, e, { events: c.events, audit: c.store }));
  }

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
      this.cp.modelConfig(model).monitor ?? {
        enabled: C.monitorEnabled,
        maxErrorRate: C.monitorMaxErrorRate,
        maxP99LatencyMs: C.monitorMaxP99LatencyMs,
        minRequests: C.monitorMinRequests,
        intervalMs: C.monitorIntervalMs,
      }
    );
  }

  override(model: string): MonitorOverride | undefined {
    return this.cp.store.getSetting<MonitorOverride>(settingKey(model));
  }

  /** Effective settings: the config, then the runtime override (which survives restarts). */
  settings(model: string): MonitorSettings {
    return { ...this.configured(model), ...(this.override(model) ?? {}) };
  }

  /** Change (or with `reset`, drop) the runtime override; the loop picks the new interval at once. */
  update(model: string, patch: MonitorOverride | 'reset'): MonitorSettings {
    this.cp.modelConfig(model);
    const merged = patch === 'reset' ? {} : { ...(this.override(model) ?? {}), ...patch };
    if (Object.keys(merged).length === 0) this.cp.store.deleteSetting(settingKey(model));
    else this.cp.store.setSetting(settingKey(model), merged, this.now());
    const s = this.settings(model);
    this.cp.events.emit({ kind: 'monitor_settings', model, message: `${model}: monitored rollback ${s.enabled ? 'enabled' : 'disabled'} (error rate > ${s.maxErrorRate}, p99 > ${s.maxP99LatencyMs} ms, ≥ ${s.minRequests} requests, every ${s.intervalMs} ms)`, data: s });
    if (this.running) this.schedule(model);
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
    const st = this.st(model);
    const at = this.now();
    const done = (r: Omit<CheckResult, 'model' | 'at'>): CheckResult => {
      st.last = { model, at, ...r };
      return st.last;
    };
    const s = this.settings(model);
    if (!s.enabled) return done({ action: 'disabled' });
    const active = this.cp.registry.active(model);
    if (!active) return done({ action: 'no_active' });
    const activation = `${active.id}@${active.activatedAt ?? 0}`;
    if (st.firedFor === activation) return done({ action: 'already_fired', active: active.id });
    // a rollout (canary, rolling…) owns the model's traffic and its own rollback until it ends
    const rollout = this.cp.store.listActiveRollouts().find((r) => r.model === model);
    if (rollout) return done({ action: 'rollout_in_progress', active: active.id, rollout: rollout.id });
    const target = this.cp.registry.standby(model);
    if (!target) {
      if (st.noStandbyFor !== activation) {
        st.noStandbyFor = activation;
        this.cp.events.emit({ kind: 'monitor_idle', model, version: active.id, message: `${model}: monitored rollback is idle: ${active.id} is active and there is no rollback-eligible standby` });
      }
      return done({ action: 'no_standby', active: active.id });
    }
    st.noStandbyFor = undefined;
    const w = this.cp.dp.telemetry.stats(model, active.id, at);
    const stats: MonitorStats = { requests: w.requests, errorRate: w.errorRate, latencyMs: { p99: w.latencyMs.p99 } };
    const verdict = shouldRollBack(stats, s);
    if (!verdict.rollBack) return done({ action: 'ok', active: active.id, standby: target.id, stats, verdict });

    let res: RollbackResult;
    try {
      res = await this.rollbackFn(this.cp, model, { name: 'monitor' }, `monitored rollback: ${verdict.reason}`);
    } catch (err) {
      const e = toGlidepathError(err);
      const message = (err as Error).message || e.message;
      if (st.failedFor !== activation) {
        st.failedFor = activation;
        this.cp.events.emit({ kind: 'monitor_rollback_failed', model, version: active.id, message: `${model}: monitored rollback of ${active.id} failed (${e.code}): ${message}`, data: { verdict, stats } });
        await this.notifyFn(this.cp, { kind: 'monitored_rollback_failed', model, version: active.id, message: `Auto-rollback of ${model}/${active.id} triggered (${verdict.reason}) but failed: ${message}`, data: { stats, verdict, error: { code: e.code, message } } });
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
    this.cp.events.emit({ kind: 'monitored_rollback', model, version: res.rolled_back_to, message, data: { from: active.id, stats, verdict, rollback: res } });
    const notifications = await this.notifyFn(this.cp, {
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
        thresholds: { max_error_rate: s.maxErrorRate, max_p99_latency_ms: s.maxP99LatencyMs, min_requests: s.minRequests },
        breaches: verdict.breaches,
        elapsed_ms: res.elapsed_ms,
        wake_ms: res.wake_ms,
      },
    });
    return done({ action: 'rolled_back', active: active.id, standby: target.id, stats, verdict, rollback: res, notifications });
  }

  /** Start watching every model of the config, each on its own interval. */
  start(): void {
    if (this.running) return;
    this.running = true;
    for (const m of this.cp.cfg.models) this.schedule(m.name);
  }

  stop(): void {
    this.running = false;
    for (const s of this.state.values()) {
      if (s.handle !== undefined) this.timer.clear(s.handle);
      s.handle = undefined;
    }
  }

  /** Resolves when no check is running (tests: advance the fake clock, then await this). */
  async whenIdle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private schedule(model: string): void {
    const st = this.st(model);
    if (st.handle !== undefined) this.timer.clear(st.handle);
    st.handle = undefined;
    if (!this.running) return;
    st.handle = this.timer.set(() => {
      st.handle = undefined;
      const p = this.check(model)
        .catch((err: unknown) => {
          // a monitor that throws must keep watching; say so once per occurrence
          this.cp.events.emit({ kind: 'monitor_error', model, message: `${model}: monitor check failed: ${(err as Error).message}` });
        })
        .finally(() => {
          this.inflight.delete(p);
          if (this.running && st.handle === undefined) this.schedule(model);
        });
      this.inflight.add(p);
    }, this.settings(model).intervalMs);
  }
}

// ---- wiring: one monitor per control plane, admin endpoints, background loop ----------------------

const monitors = new WeakMap<ControlPlane, RollbackMonitor>();
const started = new Set<RollbackMonitor>();

export function monitorFor(cp: ControlPlane): RollbackMonitor {
  let m = monitors.get(cp);
  if (!m) {
    m = new RollbackMonitor(cp);
    monitors.set(cp, m);
  }
  return m;
}

const putBody = z
  .object({
    enabled: z.boolean().optional(),
    max_error_rate: z.number().min(0).max(1).optional(),
    max_p99_latency_ms: z.number().positive().refine(Number.isFinite, 'expected a finite number').optional(),
    min_requests: z.number().int().min(0).optional(),
    interval_ms: z.number().int().min(DEFAULTS.control.monitorMinIntervalMs).optional(),
    /** Drop the runtime override: back to the config's settings. */
    reset: z.boolean().optional(),
  })
  .strict();

function settingsView(s: MonitorSettings): Record<string, unknown> {
  return { enabled: s.enabled, max_error_rate: s.maxErrorRate, max_p99_latency_ms: s.maxP99LatencyMs, min_requests: s.minRequests, interval_ms: s.intervalMs };
}

export function monitorView(cp: ControlPlane, model: string): Record<string, unknown> {
  const mon = monitorFor(cp);
  const ov = mon.override(model);
  return {
    model,
    settings: settingsView(mon.settings(model)),
    config: settingsView(mon.configured(model)),
    override: ov ? settingsView({ ...mon.configured(model), ...ov }) : null,
    active: cp.registry.active(model)?.id ?? null,
    standby: cp.registry.standby(model)?.id ?? null,
    fired_for: mon.firedFor(model) ?? null,
    last_check: mon.lastCheck(model) ?? null,
  };
}

export function monitorRoutes(cp: ControlPlane): RouteDef[] {
  const model = (p: Record<string, string>): string => {
    const m = p.model as string;
    cp.modelConfig(m);
    return m;
  };
  return [
    {
      method: 'GET',
      path: '/models/:model/monitor',
      role: 'viewer',
      summary: 'monitored rollback: effective settings (config + runtime override), armed state, last check',
      handler: (c) => monitorView(cp, model(c.params)),
    },
    {
      method: 'PUT',
      path: '/models/:model/monitor',
      role: 'operator',
      summary: 'change monitored rollback settings at runtime (enabled, max_error_rate, max_p99_latency_ms, min_requests, interval_ms; reset: true drops the override)',
      handler: async (c) => {
        const m = model(c.params);
        const b = await c.body(putBody);
        return cp.audited({ name: c.principal.name }, 'monitor_set', m, b, () => {
          const patch: MonitorOverride = {};
          if (b.enabled !== undefined) patch.enabled = b.enabled;
          if (b.max_error_rate !== undefined) patch.maxErrorRate = b.max_error_rate;
          if (b.max_p99_latency_ms !== undefined) patch.maxP99LatencyMs = b.max_p99_latency_ms;
          if (b.min_requests !== undefined) patch.minRequests = b.min_requests;
          if (b.interval_ms !== undefined) patch.intervalMs = b.interval_ms;
          if (b.reset === true) monitorFor(cp).update(m, 'reset');
          if (Object.keys(patch).length > 0 || b.reset !== true) monitorFor(cp).update(m, patch);
          return Promise.resolve(monitorView(cp, m));
        });
      },
    },
  ];
}

/** Registered from src/control/app.ts: the endpoints above and the loop's lifetime. */
export const monitorFeature: Feature = {
  name: 'monitor',
  routes: monitorRoutes,
  start(cp) {
    const m = monitorFor(cp);
    m.start();
    started.add(m);
  },
  stop() {
    for (const m of started) m.stop();
    started.clear();
  },
};
