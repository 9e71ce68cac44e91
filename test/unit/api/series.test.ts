// The dashboard's series recorder: one point per model per sample with the route and each version's
// window, a bounded ring, pushed to subscribers; and no sampling at all while nobody watches.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SeriesRecorder } from '../../../src/api/series.js';
import type { ControlPlane } from '../../../src/control/plane.js';

const stats = (rps: number) => ({
  requests: 10,
  errors: 1,
  errorRate: 0.1,
  rps,
  tokensPerS: 0,
  spanS: 1,
  ttftMs: { p50: 5, p90: 8, p99: 9, mean: 5 },
  tpotMs: { p50: NaN, p90: NaN, p99: NaN, mean: NaN },
  latencyMs: { p50: 50, p90: 80, p99: 90, mean: 50 },
});

function fakePlane(): { cp: Pick<ControlPlane, 'dp'>; calls: () => number } {
  let calls = 0;
  const model = {
    route: {
      revision: 3,
      versions: [
        { id: 'v1', weight: 0.75 },
        { id: 'v2', weight: 0.25 },
      ],
    },
    pools: new Map([['v3', {}]]),
  };
  const dp = {
    models: new Map([['llama', model]]),
    telemetry: {
      stats: (_m: string, v: string) => {
        calls++;
        return stats(v === 'v1' ? 30 : 10);
      },
    },
  };
  return { cp: { dp } as unknown as Pick<ControlPlane, 'dp'>, calls: () => calls };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('SeriesRecorder', () => {
  it("samples each model's route and every routed or loaded version's window, non-finite numbers as null", () => {
    const { cp } = fakePlane();
    const r = new SeriesRecorder(cp, 1000, 3);
    const got: number[] = [];
    r.subscribe((s) => got.push(s.at));
    const s = r.sample(5_000);
    expect(got).toEqual([5_000]);
    expect(s.models.llama).toEqual({
      at: 5_000,
      revision: 3,
      weights: { v1: 0.75, v2: 0.25 },
      versions: {
        v1: { requests: 10, rps: 30, error_rate: 0.1, ttft_p50: 5, ttft_p99: 9, tpot_p50: null, tpot_p99: null },
        v2: { requests: 10, rps: 10, error_rate: 0.1, ttft_p50: 5, ttft_p99: 9, tpot_p50: null, tpot_p99: null },
        v3: { requests: 10, rps: 10, error_rate: 0.1, ttft_p50: 5, ttft_p99: 9, tpot_p50: null, tpot_p99: null },
      },
    });
  });

  it('keeps at most its capacity of points per model, oldest dropped', () => {
    const { cp } = fakePlane();
    const r = new SeriesRecorder(cp, 1000, 3);
    for (let t = 1; t <= 5; t++) r.sample(t);
    expect(r.history('llama').points.map((p) => p.at)).toEqual([3, 4, 5]);
    expect(r.history('other').points).toEqual([]);
  });

  it('computes nothing while nobody watches; samples once the history is read or a stream listens, and for the ring’s span after', () => {
    vi.useFakeTimers();
    const { cp, calls } = fakePlane();
    const r = new SeriesRecorder(cp, 1000, 5);
    r.start();
    vi.advanceTimersByTime(10_000);
    expect(calls()).toBe(0);
    r.history('llama');
    vi.advanceTimersByTime(3_000);
    expect(r.history('llama').points).toHaveLength(3);
    // nobody reads again: it stops once the ring's span (5 samples) has passed since the last read
    vi.advanceTimersByTime(20_000);
    const stopped = calls();
    vi.advanceTimersByTime(10_000);
    expect(calls()).toBe(stopped);
    const unsub = r.subscribe(() => undefined);
    vi.advanceTimersByTime(2_000);
    expect(calls()).toBe(stopped + 6);
    unsub();
    r.stop();
  });
});
