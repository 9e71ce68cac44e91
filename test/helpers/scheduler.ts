// The scheduler's tests share: plan settings and a model's load as a round measures it (plan tests),
// and a scheduler running over a fake fleet on a fake clock, shut down after each test (controller tests).
import { afterEach } from 'vitest';
import { Scheduler } from '../../src/scheduler/controller.js';
import type { ModelLoad, PlanSettings } from '../../src/scheduler/plan.js';
import { FakeFleet } from './fake-ports.js';
import type { FakeFleetOptions } from './fake-ports.js';

export const PLAN_SETTINGS: PlanSettings = { idleAfterMs: 300_000, cooldownMs: 60_000, relaxBelow: 0.5, headroom: 0.8, minSamples: 20 };

/** A model's load, comfortable within a TTFT SLO of 200 ms (a batch model has none), 1 replica, `o` on top. */
export function modelLoad(model: string, priority: ModelLoad['priority'], o: Partial<ModelLoad> = {}): ModelLoad {
  return {
    model,
    priority,
    slo: priority === 'batch' ? {} : { ttftP99Ms: 200 },
    minReplicas: 1,
    maxReplicas: 8,
    gpusPerReplica: 1,
    replicas: 1,
    starting: 0,
    ttftP99Ms: 100,
    tpotP99Ms: 20,
    rps: 1,
    inFlight: 1,
    samples: 100,
    idleMs: 0,
    sinceChangeMs: Infinity,
    ...o,
  };
}

export const SCHEDULER_INTERVAL = 10_000;

/** Schedulers started by `startScheduler`, each shut down after its test (call once per test file). */
export function stopSchedulersAfterEach(): void {
  afterEach(() => {
    for (const s of running.splice(0)) s.shutdown();
  });
}
const running: Scheduler[] = [];

/** A fake fleet (GPUs held by live workers) with a running scheduler (a round every SCHEDULER_INTERVAL on its fake clock). */
export async function startScheduler(opts: Omit<FakeFleetOptions, 'countGpus'>, scheduler: Record<string, unknown> = {}) {
  const fleet = await FakeFleet.create({
    countGpus: true,
    ...opts,
    scheduler: { enabled: true, interval_ms: SCHEDULER_INTERVAL, window_ms: 30_000, ...scheduler },
  });
  const ports = fleet.ports();
  const s = new Scheduler(ports, fleet.cfg.scheduler);
  running.push(s);
  await s.restore();
  s.run();
  const advance = (ms: number) => fleet.clock.advance(ms, () => s.whenIdle());
  return { fleet, ports, s, advance };
}

/** A simulated version's provider, for the scheduler's test fleets. */
export const SIM = { provider: { kind: 'sim' } };

/** A critical model with a TTFT SLO, 1–4 replicas of one simulated version (as written in glidepath.yaml). */
export function critModel(o: object = {}): Record<string, unknown> {
  return {
    name: 'crit',
    priority: 'critical',
    slo: { ttft_p99_ms: 200 },
    min_replicas: 1,
    max_replicas: 4,
    versions: [{ id: 'v1', replicas: 1, ...SIM }],
    route: { weights: { v1: 1 } },
    ...o,
  };
}
