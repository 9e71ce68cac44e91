// Version choice for one request: explicit header → category override → sticky hash → smooth WRR.
import type { RouteSnapshot } from '../domain/route.js';

export type SplitReason = 'header' | 'override' | 'sticky' | 'weighted';

/** cyrb53: fast, well-mixed 53-bit string hash; identical on every replica (no per-process seed). */
export function hash53(s: string, seed = 0): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** hash(salt, key) → u in [0,1). */
export function stickyPoint(salt: string, key: string): number {
  return hash53(`${salt}\u0000${key}`) / 9007199254740992;
}

/**
 * Where a sticky key lands: candidates occupy the low end of [0,1) in the route's fixed order, the
 * stable version takes the rest. Raising a candidate's weight only moves users *into* it; weight 0
 * sends everyone back to stable. Stateless, so replicas with the same salt agree.
 */
export function stickyVersion(route: RouteSnapshot, u: number): string {
  const b = route.stickyBounds;
  for (let i = 0; i < b.length; i++) {
    if (u < (b[i] as number)) return (route.versions[i] as { id: string }).id;
  }
  return route.stable;
}

/**
 * Per-snapshot mutable state: smooth weighted round-robin counters (nginx's algorithm: exact
 * proportions over every window of sum-of-weights picks, no random drift) and served counts.
 */
export class SplitState {
  readonly route: RouteSnapshot;
  private readonly current: Float64Array;
  private readonly weights: Float64Array;
  private readonly ids: string[];
  /** version id → requests chosen under this snapshot. */
  readonly counts: Map<string, number> = new Map();
  private readonly defaultSalt: string;

  constructor(route: RouteSnapshot, defaultSalt: string) {
    this.route = route;
    this.defaultSalt = route.stickySalt ?? defaultSalt;
    const active = route.versions.filter((v) => v.weight > 0);
    this.ids = active.map((v) => v.id);
    this.weights = Float64Array.from(active.map((v) => v.weight));
    this.current = new Float64Array(active.length);
    for (const v of route.versions) this.counts.set(v.id, 0);
  }

  /** Next version by smooth weighted round-robin. */
  nextWeighted(): string {
    const cur = this.current;
    const w = this.weights;
    let best = 0;
    let total = 0;
    for (let i = 0; i < cur.length; i++) {
      cur[i] = (cur[i] as number) + (w[i] as number);
      total += w[i] as number;
      if ((cur[i] as number) > (cur[best] as number)) best = i;
    }
    cur[best] = (cur[best] as number) - total;
    return this.ids[best] as string;
  }

  /**
   * Choose the version for a request. `explicit` is only honoured when it names a version in the
   * route (callers reject other values before calling).
   */
  choose(explicit: string | undefined, category: string | undefined, stickyKey: string | undefined): { version: string; reason: SplitReason } {
    let version: string;
    let reason: SplitReason;
    if (explicit !== undefined) {
      version = explicit;
      reason = 'header';
    } else if (category !== undefined && Object.hasOwn(this.route.overrides, category)) {
      // own keys only: a client's `constructor` or `__proto__` category must not reach Object.prototype
      version = this.route.overrides[category] as string;
      reason = 'override';
    } else if (stickyKey !== undefined && stickyKey !== '') {
      version = stickyVersion(this.route, stickyPoint(this.defaultSalt, stickyKey));
      reason = 'sticky';
    } else {
      version = this.nextWeighted();
      reason = 'weighted';
    }
    this.counts.set(version, (this.counts.get(version) ?? 0) + 1);
    return { version, reason };
  }

  /** Configured vs actual share per version under this snapshot. */
  shares(): { version: string; configured: number; actual: number; count: number }[] {
    let total = 0;
    for (const c of this.counts.values()) total += c;
    return this.route.versions.map((v) => {
      const count = this.counts.get(v.id) ?? 0;
      return { version: v.id, configured: v.weight, actual: total > 0 ? count / total : 0, count };
    });
  }
}
