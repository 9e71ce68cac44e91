// The scheduler reading its models' load from a remote metric source (Prometheus's place behind the
// telemetry port) over the fake ports and a fake clock: the route's versions' histograms and counts
// over its window, what each serving worker generated from its engine's series by scrape target; a
// surge seen only there scales the model up; a source that does not answer fails the round (nothing
// changes, an event says why).
import { describe, expect, it } from 'vitest';
import { NO_READING, binnedQuantile } from '../../../src/analysis/binned.js';
import { Scheduler } from '../../../src/scheduler/controller.js';
import { instanceOf } from '../../../src/scheduler/remote-load.js';
import type { VersionReading } from '../../../src/telemetry/prometheus-source.js';
import { FakeFleet } from '../../helpers/fake-ports.js';
import { critModel, SCHEDULER_INTERVAL, SIM, stopSchedulersAfterEach } from '../../helpers/scheduler.js';
import { ScriptedRemote } from '../../helpers/scripted-remote.js';

const WINDOW = 30_000;
const sim = SIM;
stopSchedulersAfterEach();

async function setup() {
  const fleet = await FakeFleet.create({
    countGpus: true,
    gpus: 4,
    models: [
      critModel(),
      { name: 'bat', priority: 'batch', min_replicas: 0, max_replicas: 3, versions: [{ id: 'v1', replicas: 1, ...sim }], route: { weights: { v1: 1 } } },
    ],
    scheduler: { enabled: true, interval_ms: SCHEDULER_INTERVAL, window_ms: WINDOW },
  });
  const remote = new ScriptedRemote();
  fleet.remote = remote;
  const s = new Scheduler(fleet.ports(), fleet.cfg.scheduler);
  await s.restore();
  s.run();
  const advance = (ms: number) => fleet.clock.advance(ms, () => s.whenIdle());
  return { fleet, remote, s, advance };
}

/** n requests in the window, their TTFT spread over the buckets by `share`; TPOT 10-20 ms; 50 tokens each. */
function load(n: number, share: readonly number[]): VersionReading {
  const bounds = [0.05, 0.1, 0.25, 0.5, 1, Infinity];
  return {
    ...NO_READING,
    requests: n,
    ttft: { bounds, counts: share.map((x) => Math.round(x * n)) },
    tpot: { bounds: [0.01, 0.02, Infinity], counts: [0, n, 0] },
    busyS: n * 0.5,
    outputTokens: n * 50,
  };
}

describe('scheduler on a remote metric source', () => {
  it("measures the source's window, not this process's records: p99s from the buckets, rates over the window, a worker's tokens from its engine", async () => {
    const { fleet, remote, s, advance } = await setup();
    // the worker has served a whole window (one started since is measured from its start)
    await advance(WINDOW);
    // this process saw a few quick requests; the fleet (every replica) saw 300, slower
    fleet.records('crit', 'v1', 5, () => ({ ttftMs: 10 }));
    const crit = load(300, [0.5, 0.3, 0.18, 0.02, 0, 0]);
    remote.byVersion.set('crit/v1', crit);
    const worker = fleet.live('crit', 'v1')[0]?.info();
    if (worker === undefined) throw new Error('no crit worker');
    remote.tokens.set(instanceOf(worker), 9_000);
    const r = await s.preview();
    const m = r.models.find((x) => x.model === 'crit');
    expect(m).toMatchObject({ samples: 300, rps: 10, inFlight: 5, tokensPerS: 500 });
    expect(m?.ttftP99Ms).toBeCloseTo(binnedQuantile(crit.ttft, 0.99) * 1000, 9);
    expect(m?.ttftP99Ms).toBeGreaterThan(250);
    expect(m?.capacity).toMatchObject({ workerTokensPerS: 300, tokensPerRequest: 50 });
    const now = fleet.clock.now();
    expect(remote.reads.filter((x) => x.model === 'crit').at(-1)).toEqual({ model: 'crit', versions: ['v1'], from: now - WINDOW, to: now });
    expect(remote.tokenReads.filter((x) => x.instances.includes(instanceOf(worker))).at(-1)).toEqual({
      instances: [instanceOf(worker)],
      from: now - WINDOW,
      to: now,
    });
  });

  it('a surge only the source sees scales the critical model up; a source that does not answer changes nothing', async () => {
    const { fleet, remote, advance } = await setup();
    remote.byVersion.set('bat/v1', load(50, [1, 0, 0, 0, 0, 0]));
    remote.down = 'Prometheus at http://prom:9090 is unreachable: connect ECONNREFUSED';
    remote.byVersion.set('crit/v1', load(300, [0, 0, 0.2, 0.5, 0.3, 0]));
    await advance(SCHEDULER_INTERVAL);
    expect(fleet.log.filter((l) => /^start crit/.test(l))).toEqual([]);
    expect(fleet.events.find((e) => e.kind === 'scheduler_error')?.message).toContain('Prometheus at http://prom:9090 is unreachable');
    remote.down = undefined;
    await advance(SCHEDULER_INTERVAL);
    expect(fleet.log.filter((l) => /^start crit/.test(l)).length).toBeGreaterThan(0);
    expect(fleet.eventKinds('scheduler_scale_up')).toHaveLength(1);
  });
});
