// A controller's reconcile loop: a tick every `tickMs` on the ports' clock (never two at once, the
// next scheduled when one ends), a tick at once on demand, and the background work it starts tracked
// so that tests can wait for it (advance the fake clock, then await `whenIdle`).
import type { Clock } from './ports.js';

export class ReconcileLoop {
  private readonly background = new Set<Promise<unknown>>();
  private cancel: (() => void) | undefined;
  private running = false;

  constructor(
    private readonly clock: Clock,
    private readonly tickMs: number,
    private readonly tick: () => Promise<void>,
  ) {}

  get started(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  /** Stop ticking. Work already under way finishes on its own. */
  stop(): void {
    this.running = false;
    this.cancel?.();
    this.cancel = undefined;
  }

  /** A tick now (while the loop runs), beside the scheduled ones. */
  kick(): void {
    if (this.running) this.spawn(this.tick());
  }

  /** Track work started in the background (its failure is its own business: it reports it). */
  spawn(p: Promise<unknown>): void {
    const tracked = p.catch(() => undefined).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  /** Resolves when no background work (a tick, a load, a start or a stop) runs. */
  async whenIdle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  private schedule(): void {
    if (!this.running) return;
    this.cancel = this.clock.after(this.tickMs, () => {
      this.cancel = undefined;
      this.spawn(this.tick().finally(() => this.schedule()));
    });
  }
}
