// Synthetic, seeded telemetry for one version, shaped like the simulator's: lognormal latencies,
// Bernoulli errors, and judge scores that are 0 for a hallucinated answer and 1 otherwise.
import type { MetricSamples } from '../../../src/analysis/judge.js';
import { draw, type Rng } from './random.js';

export interface VersionShape {
  /** Multiplies whole-request latency (1.3 = 30 % slower at every quantile, p99 included). */
  latencyScale?: number;
  ttftScale?: number;
  /** Share of requests whose latency is multiplied by tailScale (a slower tail, same median). */
  tailShare?: number;
  tailScale?: number;
  errorRate?: number;
  hallucinationRate?: number;
  /** false: no quality scores at all. */
  quality?: boolean;
}

export function versionSamples(r: Rng, n: number, shape: VersionShape = {}): MetricSamples {
  const latencyMs = draw(
    n,
    () => r.lognormal(Math.log(2000), 0.5) * (shape.latencyScale ?? 1) * (r.bernoulli(shape.tailShare ?? 0) ? (shape.tailScale ?? 1) : 1),
  );
  const ttftMs = draw(n, () => r.lognormal(Math.log(150), 0.4) * (shape.ttftScale ?? 1));
  const tpotMs = draw(n, () => r.lognormal(Math.log(20), 0.3));
  let errors = 0;
  for (let i = 0; i < n; i++) if (r.bernoulli(shape.errorRate ?? 0.0005)) errors++;
  const samples: MetricSamples = {
    latencyMs,
    ttftMs,
    tpotMs,
    requests: n,
    errors,
    durationS: latencyMs.reduce((a, b) => a + b, 0) / 1000,
    outputTokens: latencyMs.reduce((a, b) => a + b / 20, 0), // ~ one token per 20 ms of latency
  };
  if (shape.quality !== false) samples.quality = draw(n, () => (r.bernoulli(shape.hallucinationRate ?? 0.03) ? 0 : 1));
  return samples;
}

/** Appends b's observations to a (a cumulative stream of telemetry). */
export function concat(a: MetricSamples, b: MetricSamples): MetricSamples {
  const out: MetricSamples = {
    latencyMs: [...a.latencyMs, ...b.latencyMs],
    ttftMs: [...a.ttftMs, ...b.ttftMs],
    tpotMs: [...a.tpotMs, ...b.tpotMs],
    requests: a.requests + b.requests,
    errors: a.errors + b.errors,
    durationS: a.durationS + b.durationS,
    outputTokens: a.outputTokens + b.outputTokens,
  };
  if (a.quality && b.quality) out.quality = [...a.quality, ...b.quality];
  return out;
}
