// Regressions found by an adversarial review of the scheduler's measurements: the growth of
// requests in flight over a few ms read as a surge, GPUs kept for a replacement that never comes, a
// model short after a worker died preempting another while its own GPU waits.
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/scheduler/controller.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const INTERVAL = 10_000;
const sim = { provider: { kind: 'sim' } };
let running: Scheduler[] = [];
afterEach(() => {
  for (const s of running) s.shutdown();
  running = [];
});

async function start(models: Record<string, unknown>[], gpus = 4) {
  const fleet = await FakeFleet.create({ gpus, countGpus: true, scheduler: { enabled: true, interval_ms: INTERVAL, window_ms: 30_000 }, models });
  const ports = fleet.ports();
  const s = new Scheduler(ports, fleet.cfg.scheduler);
  running.push(s);
  await s.restore();
  s.run();
  const advance = (ms: number) => fleet.clock.advance(ms, () => s.whenIdle());
  return { fleet, ports, s, advance };
}
const crit = (o: object = {}) => ({
  name: 'crit',
  priority: 'critical',
  slo: { ttft_p99_ms: 200 },
  min_replicas: 1,
  max_replicas: 4,
  versions: [{ id: 'v1', replicas: 1, ...sim }],
  route: { weights: { v1: 1 } },
  ...o,
});
const bat = (n: number) => ({
  name: 'bat',
  priority: 'batch',
  min_replicas: 0,
  max_replicas: 3,
  versions: [{ id: 'v1', replicas: n, ...sim }],
  route: { weights: { v1: 1 } },
});

describe('scheduler controller, regressions of an adversarial review', () => {
  it('a plan asked for shortly before a round does not turn one more request in flight into a huge arrival rate', async () => {
    const { fleet, s, ports, advance } = await start([crit(), bat(1)]);
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 30, () => ({ ttftMs: 150, completionTokens: 50 }));
    await advance(INTERVAL); // round 1: in flight 0
    fleet.inflight.set('crit', 4);
    await advance(INTERVAL - 100);
    await s.preview(); // a viewer looks at the plan 100 ms before the round
    fleet.inflight.set('crit', 5); // one more request in flight
    fleet.records('crit', 'v1', 30, () => ({ ttftMs: 250, completionTokens: 50 }));
    await advance(100);
    const up = fleet.events.find((e) => e.kind === 'scheduler_scale_up');
    // without the preview: 5 more in 10 s = 0.5 req/s growth; with it: 1 in 0.1 s = 10 req/s
    expect(up?.message).not.toMatch(/\(1\d\.\d req\/s/);
    expect(ports.workers.target('crit', 'v1')).toBeLessThan(4);
  });

  it('health enabled with replace: false: a dead worker is never replaced, so no GPU is kept for it', async () => {
    const { fleet, s, advance } = await start([crit({ health: { enabled: true, replace: false }, versions: [{ id: 'v1', replicas: 2, ...sim }] }), bat(1)]);
    fleet.crash(fleet.live('crit', 'v1')[0]!.id);
    for (let i = 0; i < 5; i++) {
      fleet.records('bat', 'v1', 20);
      await advance(INTERVAL);
    }
    const r = await s.preview();
    expect(r.reservedGpus).toBe(0);
  });

  it('a model short of its min because a worker died waits for its replacement on the GPU kept for it: nothing is preempted', async () => {
    const { fleet, s } = await start([crit({ health: { enabled: true }, min_replicas: 2, versions: [{ id: 'v1', replicas: 2, ...sim }] }), bat(1)], 3);
    fleet.records('bat', 'v1', 20);
    fleet.crash(fleet.live('crit', 'v1')[0]!.id);
    const r = await s.preview();
    expect([r.freeGpus, r.reservedGpus]).toEqual([0, 1]);
    expect(r.plan.decisions.map((d) => `${d.action} ${d.model} ${d.from}→${d.to}`)).toEqual([]);
  });
});
