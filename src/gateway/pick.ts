// Worker choice inside one version's pool: the Picker interface and its implementations.

/** What a picker needs to know about a worker. */
export interface Pickable {
  readonly id: string;
  /** Requests sent to it and not yet finished. */
  outstanding: number;
  /** Epoch ms until which passive health keeps it out of rotation (0 = available). */
  ejectedUntil: number;
  /** False while starting, draining, unhealthy or removed. */
  routable: boolean;
}

export interface Picker {
  readonly name: string;
  /**
   * Pick one of `workers` that is routable, not ejected at `now`, and not in `exclude`; undefined
   * when none qualifies.
   */
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined;
}

function eligible(w: Pickable, now: number, exclude: ReadonlySet<Pickable> | undefined): boolean {
  return w.routable && w.ejectedUntil <= now && (exclude === undefined || !exclude.has(w));
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
    // Fast path: all eligible (the common case) → two random distinct indexes, no allocation.
    let allOk = true;
    for (let i = 0; i < n; i++) {
      if (!eligible(workers[i] as W, now, exclude)) {
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
    const ok = workers.filter((w) => eligible(w, now, exclude as ReadonlySet<Pickable> | undefined));
    if (ok.length === 0) return undefined;
    if (ok.length === 1) return ok[0];
    const i = Math.floor(this.rand() * ok.length);
    let j = Math.floor(this.rand() * (ok.length - 1));
    if (j >= i) j++;
    const a = ok[i] as W;
    const b = ok[j] as W;
    return b.outstanding < a.outstanding ? b : a;
  }
}

/** Plain round-robin over eligible workers, in list order. */
export class RoundRobinPicker implements Picker {
  readonly name = 'round_robin';
  private next = 0;
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    const n = workers.length;
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
}

export function createPicker(kind: 'p2c' | 'round_robin', rand?: () => number): Picker {
  return kind === 'round_robin' ? new RoundRobinPicker() : new PowerOfTwoPicker(rand);
}
