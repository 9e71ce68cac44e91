// The workers one proxied request goes through: the one it holds now (counted in that worker's
// outstanding requests, which the picker balances on; in disaggregated serving its prefill worker
// too, until the decode worker pulled the blocks), the ones it already tried, and how many attempts
// it made.
import type { Picker } from './pick.js';
import type { VersionPool, Worker } from './pool.js';

export class Attempts {
  /** The worker of the current (or last) attempt. */
  worker: Worker | undefined;
  /** Attempts made (one more than the retries). */
  count = 0;
  private tried: Set<Worker> | undefined;
  /** True while `worker.outstanding` counts the request. */
  private holding = false;
  /** Lets go of the prefill worker that holds this attempt's KV blocks (prefill.ts). */
  private prefill: (() => void) | undefined;

  constructor(
    private readonly picker: Picker,
    private readonly pool: VersionPool,
  ) {}

  /** Whether the request holds `w` now. */
  holds(w: Worker): boolean {
    return this.holding && this.worker === w;
  }

  /** Take another worker of the pool, none tried before: counted as an attempt and held. Undefined when none is left. */
  next(): Worker | undefined {
    this.prefilled();
    const w = this.picker.pick(this.pool.candidates, Date.now(), this.tried);
    if (w === undefined) return undefined;
    this.worker = w;
    this.count++;
    w.outstanding++;
    this.holding = true;
    return w;
  }

  /** The worker no longer counts the request (it ended there, or moves on). */
  release(): void {
    this.prefilled();
    if (this.holding && this.worker) {
      this.worker.outstanding--;
      this.holding = false;
    }
  }

  /** Hold the prefill worker of this attempt (its `done` lets go) until the decode worker answered, or the attempt ends. */
  holdPrefill(done: () => void): void {
    this.prefilled();
    this.prefill = done;
  }

  /** The decode worker answered (it pulled the blocks): the prefill worker goes free. */
  prefilled(): void {
    const done = this.prefill;
    if (done === undefined) return; // (every attempt of an aggregated pool)
    this.prefill = undefined;
    done();
  }

  /** The current worker is not to be tried again; `uncounted`: its attempt never reached it (its queue refused). */
  exclude(uncounted = false): void {
    (this.tried ??= new Set()).add(this.worker as Worker);
    if (uncounted) this.count--;
  }
}
