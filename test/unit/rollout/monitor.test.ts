// Monitored rollback: the pure decision, and the loop driven by a fake clock over the fake ports,
// rolling back with the real blue-green strategy.
import { describe, expect, it } from 'vitest';
import { BlueGreen } from '../../../src/rollout/bluegreen.js';
import type { RollbackResult } from '../../../src/rollout/bluegreen.js';
import { RollbackMonitor, shouldRollBack } from '../../../src/rollout/monitor.js';
import type { MonitorStats, RollbackFn } from '../../../src/rollout/monitor.js';
import type { ControllerPorts } from '../../../src/rollout/ports.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

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

const OPS = { name: 'ops' };

/** llama: v2 active, v1 the standby (deployed and swapped by the real blue-green strategy). */
async function harness(monitor: Record<string, unknown> = {}, rollback?: RollbackFn, wrap: (p: ControllerPorts) => ControllerPorts = (p) => p) {
  const f = await FakeFleet.create({
    models: [
      {
        name: 'llama',
        versions: [{ id: 'v1' }, { id: 'v2' }],
        route: { weights: { v1: 1 } },
        monitor: { enabled: true, max_error_rate: 0.05, max_p99_latency_ms: 1_000, min_requests: 20, interval_ms: 5_000, ...monitor },
      },
    ],
  });
  const ports = wrap(f.ports());
  const bg = new BlueGreen(ports);
  await bg.deploy('llama', 'v2', OPS);
  f.clock.t += 1;
  await bg.swap('llama', {}, OPS);
  const rollbacks: string[] = [];
  const mon = new RollbackMonitor(
    ports,
    rollback ??
      ((model, actor, reason) => {
        rollbacks.push(`${model} by ${actor.name}: ${reason}`);
        return bg.rollback(model, actor, reason);
      }),
  );
  const setStats = (s: MonitorStats) =>
    f.setStats('llama', 'v2', { requests: s.requests, errorRate: s.errorRate, latencyMs: { p50: 0, p90: 0, mean: 0, p99: s.latencyMs.p99 } });
  const advance = (ms: number) => f.clock.advance(ms, () => mon.whenIdle());
  return { f, ports, bg, mon, rollbacks, setStats, advance };
}

