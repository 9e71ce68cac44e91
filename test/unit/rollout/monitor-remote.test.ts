// The rollback monitor reading a remote metric source (Prometheus's place behind the telemetry
// port), over the fake ports and a fake clock: it judges the source's window of every replica (not
// this process's window), its p99 from the buckets; a source that does not answer is never judged.
import { describe, expect, it } from 'vitest';
import { NO_READING } from '../../../src/analysis/binned.js';
import { BlueGreen } from '../../../src/rollout/bluegreen.js';
import { RollbackMonitor } from '../../../src/rollout/monitor.js';
import { FakeFleet } from '../../helpers/fake-ports.js';
import { ScriptedRemote } from '../../helpers/scripted-remote.js';

const OPS = { name: 'ops' };
const WINDOW = 120_000;

const latency = (counts: number[]) => ({ bounds: [0.25, 0.5, 1, 2.5, Infinity], counts });

async function harness() {
  const f = await FakeFleet.create({
    models: [
      {
        name: 'llama',
        versions: [{ id: 'v1' }, { id: 'v2' }],
        route: { weights: { v1: 1 } },
        monitor: { enabled: true, max_error_rate: 0.05, max_p99_latency_ms: 1_000, min_requests: 20, interval_ms: 5_000 },
      },
    ],
  });
  const remote = new ScriptedRemote(WINDOW);
  f.remote = remote;
  const ports = f.ports();
  const bg = new BlueGreen(ports);
  await bg.deploy('llama', 'v2', OPS);
  f.clock.t += 1;
  await bg.swap('llama', {}, OPS);
  const mon = new RollbackMonitor(ports, (model, actor, reason) => bg.rollback(model, actor, reason));
  // this process's own window: quiet and healthy, whatever the fleet does
  f.setStats('llama', 'v2', { requests: 500, errorRate: 0, latencyMs: { p50: 0, p90: 0, mean: 0, p99: 100 } });
  return { f, remote, mon };
}

describe('RollbackMonitor on a remote metric source', () => {
  it("judges the source's window: p99 from the buckets, errors over requests", async () => {
    const h = await harness();
    // 100 requests, 99 of them under 0.5 s: the p99 is 0.5 s
    h.remote.byVersion.set('llama/v2', { ...NO_READING, requests: 100, errors: 1, latency: latency([50, 49, 1, 0, 0]) });
    const at = h.f.clock.now();
    expect(await h.mon.check('llama')).toMatchObject({ action: 'ok', stats: { requests: 100, errorRate: 0.01, latencyMs: { p99: 500 } } });
    expect(h.remote.reads.at(-1)).toEqual({ model: 'llama', versions: ['v2'], from: at - WINDOW, to: at });
    // the fleet's p99 moves into (1, 2.5] s: interpolated 1.75 s, over the 1 s limit
    h.remote.byVersion.set('llama/v2', { ...NO_READING, requests: 100, errors: 1, latency: latency([50, 48, 0, 2, 0]) });
    const r = await h.mon.check('llama');
    expect(r.action).toBe('rolled_back');
    expect(r.verdict?.reason).toBe('p99 latency 1750 ms exceeded threshold 1000 ms over 100 requests');
    expect(h.f.route('llama').stable).toBe('v1');
  });

  it('does not judge (nor roll back) while the source does not answer, and says so once each way', async () => {
    const h = await harness();
    h.remote.down = 'Prometheus at http://prom:9090 is unreachable: no answer within 5000 ms';
    await h.mon.run();
    await h.f.clock.advance(15_000, () => h.mon.whenIdle());
    expect(h.mon.lastCheck('llama')).toMatchObject({ action: 'metrics_unavailable', active: 'v2', error: h.remote.down });
    expect(h.f.eventKinds('monitor_metrics')).toEqual(['monitor_metrics_unavailable']);
    h.remote.down = undefined;
    h.remote.byVersion.set('llama/v2', { ...NO_READING, requests: 100, errors: 30, latency: latency([100, 0, 0, 0, 0]) });
    await h.f.clock.advance(5_000, () => h.mon.whenIdle());
    expect(h.f.eventKinds('monitor_metrics')).toEqual(['monitor_metrics_unavailable', 'monitor_metrics_available']);
    expect(h.mon.lastCheck('llama')?.action).toBe('rolled_back');
    h.mon.shutdown();
  });
});
