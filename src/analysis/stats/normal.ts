// The standard normal distribution: erf/erfc, CDF, survival function and quantile, to ~1e-15.

const SQRT2 = Math.SQRT2;
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);
const INV_SQRT_PI = 1 / Math.sqrt(Math.PI);
const SQRT_2PI = Math.sqrt(2 * Math.PI);
/** Below this |x| erf uses its power series, above it erfc uses its continued fraction. */
const SERIES_CUTOFF = 2.5;
const MAX_TERMS = 500;

/**
 * erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)).
 * Every term is positive, so there is no cancellation (unlike the alternating Taylor series).
 */
function erfSeries(x: number): number {
  const x2 = x * x;
  let term = x;
  let sum = x;
  for (let n = 1; n < MAX_TERMS; n++) {
    term *= (2 * x2) / (2 * n + 1);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
}

/**
 * erfc(x) for x > 0 by the Laplace continued fraction
 * erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
 * evaluated with the modified Lentz method. Converges quickly for x >= 2.5.
 */
function erfcContinuedFraction(x: number): number {
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let n = 1; n < MAX_TERMS; n++) {
    const a = n / 2;
    d = x + a * d;
    d = d === 0 ? tiny : 1 / d;
    c = x + a / c;
    if (c === 0) c = tiny;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return (INV_SQRT_PI * Math.exp(-x * x)) / f;
}

/** The error function. */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const ax = Math.abs(x);
  const v = ax < SERIES_CUTOFF ? erfSeries(ax) : 1 - erfcContinuedFraction(ax);
  return x < 0 ? -v : v;
}

/** The complementary error function 1 - erf(x), accurate in the upper tail. */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x === Infinity) return 0;
  if (x === -Infinity) return 2;
  if (x >= SERIES_CUTOFF) return erfcContinuedFraction(x);
  if (x > -SERIES_CUTOFF) return 1 - (x < 0 ? -erfSeries(-x) : erfSeries(x));
  return 2 - erfcContinuedFraction(-x);
}

/** Standard normal CDF, P(Z <= z); keeps relative precision in the lower tail. */
export function normCdf(z: number): number {
  return 0.5 * erfc(-z / SQRT2);
}

/** Standard normal survival function, P(Z > z); keeps relative precision in the upper tail. */
export function normSf(z: number): number {
  return 0.5 * erfc(z / SQRT2);
}

// Acklam's rational approximation (relative error 1.15e-9), then refined by Halley steps.
const A = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
const B = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
const C = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
const D = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
const P_LOW = 0.02425;

function acklam(p: number): number {
  const [a0, a1, a2, a3, a4, a5] = A as [number, number, number, number, number, number];
  const [b0, b1, b2, b3, b4] = B as [number, number, number, number, number];
  const [c0, c1, c2, c3, c4, c5] = C as [number, number, number, number, number, number];
  const [d0, d1, d2, d3] = D as [number, number, number, number];
  if (p < P_LOW) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  if (p <= 1 - P_LOW) {
    const q = p - 0.5;
    const r = q * q;
    return ((((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q) / (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1);
  }
  const q = Math.sqrt(-2 * Math.log(1 - p));
  return -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
}

/**
 * Standard normal quantile (inverse CDF), as scipy.stats.norm.ppf.
 * Acklam's approximation refined by two Halley steps against the accurate CDF; the lower tail
 * is refined against normCdf and the upper tail against normSf so both keep full precision.
 */
export function normPpf(p: number): number {
  if (Number.isNaN(p) || p < 0 || p > 1) return NaN;
  if (p === 0) return -Infinity;
  if (p === 1) return Infinity;
  if (p > 0.5) return normIsf(1 - p); // 1 - p is exact for p >= 0.5
  let x = acklam(p);
  for (let i = 0; i < 2; i++) {
    const e = normCdf(x) - p;
    const u = e * SQRT_2PI * Math.exp((x * x) / 2);
    x = x - u / (1 + (x * u) / 2);
  }
  return x;
}

/** Inverse survival function: z with P(Z > z) = q. Precise for tiny q (upper tail). */
export function normIsf(q: number): number {
  if (Number.isNaN(q) || q < 0 || q > 1) return NaN;
  if (q === 0) return Infinity;
  if (q === 1) return -Infinity;
  if (q > 0.5) return -normIsf(1 - q);
  // P(Z > x) = q  <=>  x = -ppf(q): normSf(-x) = normCdf(x) exactly, so the lower-tail-precise ppf
  // (refined against normCdf) gives the same Halley steps mirrored.
  return -normPpf(q);
}
