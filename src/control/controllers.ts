// The controllers of one App, built over its ports: blue-green, stop-start, canary, experiments,
// rolling updates, the monitored rollback and the LLM judge feed. Nothing here is module-level: two Apps in one process (tests)
// have two sets. `run` resumes what the store says is unfinished and starts the loops; `shutdown`
// stops them.
import type { GlidepathConfig } from '../config/types.js';
import type { DataPlane } from '../gateway/dataplane.js';
import { BlueGreen } from '../rollout/bluegreen.js';
import { StopStart } from '../rollout/stop-start.js';
import { CanaryController } from '../rollout/canary-controller.js';
import { AdapterCanaryController } from '../rollout/adapter-canary.js';
import type { AdapterCanaryState } from '../rollout/adapter-canary-state.js';
import type { CanaryState } from '../rollout/canary-state.js';
import { ExperimentController } from '../rollout/experiment-controller.js';
import type { ExperimentState } from '../rollout/experiment-state.js';
import { RollingController } from '../rollout/rolling-controller.js';
import type { RollingState } from '../rollout/rolling-state.js';
import { RollbackMonitor } from '../rollout/monitor.js';
import type { ControllerPorts } from '../rollout/ports.js';
import type { StoredRollout } from '../rollout/rollout-record.js';
import { HealthController } from '../health/controller.js';
import { Scheduler } from '../scheduler/controller.js';
import { TimeShare } from '../scheduler/time-share.js';
import { JudgeThread } from './judge-thread.js';
import { QualityFeed } from './quality-judge.js';
import { takesTurns } from '../config/time-sharing.js';

export interface Controllers {
  readonly ports: ControllerPorts;
  readonly blueGreen: BlueGreen;
  readonly stopStart: StopStart;
  readonly canary: CanaryController;
  /** Canaries of LoRA adapters' new versions (a share of one adapter's requests). */
  readonly adapterCanary: AdapterCanaryController;
  readonly experiments: ExperimentController;
  readonly rolling: RollingController;
  readonly monitor: RollbackMonitor;
  readonly health: HealthController;
  /** Runs when `scheduler.enabled`; always there for its status. */
  readonly scheduler: Scheduler;
  /** Models taking turns on shared GPUs (`time_sharing:`); idle without groups. */
  readonly timeShare: TimeShare;
  /** Present when the config has a `judge:` section. */
  readonly judge: QualityFeed | undefined;
  /** What must hold before the data plane takes requests: each time-shared group with one model awake, the others asleep and held. */
  beforeServing(): Promise<void>;
  run(): Promise<void>;
  shutdown(): void;
}

export function buildControllers(cfg: GlidepathConfig, ports: ControllerPorts, dp: DataPlane): Controllers {
  const blueGreen = new BlueGreen(ports);
  // canary looks in a worker thread: a look over full windows costs ~25 ms, the gateway's loop must not wait
  const looks = new JudgeThread((message) => ports.emit({ kind: 'warning', message }));
  const canary = new CanaryController(ports, { tickMs: cfg.control.tickMs, judge: looks.judge });
  const adapterCanary = new AdapterCanaryController(ports, { tickMs: cfg.control.tickMs, judge: looks.judge });
  const experiments = new ExperimentController(ports);
  const rolling = new RollingController(ports, { tickMs: cfg.control.tickMs });
  const monitor = new RollbackMonitor(ports, (model, actor, reason) => blueGreen.rollback(model, actor, reason));
  const judge = cfg.judge ? new QualityFeed(cfg.judge, ports.models.names(), dp, [canary, adapterCanary, experiments]) : undefined;
  // built now: it records the probe sets of the versions the boot loads
  const health = new HealthController(ports, { tickMs: cfg.control.tickMs });
  const timeShare = new TimeShare(ports, cfg.gateway.requestTimeoutMs, cfg.control.tickMs);
  // a model whose versions take turns on slots it (or its group) holds is not scaled: its replicas are the slots
  const scheduler = new Scheduler(ports, cfg.scheduler, (model) => takesTurns(ports.models.config(model), cfg.timeSharing));
  return {
    ports,
    blueGreen,
    stopStart: new StopStart(ports),
    canary,
    adapterCanary,
    experiments,
    rolling,
    monitor,
    health,
    scheduler,
    timeShare,
    judge,
    beforeServing: () => timeShare.run(),
    async run() {
      judge?.run();
      // the replica counts the scheduler set before a restart, before recovery counts against them
      await scheduler.restore();
      health.run();
      scheduler.run();
      canary.run();
      adapterCanary.run();
      experiments.run();
      rolling.run();
      await resumeRollouts(ports, { canary, adapterCanary, experiments, rolling });
      await monitor.run();
    },
    shutdown() {
      health.shutdown();
      scheduler.shutdown();
      timeShare.shutdown();
      monitor.shutdown();
      canary.shutdown();
      adapterCanary.shutdown();
      experiments.shutdown();
      rolling.shutdown();
      judge?.shutdown();
      void looks.close();
    },
  };
}

/** Hand every unfinished rollout to its controller by kind; an unreadable one is reported and left alone. */
async function resumeRollouts(ports: ControllerPorts, c: Pick<Controllers, 'canary' | 'adapterCanary' | 'experiments' | 'rolling'>): Promise<void> {
  const { rollouts, unreadable } = await ports.rollouts.unfinished();
  const canaries: StoredRollout<CanaryState>[] = [];
  const adapterCanaries: StoredRollout<AdapterCanaryState>[] = [];
  const exps: StoredRollout<ExperimentState>[] = [];
  const rolls: StoredRollout<RollingState>[] = [];
  for (const r of rollouts) {
    const { state } = r;
    switch (state.kind) {
      case 'canary':
        canaries.push({ ...r, state });
        break;
      case 'experiment':
        exps.push({ ...r, state });
        break;
      case 'rolling':
        rolls.push({ ...r, state });
        break;
      case 'adapter_canary':
        adapterCanaries.push({ ...r, state });
        break;
    }
  }
  for (const err of unreadable) ports.emit({ kind: 'rollout_unreadable', message: `not resumed: ${err.message}` });
  c.experiments.recover(exps);
  await c.canary.recover(canaries);
  await c.adapterCanary.recover(adapterCanaries);
  await c.rolling.recover(rolls);
}
