// Seeded random numbers for the analysis tests (mulberry32 + Box-Muller), so every run is identical.

import { mulberry32 } from '../../../src/domain/random.js';

export interface Rng {
  uniform(): number;
  normal(mean?: number, sd?: number): number;
  lognormal(mu: number, sigma: number): number;
  bernoulli(p: number): boolean;
}

export function rng(seed: number): Rng {
  const uniform = mulberry32(seed);
  let spare: number | undefined;
  const normal = (mean = 0, sd = 1): number => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return mean + sd * s;
    }
    let u = 0;
    while (u === 0) u = uniform();
    const v = uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return mean + sd * r * Math.cos(2 * Math.PI * v);
  };
  return {
    uniform,
    normal,
    lognormal: (mu, sigma) => Math.exp(normal(mu, sigma)),
    bernoulli: (p) => uniform() < p,
  };
}

export function draw(n: number, f: () => number): number[] {
  return Array.from({ length: n }, f);
}
