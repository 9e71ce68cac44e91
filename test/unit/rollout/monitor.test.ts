// Monitored rollback: the pure decision, and the loop driven by a fake clock against a fake control plane.
import { describe, expect, it } from 'vitest';
import type { MonitorConfig } from '../../../src/config/types.js';
import { EventBus } from '../../../src/control/events.js';
import type { ControlEvent } from '../../../src/control/events.js';
import type { ControlPlane } from '../../../src/control/plane.js';
import type { RollbackResult } from '../../../src/rollout/bluegreen.js';
import { RollbackMonitor, shouldRollBack } from '../../../src/rollout/monitor.js';
import type { MonitorStats, MonitorTimer } from '../../../src/rollout/monitor.js';

const T = { maxErrorRate: 0.05, maxP99LatencyMs: 1_000, minRequests: 20 };
const stats = (requests: number, errorRate: number, p99: number): MonitorStats => ({ requests, errorRate, latencyMs: { p99 } });

describe('shouldRollBack', () => {
  it('does not judge below the minimum number of requests', () => {
    const v = shouldRollBack(stats(19, 1, 99_999), T);
    expect(v).toEqual({ rollBack: false, reason: '19 request(s) in the window, fewer than 20: not judged', breaches: [] });
  });
  it('error rate strictly above the threshold rolls back; at the threshold it does not', () => {
    expect(shouldRollBack(stats(100, 0.05, 10), T).rollBack).toBe(false);
    const v = shouldRollBack(stats(100, 0.08, 10), T);
    expect(v.rollBack).toBe(true);
    expect(v.breaches).toEqual([{ metric: 'error_rate', value: 0.08, threshold: 0.05 }]);
    expect(v.reason).toBe('error rate 0.0800 exceeded threshold 0.05 over 100 requests');
  });
  it('p99 latency above the threshold rolls back; both breaches are named', () => {
    expect(shouldRollBack(stats(20, 0, 1_000), T).rollBack).toBe(false);
    const v = shouldRollBack(stats(20, 0.5, 1_500), T);
    expect(v.breaches.map((b) => b.metric)).toEqual(['error_rate', 'p99_latency_ms']);
    expect(v.reason).toBe('error rate 0.5000 exceeded threshold 0.05 and p99 latency 1500 ms exceeded threshold 1000 ms over 20 requests');
  });
  it('NaN p99 (no latency samples) never breaches; min 0 judges an empty window as healthy', () => {
    expect(shouldRollBack(stats(50, 0, Number.NaN), T)).toMatchObject({ rollBack: false, reason: expect.stringContaining('p99 latency n/a') as unknown });
    expect(shouldRollBack(stats(0, 0, Number.NaN), { ...T, minRequests: 0 }).rollBack).toBe(false);
  });
});

/** A setTimeout stand-in: callbacks run only when the test advances the clock. */
class FakeTimer implements MonitorTimer {
  now = 0;
  private seq = 0;
  private tasks = new Map<number, { at: number; fn: () => void }>();
  set(fn: () => void, ms: number): number {
    const id = ++this.seq;
    this.tasks.set(id, { at: this.now + ms, fn });
    return id;
  }
  clear(h: unknown): void {
    this.tasks.delete(h as number);
  }
  pending(): number[] {
    return [...this.tasks.values()].map((t) => t.at).sort((a, b) => a - b);
  }
  /** Run every task due by now + ms, in time order, awaiting the monitor between tasks. */
  async advance(ms: number, mon: RollbackMonitor): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      const next = [...this.tasks.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!next) break;
      this.tasks.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
      await mon.whenIdle();
    }
    this.now = end;
  }
}

interface FakeVersion {
  id: string;
  activatedAt: number;
}

/** Just the parts of the control plane the monitor touches. */
function fakeCp(monitor: Partial<MonitorConfig> = {}) {
  const settings = new Map<string, unknown>();
  const rollouts: Array<{ id: string; model: string }> = [];
  const events = new EventBus();
  const state = {
    active: { id: 'v2', activatedAt: 1 } as FakeVersion | undefined,
    standby: { id: 'v1', activatedAt: 0 } as FakeVersion | undefined,
    stats: stats(0, 0, Number.NaN),
  };
  const cfgMonitor: MonitorConfig = { enabled: true, maxErrorRate: 0.05, maxP99LatencyMs: 1_000, minRequests: 20, intervalMs: 5_000, ...monitor };
  const cp = {
    cfg: { models: [{ name: 'llama', monitor: cfgMonitor }], notifications: { webhooks: [] } },
    events,
    modelConfig: (name: string) => {
      if (name !== 'llama') throw new Error(`no model ${name}`);
      return { name, monitor: cfgMonitor };
    },
    store: {
      listActiveRollouts: () => rollouts,
      getSetting: (k: string) => settings.get(k),
      setSetting: (k: string, v: unknown) => void settings.set(k, v),
      deleteSetting: (k: string) => settings.delete(k),
    },
    registry: { active: () => state.active, standby: () => state.standby },
    dp: { telemetry: { stats: () => ({ ...state.stats, latencyMs: { p50: 0, p90: 0, mean: 0, p99: state.stats.latencyMs.p99 } }) } },
  };
  // the monitor only uses the members above; the cast keeps the test free of a real store and fleet
  return { cp: cp as unknown as ControlPlane, state, events, settings, rollouts };
}

