// What the data plane holds for one model: its route split (replaced whole on every route change),
// its version pools, its hold queue, response capture, split counters and admission.
import type { RouteSnapshot } from '../domain/route.js';
import type { Admission } from './admission.js';
import type { HoldQueue } from './hold.js';
import type { VersionPool } from './pool.js';
import type { SplitReason, SplitState } from './split.js';
import type { ResponseTap } from './tap.js';

export interface SplitCounter {
  inc(): void;
}

/** Everything the data plane holds for one model. `split` is replaced whole on every route change. */
export class ModelState {
  readonly name: string;
  split: SplitState;
  readonly pools = new Map<string, VersionPool>();
  hold: HoldQueue | undefined;
  /** Who holds it (a drain-first swap, the time-share controller…) and each one's watch on its depth: released when none is left. */
  readonly holders = new Map<string, ((depth: number) => void) | undefined>();
  /** Response capture for quality judging (undefined: nothing is copied). */
  tap: ResponseTap | undefined;
  /** version → reason → cached counter child (no key string built per request). */
  readonly splitCounters = new Map<string, Partial<Record<SplitReason, SplitCounter>>>();
  /** Tiers and degradation (admission.ts); undefined until the control plane sets them: nothing is refused. */
  admission: Admission | undefined;

  constructor(name: string, split: SplitState) {
    this.name = name;
    this.split = split;
  }

  get route(): RouteSnapshot {
    return this.split.route;
  }
}
