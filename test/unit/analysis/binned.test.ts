// Histogram buckets as the judge's samples (src/analysis/binned.ts): tied samples at the bounds,
// the cap keeping the shape, Prometheus's histogram_quantile, and the judge on binned data telling a
// slower or failing version from an equal one.
import { describe, expect, it } from 'vitest';
import { NO_READING, binnedQuantile, capCounts, expandBinned, packReading } from '../../../src/analysis/binned.js';
import { unpack } from '../../../src/analysis/judge-packed.js';
import { judgeCanary, judgeConfig } from '../../../src/analysis/judge.js';
import type { Binned, VersionReading } from '../../../src/telemetry/prometheus-source.js';

const BOUNDS = [0.1, 0.25, 0.5, 1, Infinity];

describe('binned samples', () => {
  it('expands counts to tied samples at each upper bound in ms; +Inf at twice the last finite bound', () => {
    expect(Array.from(expandBinned({ bounds: BOUNDS, counts: [2, 0, 1, 0, 3] }, 100))).toEqual([100, 100, 500, 2000, 2000, 2000]);
    // only a +Inf bucket: nothing to rank by
    expect(expandBinned({ bounds: [Infinity], counts: [4] }, 100).length).toBe(0);
    expect(expandBinned({ bounds: [], counts: [] }, 100).length).toBe(0);
  });

  it('caps the total, in proportion by largest remainders', () => {
    expect(capCounts([10, 20, 30], 100)).toEqual([10, 20, 30]);
    expect(capCounts([500, 300, 200], 10)).toEqual([5, 3, 2]);
    // 1/3 each of 10: the remainders go to the first buckets
    expect(capCounts([1, 1, 1], 10)).toEqual([1, 1, 1]);
    expect(capCounts([300, 300, 300], 10)).toEqual([4, 3, 3]);
    expect(capCounts([999, 1], 10)).toEqual([10, 0]);
    expect(expandBinned({ bounds: BOUNDS, counts: [5000, 5000, 0, 0, 0] }, 10).length).toBe(10);
  });

  it("quantiles as Prometheus's histogram_quantile", () => {
    const b: Binned = { bounds: BOUNDS, counts: [50, 30, 20, 0, 0] };
    // rank 50 ends the first bucket: its bound
    expect(binnedQuantile(b, 0.5)).toBeCloseTo(0.1, 12);
    // rank 65: half-way into (0.1, 0.25]
    expect(binnedQuantile(b, 0.65)).toBeCloseTo(0.175, 12);
    // rank 99: 19/20 of (0.25, 0.5]
    expect(binnedQuantile(b, 0.99)).toBeCloseTo(0.25 + 0.25 * (19 / 20), 12);
    // in +Inf: the last finite bound
    expect(binnedQuantile({ bounds: BOUNDS, counts: [1, 0, 0, 0, 99] }, 0.99)).toBe(1);
    expect(binnedQuantile({ bounds: BOUNDS, counts: [0, 0, 0, 0, 0] }, 0.5)).toBeNaN();
  });
});

/** A reading of n requests whose latencies fall in the buckets by `share`. */
function reading(n: number, share: readonly number[], errors = 0): VersionReading {
  const counts = share.map((s) => Math.round(s * n));
  const h = { bounds: BOUNDS, counts };
  return { ...NO_READING, requests: n + errors, errors, ttft: h, tpot: { bounds: [], counts: [] }, latency: h, busyS: n * 0.3, outputTokens: n * 20 };
}

describe('the judge on binned data', () => {
  const cfg = judgeConfig({ tpot: { enabled: false }, quality: { enabled: false }, throughput: { enabled: false } });
  const judge = (a: VersionReading, b: VersionReading) =>
    judgeCanary(unpack(packReading(a, 5_000, undefined)), unpack(packReading(b, 5_000, undefined)), cfg, { index: 0 });

  it('passes a version whose buckets fill as the stable one', () => {
    const v = judge(reading(400, [0.3, 0.5, 0.2, 0, 0]), reading(400, [0.3, 0.5, 0.2, 0, 0]));
    expect(v.outcome).toBe('pass');
  });

  it('fails a version whose requests moved two buckets up', () => {
    const v = judge(reading(400, [0.3, 0.5, 0.2, 0, 0]), reading(400, [0, 0.1, 0.3, 0.6, 0]));
    expect(v.outcome).toBe('fail');
    const latency = v.metrics.find((m) => m.name === 'latency');
    expect(latency?.outcome).toBe('fail');
    expect(latency?.checks.find((c) => c.test === 'mann-whitney')?.significant).toBe(true);
  });

  it('fails a version with more errors on the counts alone', () => {
    const v = judge(reading(400, [0.3, 0.5, 0.2, 0, 0]), reading(400, [0.3, 0.5, 0.2, 0, 0], 60));
    expect(v.outcome).toBe('fail');
    expect(v.metrics.find((m) => m.name === 'errors')?.outcome).toBe('fail');
  });

  it('cannot see a shift inside one bucket (the resolution limit docs/cluster.md states)', () => {
    // every request of both versions in (0.25, 0.5]: whatever their true latencies, they tie
    const v = judge(reading(400, [0, 0, 1, 0, 0]), reading(400, [0, 0, 1, 0, 0]));
    expect(v.metrics.find((m) => m.name === 'latency')?.outcome).toBe('pass');
  });
});