function harness(monitor: Partial<MonitorConfig> = {}) {
  const f = fakeCp(monitor);
  const timer = new FakeTimer();
  const rollbacks: string[] = [];
  const notified: Array<{ kind: string; message: string; data: unknown }> = [];
  const seen: ControlEvent[] = [];
  f.events.subscribe((e) => seen.push(e));
  const mon = new RollbackMonitor(f.cp, {
    timer,
    now: () => timer.now,
    rollback: (_cp, model, actor, reason) => {
      rollbacks.push(`${model} by ${actor.name}: ${reason ?? ''}`);
      const from = f.state.active;
      const to = f.state.standby;
      if (!to) return Promise.reject(new Error('no standby'));
      // what the registry does: the target becomes active (a new activation); the bad one is blocked
      f.state.active = { id: to.id, activatedAt: timer.now };
      f.state.standby = undefined;
      const res: RollbackResult = { model, rolled_back_to: to.id, rolled_back_from: from?.id, elapsed_ms: 0.25, wake_ms: 0, total_ms: 1, method: 'instant_route_switch' };
      return Promise.resolve(res);
    },
    notify: (_cp, e) => {
      notified.push({ kind: e.kind, message: e.message, data: e.data });
      return Promise.resolve([]);
    },
  });
  return { ...f, timer, mon, rollbacks, notified, seen };
}

