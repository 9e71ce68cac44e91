// A rolling update's workers, started and drained/stopped in the background: a start holds no lock
// (an abort must not wait for a worker to load), and its failures reach the next tick through the update's live state.
import { ConflictError } from '../errors.js';
import { newHealth } from '../health/machine.js';
import type { ReconcileLoop } from './loop.js';
import type { ControllerPorts, WorkerInfo } from './ports.js';
import type { Launch, Live } from './rolling-live.js';
import { messageOf, pools } from './rolling-state.js';

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

  /** Start one new worker in the background (a start holds no lock: an abort must not wait for a worker to load). */
  launch(l: Live, role: string, version: string): void {
    const s = l.state;
    const p = this.ports;
    const x: Launch = { role, since: p.clock.now(), abandoned: false };
    l.launches.add(x);
    const health = p.models.config(s.model).health?.enabled === true ? newHealth('pending', x.since) : newHealth('healthy', x.since);
    const stopsBefore = l.stopsEnded;
    let waitsForGpu = false;
    const run = async () => {
      try {
        const w = await p.workers.start(s.model, version, 'serving', health, {
          newPool: true,
          kvRole: role === 'prefill' || role === 'decode' ? role : undefined,
        });
        // given up meanwhile (step timeout), or the update turned around or ended: not wanted
        if (x.abandoned || !this.host.current(l) || pools(s).new !== version) {
          l.given.add(w.id);
          await p.workers.stop(w);
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
        // no GPU free while old workers drain (each holds its GPU until stopped): not a failure; started again after (a
        // stop under way kicks the loop as it ends)
        waitsForGpu = err instanceof ConflictError && err.code === 'insufficient_gpus' && (l.stopping.size > 0 || l.stopsEnded !== stopsBefore);
        if (!x.abandoned && !waitsForGpu) l.failed.push({ worker: undefined, reason: `starting a new worker of ${version} failed: ${messageOf(err)}` });
      } finally {
        l.launches.delete(x);
        if (!waitsForGpu || l.stopping.size === 0) this.loop.kick();
      }
    };
    this.loop.spawn(run());
  }

  /** Drain (bounded) and stop a worker in the background; it no longer counts as serving. */
  stop(l: Live, w: WorkerInfo, drainMs: number): void {
    const p = this.ports;
    l.stopping.add(w.id);
    const run = async () => {
      try {
        p.workers.setWeight(w, 0);
        if (drainMs > 0) await p.workers.drainOne(w, drainMs);
        await p.workers.stop(w);
      } catch (err) {
        await this.host.event(l, 'error', `stopping ${w.id} failed: ${messageOf(err)}`);
      } finally {
        l.stopping.delete(w.id);
        l.stopsEnded++;
        this.loop.kick();
      }
    };
    this.loop.spawn(run());
  }
}
