// The scheduler controller over the fake ports: a surge on the critical model preempts the batch model
// (drained, then stopped) and starts replicas on the freed GPUs; recovery's count follows; every decision
// is explained, audited and emitted; a dry run changes nothing; a restart keeps the counts; models
// under a rollout are left alone.
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/scheduler/controller.js';
import { critModel, SCHEDULER_INTERVAL, SIM, startScheduler, stopSchedulersAfterEach } from '../../helpers/scheduler.js';

const INTERVAL = SCHEDULER_INTERVAL;
const sim = SIM;

stopSchedulersAfterEach();

function start(o: { dryRun?: boolean; critReplicas?: number; signal?: Record<string, number> } = {}) {
  return startScheduler(
    {
      gpus: 4,
      models: [
        {
          name: 'crit',
          priority: 'critical',
          slo: { ttft_p99_ms: 200 },
          ...(o.signal === undefined ? {} : { scale_signal: o.signal }),
          min_replicas: 1,
          max_replicas: 4,
          versions: [{ id: 'v1', replicas: o.critReplicas ?? 1, ...sim }],
          route: { weights: { v1: 1 } },
        },
        { name: 'bat', priority: 'batch', min_replicas: 0, max_replicas: 3, versions: [{ id: 'v1', replicas: 3, ...sim }], route: { weights: { v1: 1 } } },
      ],
    },
    { dry_run: o.dryRun ?? false },
  );
}