describe('RollbackMonitor loop (fake clock)', () => {
  it('checks every interval, rolls back once on a breach and notifies with the numbers', async () => {
    const h = harness();
    h.mon.start();
    expect(h.timer.pending()).toEqual([5_000]);
    h.state.stats = stats(100, 0.01, 200);
    await h.timer.advance(5_000, h.mon);
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'ok', at: 5_000, active: 'v2', standby: 'v1' });
    expect(h.rollbacks).toEqual([]);

    h.state.stats = stats(100, 0.08, 200);
    await h.timer.advance(4_999, h.mon);
    expect(h.rollbacks).toEqual([]);
    await h.timer.advance(1, h.mon);
    expect(h.rollbacks).toEqual(['llama by monitor: monitored rollback: error rate 0.0800 exceeded threshold 0.05 over 100 requests']);
    expect(h.notified).toHaveLength(1);
    expect(h.notified[0]?.kind).toBe('monitored_rollback');
    expect(h.notified[0]?.message).toBe('Auto-rollback triggered on llama: error rate 0.0800 exceeded threshold 0.05 over 100 requests. Rolled back from v2 to v1 in 0.250 ms.');
    expect(h.notified[0]?.data).toMatchObject({ from: 'v2', to: 'v1', requests: 100, error_rate: 0.08, p99_latency_ms: 200, thresholds: { max_error_rate: 0.05, max_p99_latency_ms: 1_000, min_requests: 20 } });
    expect(h.seen.filter((e) => e.kind === 'monitored_rollback')).toHaveLength(1);

    // v1 is active now with the same bad window and no standby: idle, said once, never flaps
    await h.timer.advance(20_000, h.mon);
    expect(h.rollbacks).toHaveLength(1);
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'no_standby', active: 'v1' });
    expect(h.seen.filter((e) => e.kind === 'monitor_idle')).toHaveLength(1);
    h.mon.stop();
    expect(h.timer.pending()).toEqual([]);
  });

  it('at most once per activation even when a standby is still there', async () => {
    const h = harness();
    h.state.stats = stats(100, 0.5, 200);
    // a rollback that "succeeds" but leaves the same activation in place (e.g. raced by a swap back)
    const mon = new RollbackMonitor(h.cp, {
      timer: h.timer,
      now: () => h.timer.now,
      rollback: (_cp, model) => {
        h.rollbacks.push(model);
        return Promise.resolve({ model, rolled_back_to: 'v1', rolled_back_from: 'v2', elapsed_ms: 0.1, wake_ms: 0, total_ms: 0.1, method: 'instant_route_switch' });
      },
      notify: () => Promise.resolve([]),
    });
    await mon.check('llama');
    await mon.check('llama');
    expect(h.rollbacks).toEqual(['llama']);
    expect(mon.lastCheck('llama')?.action).toBe('already_fired');
    // a new activation of v2 (swapped in again) arms it again
    h.state.active = { id: 'v2', activatedAt: 99 };
    await mon.check('llama');
    expect(h.rollbacks).toEqual(['llama', 'llama']);
  });

  it('stays out of the way while a rollout has the model', async () => {
    const h = harness();
    h.state.stats = stats(100, 0.9, 10);
    h.rollouts.push({ id: 'r-1', model: 'llama' });
    expect(await h.mon.check('llama')).toMatchObject({ action: 'rollout_in_progress', rollout: 'r-1' });
    h.rollouts.splice(0);
    expect((await h.mon.check('llama')).action).toBe('rolled_back');
  });

  it('disabled, too few requests, and no active version do nothing', async () => {
    const h = harness({ enabled: false });
    h.state.stats = stats(1_000, 1, 99_999);
    expect((await h.mon.check('llama')).action).toBe('disabled');
    h.mon.update('llama', { enabled: true, minRequests: 5_000 });
    expect((await h.mon.check('llama')).action).toBe('ok');
    h.state.active = undefined;
    expect((await h.mon.check('llama')).action).toBe('no_active');
    expect(h.rollbacks).toEqual([]);
  });

  it('runtime override: stored, merged over the config, reset drops it; a new interval applies at once', async () => {
    const h = harness();
    h.mon.start();
    expect(h.timer.pending()).toEqual([5_000]);
    const s = h.mon.update('llama', { intervalMs: 1_000, maxErrorRate: 0.2 });
    expect(s).toEqual({ enabled: true, maxErrorRate: 0.2, maxP99LatencyMs: 1_000, minRequests: 20, intervalMs: 1_000 });
    expect(h.settings.get('monitor:llama')).toEqual({ intervalMs: 1_000, maxErrorRate: 0.2 });
    expect(h.timer.pending()).toEqual([1_000]);
    h.state.stats = stats(100, 0.1, 10);
    await h.timer.advance(3_000, h.mon);
    expect(h.rollbacks).toEqual([]); // 0.1 is under the override's 0.2
    expect(h.mon.update('llama', 'reset').maxErrorRate).toBe(0.05);
    expect(h.settings.has('monitor:llama')).toBe(false);
    h.mon.update('llama', {});
    expect(h.settings.has('monitor:llama')).toBe(false); // an empty change stores no override
    await h.timer.advance(5_000, h.mon);
    expect(h.rollbacks).toHaveLength(1);
    h.mon.stop();
  });

  it('a failing rollback is reported once per activation and retried on the next tick', async () => {
    const h = harness();
    h.state.stats = stats(100, 0.5, 10);
    let calls = 0;
    const mon = new RollbackMonitor(h.cp, {
      timer: h.timer,
      now: () => h.timer.now,
      rollback: () => {
        calls++;
        return Promise.reject(new Error('standby workers are gone'));
      },
      notify: (_cp, e) => {
        h.notified.push({ kind: e.kind, message: e.message, data: e.data });
        return Promise.resolve([]);
      },
    });
    mon.start();
    await h.timer.advance(15_000, mon);
    expect(calls).toBe(3);
    expect(mon.lastCheck('llama')).toMatchObject({ action: 'rollback_failed', error: 'standby workers are gone' });
    expect(h.notified.map((n) => n.kind)).toEqual(['monitored_rollback_failed']);
    expect(h.seen.filter((e) => e.kind === 'monitor_rollback_failed')).toHaveLength(1);
    mon.stop();
  });

  it('a check that throws keeps the loop alive', async () => {
    const h = harness();
    h.mon.start();
    let n = 0;
    (h.cp.registry as unknown as { active: () => unknown }).active = () => {
      n++;
      throw new Error('store closed');
    };
    await h.timer.advance(10_000, h.mon);
    expect(n).toBe(2);
    expect(h.seen.filter((e) => e.kind === 'monitor_error').map((e) => e.message)).toEqual(['llama: monitor check failed: store closed', 'llama: monitor check failed: store closed']);
    expect(h.timer.pending()).toEqual([15_000]);
    h.mon.stop();
  });
});