describe('RollbackMonitor loop (fake clock, fake ports)', () => {
  it('checks every interval, rolls back once on a breach and notifies with the numbers', async () => {
    const h = await harness();
    await h.mon.run();
    expect(h.f.clock.pending()).toEqual([5_000]);
    h.setStats(stats(100, 0.01, 200));
    await h.advance(5_000);
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'ok', at: h.f.clock.now(), active: 'v2', standby: 'v1' });
    expect(h.rollbacks).toEqual([]);

    h.setStats(stats(100, 0.08, 200));
    await h.advance(4_999);
    expect(h.rollbacks).toEqual([]);
    await h.advance(1);
    expect(h.rollbacks).toEqual(['llama by monitor: monitored rollback: error rate 0.0800 exceeded threshold 0.05 over 100 requests']);
    expect(h.f.notified).toHaveLength(1);
    expect(h.f.notified[0]?.kind).toBe('monitored_rollback');
    expect(h.f.notified[0]?.message).toBe(
      'Auto-rollback triggered on llama: error rate 0.0800 exceeded threshold 0.05 over 100 requests. Rolled back from v2 to v1 in 0.010 ms.',
    );
    expect(h.f.notified[0]?.data).toMatchObject({
      from: 'v2',
      to: 'v1',
      requests: 100,
      error_rate: 0.08,
      p99_latency_ms: 200,
      thresholds: { max_error_rate: 0.05, max_p99_latency_ms: 1_000, min_requests: 20 },
    });
    expect(h.f.eventKinds('monitored_rollback')).toHaveLength(1);
    expect(h.f.route('llama').stable).toBe('v1');
    expect(h.f.audit.at(-1)).toEqual({ actor: 'monitor', action: 'rollback', target: 'llama', result: 'ok' });

    // v1 is active now and v2 is blocked as a rollback target: idle, said once, never flaps
    await h.advance(20_000);
    expect(h.rollbacks).toHaveLength(1);
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'no_standby', active: 'v1' });
    expect(h.f.eventKinds('monitor_idle')).toHaveLength(1);
    h.mon.shutdown();
    expect(h.f.clock.pending()).toEqual([]);
  });

  it('a model degraded to level 3 or worse doubles the p99 limit (its fleet is slower, not its version); the error rate is judged as ever', async () => {
    const h = await harness();
    h.f.latencyFactors.set('llama', 2);
    h.setStats(stats(100, 0.01, 1_900));
    expect(await h.mon.check('llama')).toMatchObject({
      action: 'ok',
      verdict: { rollBack: false, reason: expect.stringContaining('(max 2000 ms)') as unknown },
    });
    expect(h.mon.lastCheck('llama')?.verdict?.reason).toMatch(/\(the p99 limit is 2× while the model is degraded\)$/);
    h.setStats(stats(100, 0.01, 2_100));
    await h.mon.check('llama');
    expect(h.rollbacks).toEqual([
      'llama by monitor: monitored rollback: p99 latency 2100 ms exceeded threshold 2000 ms over 100 requests (the p99 limit is 2× while the model is degraded)',
    ]);
    expect(h.f.notified[0]?.data).toMatchObject({ thresholds: { max_p99_latency_ms: 2_000 } });
  });

  it('at most once per activation even when a standby is still there', async () => {
    let calls = 0;
    // a rollback that "succeeds" but leaves the same activation in place (e.g. raced by a swap back)
    const h = await harness({}, (model) => {
      calls++;
      const r: RollbackResult = {
        model,
        rolled_back_to: 'v1',
        rolled_back_from: 'v2',
        elapsed_ms: 0.1,
        wake_ms: 0,
        total_ms: 0.1,
        method: 'instant_route_switch',
      };
      return Promise.resolve(r);
    });
    h.setStats(stats(100, 0.5, 200));
    await h.mon.check('llama');
    await h.mon.check('llama');
    expect(calls).toBe(1);
    expect(h.mon.lastCheck('llama')?.action).toBe('already_fired');
    // a new activation of v2 (swapped away and in again) arms it again
    h.f.clock.t += 1;
    await h.bg.swap('llama', { to: 'v1' }, OPS);
    h.f.clock.t += 1;
    await h.bg.swap('llama', { to: 'v2' }, OPS);
    await h.mon.check('llama');
    expect(calls).toBe(2);
  });

  it('stays out of the way while a rollout has the model', async () => {
    const h = await harness();
    h.setStats(stats(100, 0.9, 10));
    const t = h.f.clock.now();
    const exp = {
      kind: 'experiment' as const,
      id: 'exp-1',
      model: 'llama',
      a: 'v1',
      b: 'v2',
      split: 0.5,
      metric: 'latency' as const,
      alpha: 0.05,
      power: 0.8,
      phase: 'running' as const,
      createdAt: t,
      updatedAt: t,
      actor: 'ops',
      previousWeights: { v2: 1 },
      previousStable: 'v2',
    };
    const rev = await h.ports.rollouts.create(exp);
    expect(await h.mon.check('llama')).toMatchObject({ action: 'rollout_in_progress', rollout: 'exp-1' });
    await h.ports.rollouts.save({ ...exp, phase: 'stopped' }, rev);
    expect((await h.mon.check('llama')).action).toBe('rolled_back');
  });

  it('disabled and too few requests do nothing', async () => {
    const h = await harness({ enabled: false });
    h.setStats(stats(1_000, 1, 99_999));
    expect((await h.mon.check('llama')).action).toBe('disabled');
    await h.mon.update('llama', { enabled: true, minRequests: 5_000 });
    expect((await h.mon.check('llama')).action).toBe('ok');
    expect(h.rollbacks).toEqual([]);
  });

  it('runtime override: stored, merged over the config, reset drops it; a new interval applies at once', async () => {
    const h = await harness();
    await h.mon.run();
    expect(h.f.clock.pending()).toEqual([5_000]);
    const s = await h.mon.update('llama', { intervalMs: 1_000, maxErrorRate: 0.2 });
    expect(s).toEqual({ enabled: true, maxErrorRate: 0.2, maxP99LatencyMs: 1_000, minRequests: 20, intervalMs: 1_000 });
    expect(await h.f.store.getSetting('monitor:llama')).toEqual({ intervalMs: 1_000, maxErrorRate: 0.2 });
    expect(h.f.clock.pending()).toEqual([1_000]);
    h.setStats(stats(100, 0.1, 10));
    await h.advance(3_000);
    expect(h.rollbacks).toEqual([]); // 0.1 is under the override's 0.2
    expect((await h.mon.update('llama', 'reset')).maxErrorRate).toBe(0.05);
    expect(await h.f.store.getSetting('monitor:llama')).toBeUndefined();
    await h.mon.update('llama', {});
    expect(await h.f.store.getSetting('monitor:llama')).toBeUndefined(); // an empty change stores no override
    await h.advance(5_000);
    expect(h.rollbacks).toHaveLength(1);
    h.mon.shutdown();
  });

  it('an override stored before the interval was bounded (3e9 ms: a timer would fire every ms) waits a day instead', async () => {
    const h = await harness();
    await h.f.store.setSetting('monitor:llama', { intervalMs: 3_000_000_000 }, 0);
    await h.mon.run();
    expect(h.f.clock.pending()).toEqual([86_400_000]);
    h.mon.shutdown();
  });

  it('a failing rollback is reported once per activation and retried on the next tick', async () => {
    let calls = 0;
    const h = await harness({}, () => {
      calls++;
      return Promise.reject(new Error('standby workers are gone'));
    });
    h.setStats(stats(100, 0.5, 10));
    await h.mon.run();
    await h.advance(15_000);
    expect(calls).toBe(3);
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'rollback_failed', error: 'standby workers are gone' });
    expect(h.f.notified.map((n) => n.kind)).toEqual(['monitored_rollback_failed']);
    expect(h.f.eventKinds('monitor_rollback_failed')).toHaveLength(1);
    h.mon.shutdown();
  });

  it('a check that throws keeps the loop alive', async () => {
    let failing = false;
    let n = 0;
    const h = await harness({}, undefined, (p) => ({
      ...p,
      versions: {
        ...p.versions,
        active: (model) => {
          if (!failing) return p.versions.active(model);
          n++;
          return Promise.reject(new Error('store closed'));
        },
      },
    }));
    await h.mon.run();
    failing = true;
    await h.advance(10_000);
    expect(n).toBe(2);
    expect(h.f.events.filter((e) => e.kind === 'monitor_error').map((e) => e.message)).toEqual([
      'llama: monitor check failed: store closed',
      'llama: monitor check failed: store closed',
    ]);
    expect(h.f.clock.pending()).toEqual([5_000]);
    h.mon.shutdown();
  });
});
