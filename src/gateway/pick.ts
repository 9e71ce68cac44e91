// Worker choice inside one version's pool: the Picker interface and its implementations.

/** What a picker needs to know about a worker. */
export interface Pickable {
  readonly id: string;
  /** Requests sent to it and not yet finished. */
  outstanding: number;
  /** Epoch ms until which passive health keeps it out of rotation (0 = available). */
  ejectedUntil: number;
  /** False while starting, asleep or removed. */
  routable: boolean;
  /**
   * Health weight (src/health): 1 healthy, 0.5 suspicious, a trickle while a breaker is half-open, 0
   * out of rotation (unhealthy, a spare, a replacement not yet admitted).
   */
  weight: number;
  /**
   * Picks left at a reduced weight (a half-open breaker's trial requests): each pick takes one and
   * the last sets the weight to 0. Infinity: no limit.
   */
  budget: number;
}

export interface Picker {
  readonly name: string;
  /**
   * Pick one of `workers` that is routable, not ejected at `now`, and not in `exclude`; undefined
   * when none qualifies.
   */
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined;
}

/** Routable, weighted, not ejected, not excluded: what every picker may choose. */
export function eligible(w: Pickable, now: number, exclude: ReadonlySet<Pickable> | undefined): boolean {
  return w.routable && w.weight > 0 && w.ejectedUntil <= now && (exclude === undefined || !exclude.has(w));
}

/** Eligible at full weight: the fast paths' condition (every worker healthy is the common case). */
function full(w: Pickable, now: number, exclude: ReadonlySet<Pickable> | undefined): boolean {
  return w.weight === 1 && eligible(w, now, exclude);
}

/** Take one of a reduced-weight worker's limited picks (a half-open trial); the last one takes it out. */
function spend<W extends Pickable>(w: W): W {
  if (w.budget !== Infinity && --w.budget <= 0) w.weight = 0;
  return w;
}

/** One of `ws` drawn with probability proportional to its weight, `skip` left out; `total` is their weights' sum. */
function drawWeighted<W extends Pickable>(ws: readonly W[], total: number, u: number, skip: W | undefined): W {
  let x = u * total;
  let last = ws[0] as W;
  for (const w of ws) {
    if (w === skip) continue;
    last = w;
    if (x < w.weight) return w;
    x -= w.weight;
  }
  return last; // rounding at the top end
}

/**
 * Least outstanding requests with power-of-two choices: sample two distinct eligible workers and
 * take the less loaded (ties: the first sampled). Avoids the herd effect of global least-loaded
 * across many gateway replicas while staying close to it in balance.
 */
export class PowerOfTwoPicker implements Picker {
  readonly name = 'p2c';
  private readonly rand: () => number;
  constructor(rand: () => number = Math.random) {
    this.rand = rand;
  }
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    const n = workers.length;
    if (n === 0) return undefined;
    // Fast path: all eligible at full weight (the common case) → two random distinct indexes, no allocation.
    let allOk = true;
    for (let i = 0; i < n; i++) {
      if (!full(workers[i] as W, now, exclude)) {
        allOk = false;
        break;
      }
    }
    if (allOk) {
      if (n === 1) return workers[0];
      const i = Math.floor(this.rand() * n);
      let j = Math.floor(this.rand() * (n - 1));
      if (j >= i) j++;
      const a = workers[i] as W;
      const b = workers[j] as W;
      return b.outstanding < a.outstanding ? b : a;
    }
    // Slow path: some workers out or at reduced weight. Two distinct draws, each with probability
    // proportional to weight, and the lower load per unit of weight wins: outstanding requests settle
    // in proportion to weight, so a half-weight worker gets about half a healthy one's traffic (with all
    // weights 1 this is exactly the fast path's rule on the eligible workers).
    const ok = workers.filter((w) => eligible(w, now, exclude as ReadonlySet<Pickable> | undefined));
    if (ok.length === 0) return undefined;
    if (ok.length === 1) return spend(ok[0] as W);
    let total = 0;
    for (const w of ok) total += w.weight;
    const a = drawWeighted(ok, total, this.rand(), undefined);
    const b = drawWeighted(ok, total - a.weight, this.rand(), a);
    return spend(b.outstanding / b.weight < a.outstanding / a.weight ? b : a);
  }
}

/**
 * Round-robin over eligible workers in list order; when some are at reduced weight, smooth weighted
 * round-robin (nginx's: each pick adds every weight to its worker's credit, the highest credit wins
 * and pays the total), so a half-weight worker gets every other turn, evenly spread.
 */
export class RoundRobinPicker implements Picker {
  readonly name = 'round_robin';
  private next = 0;
  private readonly credit = new WeakMap<Pickable, number>();
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    const n = workers.length;
    let reduced = false;
    for (let k = 0; k < n && !reduced; k++) {
      const w = workers[k] as W;
      reduced = w.weight < 1 && w.weight > 0 && eligible(w, now, exclude);
    }
    if (reduced) return this.weighted(workers, now, exclude);
    for (let k = 0; k < n; k++) {
      const idx = (this.next + k) % n;
      const w = workers[idx] as W;
      if (eligible(w, now, exclude)) {
        this.next = (idx + 1) % n;
        return w;
      }
    }
    return undefined;
  }

  private weighted<W extends Pickable>(workers: readonly W[], now: number, exclude: ReadonlySet<W> | undefined): W | undefined {
    let total = 0;
    let best: W | undefined;
    let bestCredit = -Infinity;
    for (const w of workers) {
      if (!eligible(w, now, exclude)) continue;
      const c = (this.credit.get(w) ?? 0) + w.weight;
      this.credit.set(w, c);
      total += w.weight;
      if (c > bestCredit) {
        best = w;
        bestCredit = c;
      }
    }
    if (best === undefined) return undefined;
    this.credit.set(best, bestCredit - total);
    return spend(best);
  }
}

export function createPicker(kind: 'p2c' | 'round_robin', rand?: () => number): Picker {
  return kind === 'round_robin' ? new RoundRobinPicker() : new PowerOfTwoPicker(rand);
}
