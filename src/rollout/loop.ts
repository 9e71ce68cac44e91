// A controller's reconcile loop: a tick every `tickMs` on the ports' clock (never two at once, the
// next scheduled when one ends), a tick at once on demand, and the background work it starts tracked
// — its failures handed to `onError`, never unhandled — so that tests can wait for it (advance the
// fake clock, then await `whenIdle`). The canary, rolling and health controllers run on it.
import type { Clock } from './ports.js';

export class ReconcileLoop {
  private readonly background = new Set<Promise<unknown>>();
  private cancel: (() => void) | undefined;
  /** Work waiting for its time (`later`), cancelled by `stop`. */
  private readonly waiting = new Set<() => void>();
  private running = false;

  constructor(
    private readonly clock: Clock,
    private readonly tickMs: number,
    private readonly tick: () => Promise<void> | void,
    /** Told of background work that failed (`what` names it); by default the work reports its own failures. */
    private readonly onError: (what: string, err: unknown) => void = () => undefined,
  ) {}

  get started(): boolean {
    return this.running;
  }

  /** Tick every `tickMs` from now on (`now`: a first tick at once). */
  start(now = false): void {
    if (this.running) return;
    this.running = true;
    if (now) this.spawn(this.ticked());
    else this.schedule();
  }

  /** Stop ticking. Work already under way finishes on its own. */
  stop(): void {
    this.running = false;
    this.cancel?.();
    this.cancel = undefined;
    for (const c of this.waiting) c();
    this.waiting.clear();
  }

  /** A tick now (while the loop runs), beside the scheduled ones. */
  kick(): void {
    if (this.running) this.spawn(Promise.resolve(this.tick()));
  }

  /** Track work started in the background; a failure goes to `onError`. */
  spawn(p: Promise<unknown>, what = 'background work'): void {
    const tracked = p.catch((err: unknown) => this.onError(what, err)).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  /** Start `work` in the background `ms` from now, unless the loop stops first (nothing to wait for meanwhile). */
  later(ms: number, what: string, work: () => Promise<unknown>): void {
    const cancel = this.clock.after(ms, () => {
      this.waiting.delete(cancel);
      if (this.running) this.spawn(work(), what);
    });
    this.waiting.add(cancel);
  }

  /** Resolves when no background work (a tick, a load, a start or a stop) runs. */
  async whenIdle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  private schedule(): void {
    if (!this.running) return;
    this.cancel = this.clock.after(this.tickMs, () => {
      this.cancel = undefined;
      this.spawn(this.ticked());
    });
  }

  /** One tick, then the next one scheduled. */
  private async ticked(): Promise<void> {
    try {
      await this.tick();
    } finally {
      this.schedule();
    }
  }
}
