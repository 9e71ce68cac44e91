// Descriptive statistics and the small array helpers every test shares: NaN removal, sorting,
// mean/variance, quantiles with NumPy's default (linear) interpolation, and tie groups.
import { quantileSorted } from '../../domain/quantile.js';

/** Keeps finite numbers only. This is the analysis-wide NaN policy ("remove", as Kayenta's default). */
export function finite(values: ArrayLike<number | null | undefined>): number[] {
  const out: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'number' && Number.isFinite(v)) out.push(v);
  }
  return out;
}

/** Ascending sorted copy (numeric, not lexicographic). */
export function sortedCopy(values: ArrayLike<number>): Float64Array {
  const a = Float64Array.from(values);
  a.sort();
  return a;
}

export function sum(values: ArrayLike<number>): number {
  // Neumaier summation: long latency series should not lose digits to rounding.
  let s = 0;
  let c = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    const t = s + v;
    c += Math.abs(s) >= Math.abs(v) ? s - t + v : v - t + s;
    s = t;
  }
  return s + c;
}

export function mean(values: ArrayLike<number>): number {
  return values.length === 0 ? NaN : sum(values) / values.length;
}

/** Variance with `ddof` delta degrees of freedom (1 = sample variance, as np.var(ddof=1)). */
export function variance(values: ArrayLike<number>, ddof = 1): number {
  const n = values.length;
  if (n - ddof <= 0) return NaN;
  const m = mean(values);
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const d = (values[i] as number) - m;
    ss += d * d;
  }
  return ss / (n - ddof);
}

export function std(values: ArrayLike<number>, ddof = 1): number {
  return Math.sqrt(variance(values, ddof));
}

// One definition of a quantile for the whole project (NumPy's linear): domain/quantile.ts.
export { quantileSorted };

export function quantile(values: readonly number[], q: number): number {
  return quantileSorted(sortedCopy(values), q);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Sum over tie groups of t^3 - t (the tie correction term of rank tests). */
export function tieTerm(ties: readonly number[]): number {
  let s = 0;
  for (const t of ties) s += t * t * t - t;
  return s;
}

/** Tie group sizes (> 1) of an ascending sorted array. */
export function tieGroupsSorted(sorted: ArrayLike<number>): number[] {
  const ties: number[] = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i + 1;
    while (j < sorted.length && sorted[j] === sorted[i]) j++;
    if (j - i > 1) ties.push(j - i);
    i = j;
  }
  return ties;
}
