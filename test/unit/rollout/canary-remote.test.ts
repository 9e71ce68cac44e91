// The version canary judged from a remote metric source (Prometheus's place, behind the telemetry
// port): the real controller and judge over the fake ports and a fake clock, the source scripted by
// the test. It judges the source's counts (every replica's), not this process's records; a source
// that does not answer makes every look "no data" (wait, never a pass), said once each way.
import { describe, expect, it } from 'vitest';
import { CanaryController } from '../../../src/rollout/canary-controller.js';
import type { VersionReading } from '../../../src/telemetry/prometheus-source.js';
import type { FakeFleet } from '../../helpers/fake-ports.js';
import { CANARY_MODEL, CANARY_STAGE_MS, canaryFleet } from '../../helpers/canary-fleet.js';
import { ScriptedRemote } from '../../helpers/scripted-remote.js';

const M = CANARY_MODEL;
const STAGE_MS = CANARY_STAGE_MS;
const TICK_MS = 1_000;
const BOUNDS = [0.05, 0.1, 0.25, 0.5, Infinity];

/** n requests (`errors` of them failed) whose TTFT and latency fill the buckets by `share`, their TPOT 5-10 ms. */
function reading(n: number, share: readonly number[], errors = 0): VersionReading {
  const h = { bounds: BOUNDS, counts: share.map((x) => Math.round(x * n)) };
  const tpot = { bounds: [0.005, 0.01, Infinity], counts: [Math.round(n / 2), n - Math.round(n / 2), 0] };
  return { requests: n + errors, errors, ttft: h, tpot, latency: h, busyS: n * 0.2, outputTokens: n * 30, replicas: 3 };
}
const EVEN = [0.2, 0.5, 0.3, 0, 0];

async function setup(): Promise<{ f: FakeFleet; c: CanaryController; remote: ScriptedRemote }> {
  const f = await canaryFleet();
  const remote = new ScriptedRemote();
  f.remote = remote;
  const c = new CanaryController(f.ports(), { tickMs: TICK_MS });
  c.run();
  await c.start(M, { version: 'v2' }, { name: 'ops' });
  await c.whenIdle();
  return { f, c, remote };
}

describe('a canary judged from a remote metric source', () => {
  it("rolls back on the source's errors though this process's own records look equal, reading from the canary's start", async () => {
    const { f, c, remote } = await setup();
    const startedAt = f.clock.now();
    // this replica's records: both versions alike
    for (const v of ['v1', 'v2']) f.records(M, v, 200, (i) => ({ latencyMs: 100 + (i % 10), ttftMs: 20 + (i % 5), tpotMs: 5 + (i % 3) }));
    // the fleet's, from the source: the canary fails one request in five
    remote.byVersion.set('llama/v1', reading(2_000, EVEN));
    remote.byVersion.set('llama/v2', reading(200, EVEN, 50));
    await f.clock.advance(TICK_MS, () => c.whenIdle());
    const s = await c.get(M);
    expect(s.phase).toBe('rolled_back');
    expect(s.rollback?.reason).toMatch(/errors/);
    expect(remote.reads[0]).toEqual({ model: M, versions: ['v1', 'v2'], from: startedAt, to: startedAt + TICK_MS });
    expect(f.weights(M)).toEqual({ v1: 1 });
  });

  it("advances on the source's equal data though this process saw no request", async () => {
    const { f, c, remote } = await setup();
    remote.byVersion.set('llama/v1', reading(2_000, EVEN));
    remote.byVersion.set('llama/v2', reading(300, EVEN));
    await f.clock.advance(TICK_MS, () => c.whenIdle());
    // the operator's view counts what the judge read, not this process's (no) records
    expect(c.sampleCounts(M)).toEqual({ stable: 2_000, canary: 300, min_samples: 20 });
    await f.clock.advance(STAGE_MS, () => c.whenIdle());
    const s = await c.get(M);
    expect(s.phase).toBe('progressing');
    expect(s.stageIndex).toBe(1);
  });

  it('waits (no data, never a pass) while the source does not answer, says so once, and judges again when it does', async () => {
    const { f, c, remote } = await setup();
    remote.byVersion.set('llama/v1', reading(2_000, EVEN));
    remote.byVersion.set('llama/v2', reading(300, EVEN));
    remote.down = 'Prometheus at http://prom:9090 is unreachable: connect ECONNREFUSED';
    // well past the stage's duration: a canary that passed would have advanced
    await f.clock.advance(STAGE_MS + 5 * TICK_MS, () => c.whenIdle());
    let s = await c.get(M);
    expect(s.phase).toBe('progressing');
    expect(s.stageIndex).toBe(0);
    expect(s.last?.outcome).toBe('nodata');
    expect(s.last?.reasons[0]).toContain('the metric source did not answer (Prometheus at http://prom:9090 is unreachable');
    expect(f.eventKinds('canary_metrics')).toEqual(['canary_metrics_unavailable']);
    remote.down = undefined;
    await f.clock.advance(TICK_MS, () => c.whenIdle());
    s = await c.get(M);
    expect(f.eventKinds('canary_metrics')).toEqual(['canary_metrics_unavailable', 'canary_metrics_available']);
    expect(s.stageIndex).toBe(1);
  });
});
