// A rolling update's workers, started and drained/stopped in the background: a start holds no lock
// (an abort must not wait for a worker to load), and its failures reach the next tick through the update's live state.
import { ConflictError } from '../errors.js';
import { newHealth } from '../health/machine.js';
import type { ReconcileLoop } from './loop.js';
import type { ControllerPorts, WorkerInfo } from './ports.js';
import type { Launch, Live } from './rolling-live.js';
import { messageOf, pools } from './rolling-state.js';

/** A start the placement refused for want of a free GPU. */
function gpuShortage(err: unknown): boolean {
  return err instanceof ConflictError && err.code === 'insufficient_gpus';
}

/** What the controller lends its workers' runner. */
export interface RollingHost {
  /** `l` is still the model's running update (not ended, not replaced). */
  current(l: Live): boolean;
  event(l: Live, kind: string, message: string): Promise<void>;
  /** Publish the new pool's share of ready capacity again (a worker ready at once). */
  refreshShare(l: Live): Promise<void>;
}

export class RollingWorkers {
  constructor(
    private readonly ports: ControllerPorts,
    private readonly loop: ReconcileLoop,
    private readonly host: RollingHost,
  ) {}

  /**
   * Start one new worker in the background (a start holds no lock: an abort must not wait for a worker
   * to load). `since`: when its step asked for it (a start made again after a wait for a GPU keeps it).
   */
  launch(l: Live, role: string, version: string, since = this.ports.clock.now()): void {
    const s = l.state;
    const p = this.ports;
    const x: Launch = { role, since, abandoned: false };
    l.launches.add(x);
    const health = p.models.config(s.model).health?.enabled === true ? newHealth('pending', x.since) : newHealth('healthy', x.since);
    const releasedBefore = l.released;
    const run = async () => {
      try {
        const w = await p.workers.start(s.model, version, 'serving', health, {
          newPool: true,
          kvRole: role === 'prefill' || role === 'decode' ? role : undefined,
        });
        // given up meanwhile (step timeout), or the update turned around or ended: not wanted. Stopped as
        // any other: counted as serving by neither pool meanwhile (going back, its version is the old
        // pool), and a stop that fails is an event, not taken for a failed start
        if (x.abandoned || !this.host.current(l) || pools(s).new !== version) {
          l.given.add(w.id);
          this.stop(l, w, 0);
          return;
        }
        await this.host.event(
          l,
          'worker_started',
          `${w.id} started and warmed${health.state === 'pending' ? '; it takes traffic once its admission probes pass' : ''}`,
        );
        // ready now (no probes to pass): its share of traffic at once, not at the next tick
        if (health.state === 'healthy') await p.exclusive(s.model, () => this.host.refreshShare(l));
      } catch (err) {
        // no GPU free while GPUs are being let go (an old worker drains and holds its GPU until stopped; an
        // abandoned start ends): not a failure; it waits, and is made again once one more has been let go
        if (!x.abandoned && gpuShortage(err) && this.freeing(l, x, releasedBefore)) x.gpuWait = releasedBefore;
        else if (!x.abandoned) l.failed.push({ worker: undefined, reason: `starting a new worker of ${version} failed: ${messageOf(err)}` });
      } finally {
        if (x.gpuWait === undefined) l.launches.delete(x);
        // whatever an abandoned start held is free now
        if (x.abandoned) l.released++;
        this.loop.kick();
      }
    };
    this.loop.spawn(run());
  }

  /**
   * Starts that wait for a GPU: let go once abandoned (they hold none); made again, as the same step,
   * once a GPU has been let go since they were refused. Under the model's lock, before a step is planned.
   */
  retryGpuWaits(l: Live): void {
    for (const x of [...l.launches]) {
      if (x.gpuWait === undefined) continue;
      if (x.abandoned) l.launches.delete(x);
      else if (l.released !== x.gpuWait) {
        l.launches.delete(x);
        this.launch(l, x.role, pools(l.state).new, x.since);
      }
    }
  }

  /** Whether a GPU is being let go, or was since `releasedBefore`: a start refused for want of one may wait for it. */
  private freeing(l: Live, x: Launch, releasedBefore: number): boolean {
    return l.stopping.size > 0 || l.released !== releasedBefore || [...l.launches].some((y) => y !== x && y.abandoned && y.gpuWait === undefined);
  }

  /** Drain (bounded) and stop a worker in the background; it no longer counts as serving. */
  stop(l: Live, w: WorkerInfo, drainMs: number): void {
    const p = this.ports;
    l.stopping.add(w.id);
    const run = async () => {
      try {
        try {
          // (a worker the data plane no longer lists — its version unloaded since it started — throws here)
          p.workers.setWeight(w, 0);
          // a planned removal: a stream still running past the drain is carried on by another worker of
          // its version (gateway resume), not ended as a worker health took out would be
          if (drainMs > 0) await p.workers.drainOne(w, drainMs, 'removed');
        } catch (err) {
          await this.host.event(l, 'error', `draining ${w.id} failed (stopped all the same): ${messageOf(err)}`);
        }
        await p.workers.stop(w);
      } catch (err) {
        await this.host.event(l, 'error', `stopping ${w.id} failed: ${messageOf(err)}`);
      } finally {
        l.stopping.delete(w.id);
        l.released++;
        this.loop.kick();
      }
    };
    this.loop.spawn(run());
  }
}