describe('scheduler controller', () => {
  it('a surge on the critical model: the batch model is drained and stopped, the critical one grows on its GPUs', async () => {
    const { fleet, ports, advance } = await start();
    // batch traffic keeps it from idling; the critical model's TTFT p99 at 3× its SLO
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await advance(INTERVAL);
    // 1 × 3 / 0.8 → 4 replicas, capped at max 4: three batch replicas go (none is free)
    expect(fleet.log.filter((l) => /^weight bat/.test(l))).toEqual(['weight bat/v1/2=0', 'weight bat/v1/1=0', 'weight bat/v1/0=0']);
    expect(fleet.log.filter((l) => /^(drain|stop|start)/.test(l))).toEqual([
      'drain bat/v1/2 wait (removed)',
      'drain bat/v1/1 wait (removed)',
      'drain bat/v1/0 wait (removed)',
      'stop bat/v1/2',
      'stop bat/v1/1',
      'stop bat/v1/0',
      'start crit/v1/1 serving',
      'start crit/v1/2 serving',
      'start crit/v1/3 serving',
    ]);
    expect([ports.workers.target('crit', 'v1'), ports.workers.target('bat', 'v1')]).toEqual([4, 0]);
    expect(fleet.eventKinds('scheduler_')).toEqual(['scheduler_preempt', 'scheduler_preempt', 'scheduler_preempt', 'scheduler_scale_up']);
    const up = fleet.events.find((e) => e.kind === 'scheduler_scale_up');
    expect(up?.message).toBe(
      'scale up crit: 1 → 4 replica(s) — TTFT p99 600 ms > SLO 200 ms: ×3.00 on 1 replica(s), sized for 80 % → 4; expected: 3 GPU(s) taken; 3.3 → 0.8 req/s a replica; done',
    );
    expect(fleet.audit.filter((a) => a.action === 'scheduler.scale').map((a) => `${a.target} ${a.result}`)).toEqual(['bat/v1 ok', 'crit/v1 ok']);
    expect(await ports.settings.get('scheduler.targets')).toEqual({ crit: { version: 'v1', replicas: 4 }, bat: { version: 'v1', replicas: 0 } });
    const metrics = await fleet.metricsText();
    expect(metrics).toContain('glidepath_scheduler_replicas{model="crit",kind="target"} 4');
    expect(metrics).toContain('glidepath_scheduler_decisions_total{model="bat",action="preempt",outcome="done"} 3');
    // the next round waits for the starting replicas: nothing more is asked of a model with replicas still starting
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await advance(INTERVAL);
    expect(fleet.eventKinds('scheduler_')).toHaveLength(4);
  });

  it('a queue that grows is demand: the critical model is sized from what its replica was measured to serve', async () => {
    const { fleet, ports, advance } = await start();
    fleet.records('bat', 'v1', 20);
    // a first round within the SLO: nothing to do, the requests in flight measured (none)
    fleet.records('crit', 'v1', 30, () => ({ ttftMs: 150, completionTokens: 50 }));
    await advance(INTERVAL);
    expect(fleet.eventKinds('scheduler_')).toEqual([]);
    // then 40 more requests in flight than 10 s ago, and a TTFT p99 only 1.25× its SLO (its overshoot alone would ask for 2)
    fleet.inflight.set('crit', 40);
    fleet.records('crit', 'v1', 30, () => ({ ttftMs: 250, completionTokens: 50 }));
    await advance(INTERVAL);
    const up = fleet.events.find((e) => e.kind === 'scheduler_scale_up');
    expect(up?.message).toMatch(
      /^scale up crit: 1 → 3 replica\(s\) — TTFT p99 250 ms > SLO 200 ms: demand \d+ tok\/s \(\d+\.\d req\/s × 50 tok\) over \d+ tok\/s a replica \(measured\), sized for 80 % → 3; expected: 2 GPU\(s\) taken; [\d.]+ → [\d.]+ req\/s a replica; \d+ % → \d+ % of the measured capacity asked for; done$/,
    );
    expect(ports.workers.target('crit', 'v1')).toBe(3);
  });

  it('a scale signal: requests in flight past queue_depth a replica add replicas within the SLO; well below, one goes back after the cool-down', async () => {
    const { fleet, ports, advance } = await start({ signal: { queue_depth: 4 } });
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 30, () => ({ ttftMs: 50 }));
    fleet.inflight.set('crit', 10);
    await advance(INTERVAL);
    const up = fleet.events.find((e) => e.kind === 'scheduler_scale_up');
    expect(up?.message).toMatch(/^scale up crit: 1 → 3 replica\(s\) — scale signal: 10 request\(s\) in flight > 1 × 4 → 3; expected: 2 GPU\(s\) taken/);
    expect(ports.workers.target('crit', 'v1')).toBe(3);
    // the queue gone: after the cool-down, one back a round (one fewer carries it at half of what each is sized for)
    fleet.inflight.set('crit', 1);
    for (let i = 0; i < 7; i++) {
      fleet.records('bat', 'v1', 5);
      fleet.records('crit', 'v1', 30, () => ({ ttftMs: 50 }));
      await advance(INTERVAL);
    }
    const down = fleet.events.filter((e) => e.kind === 'scheduler_scale_down' && e.model === 'crit');
    expect(down[0]?.message).toMatch(
      /^scale down crit: 3 → 2 replica\(s\) — TTFT p99 50 ms < 50 % of its SLO 200 ms, its scale signal fits 2 replica\(s\) at 50 %/,
    );
  });

  it('the GPUs of a dead worker health is about to replace are kept for it, not given to a batch model', async () => {
    const { fleet, s } = await startScheduler({
      gpus: 4,
      models: [
        { name: 'crit', priority: 'critical', health: { enabled: true }, versions: [{ id: 'v1', replicas: 2, ...sim }], route: { weights: { v1: 1 } } },
        { name: 'bat', priority: 'batch', min_replicas: 0, max_replicas: 3, versions: [{ id: 'v1', replicas: 1, ...sim }], route: { weights: { v1: 1 } } },
      ],
    });
    fleet.crash(fleet.live('crit', 'v1')[0]!.id);
    fleet.records('bat', 'v1', 20);
    const r = await s.preview();
    expect([r.freeGpus, r.reservedGpus]).toEqual([1, 1]);
    expect(r.plan.decisions.map((d) => `${d.action} ${d.model} ${d.from}→${d.to}`)).toEqual(['scale_up bat 1→2']);
  });

  it('a dry run decides and explains, and changes nothing', async () => {
    const { fleet, ports, s, advance } = await start({ dryRun: true });
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await advance(INTERVAL);
    expect(fleet.log.filter((l) => /^(drain|stop|start)/.test(l))).toEqual([]);
    expect(ports.workers.target('crit', 'v1')).toBeUndefined();
    expect(s.status().history.map((h) => `${h.action} ${h.model} ${h.outcome}`)).toEqual([
      'preempt bat not carried out (dry run)',
      'preempt bat not carried out (dry run)',
      'preempt bat not carried out (dry run)',
      'scale_up crit not carried out (dry run)',
    ]);
    expect(fleet.events.at(-1)?.message).toContain('(dry run)');
  });

  it('a restarted scheduler keeps the counts it set (before health counts against them)', async () => {
    const { fleet, ports, advance } = await start();
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await advance(INTERVAL);
    const again = new Scheduler(ports, fleet.cfg.scheduler);
    ports.workers.setTarget('crit', 'v1', undefined);
    await again.restore();
    expect(ports.workers.target('crit', 'v1')).toBe(4);
  });

  it('a rollout that claims a version while the round drains is left its claim: nothing starts under it', async () => {
    const { fleet, ports, s } = await start();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const drain = ports.workers.drainOne.bind(ports.workers);
    ports.workers.drainOne = async (w, t, why) => {
      await gate;
      return drain(w, t, why);
    };
    fleet.records('bat', 'v1', 20);
    // (a request at 3× the SLO: a round at once, which drains the batch workers first)
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await new Promise((r) => setImmediate(r));
    ports.workers.claim('crit', 'v1', 'rolling-1');
    release();
    await s.whenIdle();
    expect(ports.workers.claimedBy('crit', 'v1')).toBe('rolling-1');
    expect(fleet.log.filter((l) => l.startsWith('start crit'))).toEqual([]);
    expect(s.status().history.find((h) => h.model === 'crit')?.outcome).toBe('skipped: its workers belong to rolling-1 now');
  });

  it('a saved value that is not a count is reported and dropped, and the round still saves its own', async () => {
    const { fleet, ports, s } = await start();
    await ports.settings.set('scheduler.targets', { crit: 'four', bat: { version: 'v1', replicas: -1 } });
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await s.whenIdle();
    expect(await ports.settings.get('scheduler.targets')).toEqual({ crit: { version: 'v1', replicas: 4 }, bat: { version: 'v1', replicas: 0 } });
    expect(fleet.eventKinds('scheduler_error').length).toBeGreaterThan(0);
  });

  it('a target is let go when another version becomes active; dead workers are not counted as replicas', async () => {
    const { fleet, ports, s, advance } = await start();
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    await advance(INTERVAL);
    expect(ports.workers.target('crit', 'v1')).toBe(4);
    fleet.worker('crit/v1/3').health = { ...fleet.worker('crit/v1/3').health!, state: 'dead' };
    // not serving: health's recovery replaces it, so it counts as one starting, its GPU kept for it
    const preview = await s.preview();
    expect(preview.models.find((m) => m.model === 'crit')?.replicas).toBe(4);
    expect(preview.reservedGpus).toBe(1);
    // crit's active version is v2 now: v1's target goes, the saved counts with it
    ports.versions.active = async (model) => (model === 'crit' ? { ...(await fleet.registry.get('crit', 'v1')), id: 'v2' } : fleet.registry.active(model));
    await s.round();
    expect(ports.workers.target('crit', 'v1')).toBeUndefined();
  });

  it('a model whose workers a rollout owns is left alone, and says why', async () => {
    const { fleet, ports, s } = await start();
    ports.workers.claim('bat', 'v1', 'rolling-1');
    fleet.records('bat', 'v1', 20);
    fleet.records('crit', 'v1', 100, () => ({ ttftMs: 600 }));
    const r = await s.preview();
    expect(r.models.find((m) => m.model === 'bat')?.frozen).toBe('its workers belong to rolling-1');
    expect(r.plan.decisions).toEqual([]);
    expect(r.plan.short).toEqual([{ model: 'crit', wanted: 4, got: 1, reason: 'no free GPU and nothing of a lower priority to take' }]);
  });
});

// Regressions found by an adversarial review of the scheduler's measurements.
const crit = critModel;
const bat = (n: number) => ({
  name: 'bat',
  priority: 'batch',
  min_replicas: 0,
  max_replicas: 3,
  versions: [{ id: 'v1', replicas: n, ...sim }],
  route: { weights: { v1: 1 } },
});

describe('scheduler controller, regressions of an adversarial review', () => {
  const start = (models: Record<string, unknown>[], gpus = 4) => startScheduler({ gpus, models });
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
