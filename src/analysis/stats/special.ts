// Special functions the tests need: log-gamma, log-binomial coefficients, the regularized
// incomplete beta function, and the Student t and binomial tails built on it.

// Lanczos approximation, g = 7, n = 9 (relative error ~1e-15 for positive arguments).
const LANCZOS_G = 7;
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012,
  9.9843695780195716e-6, 1.5056327351493116e-7,
];
const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/** log |Gamma(x)|. */
export function logGamma(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0.5) {
    // Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
    return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x);
  }
  const z = x - 1;
  let a = LANCZOS[0] as number;
  const t = z + LANCZOS_G + 0.5;
  for (let i = 1; i < LANCZOS.length; i++) a += (LANCZOS[i] as number) / (z + i);
  return LOG_SQRT_2PI + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

// Exact sums of logs for small n keep the hypergeometric probabilities precise.
const LOG_FACT_TABLE_SIZE = 1024;
const logFactTable: number[] = (() => {
  const t = new Array<number>(LOG_FACT_TABLE_SIZE);
  t[0] = 0;
  for (let i = 1; i < LOG_FACT_TABLE_SIZE; i++) t[i] = (t[i - 1] as number) + Math.log(i);
  return t;
})();

/** log(n!) for integer n >= 0. */
export function logFactorial(n: number): number {
  if (n < 0 || !Number.isInteger(n)) return NaN;
  if (n < LOG_FACT_TABLE_SIZE) return logFactTable[n] as number;
  return logGamma(n + 1);
}

/** log C(n, k); -Infinity when k is outside 0..n. */
export function logChoose(n: number, k: number): number {
  if (k < 0 || k > n) return -Infinity;
  return logFactorial(n) - logFactorial(k) - logFactorial(n - k);
}

/** Continued fraction for the incomplete beta function (Numerical Recipes `betacf`, modified Lentz). */
function betaContinuedFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 10_000; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-16) break;
  }
  return h;
}

/** Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1. */
export function betaInc(x: number, a: number, b: number): number {
  if (Number.isNaN(x) || x < 0 || x > 1 || !(a > 0) || !(b > 0)) return NaN;
  if (x === 0) return 0;
  if (x === 1) return 1;
  const lnFront = logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x);
  const front = Math.exp(lnFront);
  // The continued fraction converges fast for x < (a + 1) / (a + b + 2); use symmetry otherwise.
  if (x < (a + 1) / (a + b + 2)) return (front * betaContinuedFraction(x, a, b)) / a;
  return 1 - (front * betaContinuedFraction(1 - x, b, a)) / b;
}

/** P(T > t) for Student's t with `df` (possibly fractional) degrees of freedom. */
export function studentTSf(t: number, df: number): number {
  if (Number.isNaN(t) || !(df > 0)) return NaN;
  if (t === Infinity) return 0;
  if (t === -Infinity) return 1;
  const tail = 0.5 * betaInc(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? tail : 1 - tail;
}

/** P(X >= k) for X ~ Binomial(n, p). */
export function binomialSf(k: number, n: number, p: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  return betaInc(p, k, n - k + 1);
}
