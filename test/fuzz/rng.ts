// The fuzzer's seeded randomness: sfc32 seeded through splitmix32, and one independent stream per
// case (case i of seed s is the same bytes on every machine and in every run, whatever ran before
// it or beside it), so a failure is replayed from its seed and index alone.

/** splitmix32: spreads a 32-bit seed over the whole state (sfc32 from a small seed starts poorly). */
function splitmix32(x: number): () => number {
  let s = x >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const sm = splitmix32(seed);
    this.a = sm();
    this.b = sm();
    this.c = sm();
    this.d = sm();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** sfc32 (Chris Doty-Humphrey's small fast counting generator). */
  u32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** [0, 1) */
  float(): number {
    return this.u32() / 4294967296;
  }

  /** An integer in [lo, hi], both included. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('pick from an empty list');
    return xs[Math.floor(this.float() * xs.length)] as T;
  }

  /** One of `entries` with probability proportional to its weight. */
  weighted<T>(entries: readonly (readonly [T, number])[]): T {
    let total = 0;
    for (const [, w] of entries) total += w;
    let x = this.float() * total;
    for (const [v, w] of entries) {
      x -= w;
      if (x < 0) return v;
    }
    return (entries[entries.length - 1] as readonly [T, number])[0];
  }

  /** A size skewed towards small values: most in [lo, lo*8], some up to hi. */
  size(lo: number, hi: number): number {
    const span = Math.log(hi / Math.max(1, lo));
    return Math.min(hi, Math.max(lo, Math.floor(Math.max(1, lo) * Math.exp(this.float() * this.float() * span))));
  }
}

/** The seed of case `index` in the run seeded `seed`. */
export function caseSeed(seed: number, index: number): number {
  const sm = splitmix32((seed ^ Math.imul(index + 1, 0x632be5ab)) >>> 0);
  sm();
  return sm();
}

/** FUZZ_SEED: a number (decimal or 0x…), or 'random' for a fresh one (printed, so it can be replayed). */
export function parseSeed(v: string | undefined, fallback: () => number): number {
  if (v === undefined || v === '') return fallback() >>> 0;
  if (v === 'random') return (Math.random() * 4294967296) >>> 0;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`FUZZ_SEED must be an integer in [0, 2^32) or "random", got ${JSON.stringify(v)}`);
  return n;
}
