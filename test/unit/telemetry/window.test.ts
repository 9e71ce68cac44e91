// Sliding windows: count and age bounds, percentiles against NumPy, error rate, rates.
import { describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../../src/errors.js';
import { mulberry32 } from '../../../src/domain/random.js';
import { isVersionError } from '../../../src/telemetry/record.js';
import { SlidingWindow } from '../../../src/telemetry/window.js';
import { record as rec } from '../../helpers/records.js';

describe('SlidingWindow', () => {
  it('percentiles match NumPy for 1000 seeded samples pushed in random order', () => {
    const w = new SlidingWindow(1000, 60_000);
    const r = mulberry32(7);
    const vals = Array.from({ length: 1000 }, () => r() * 1000);
    for (const v of vals) w.push(rec({ latencyMs: v, ttftMs: v / 2, tpotMs: v / 100, at: 1_000_000 }));
    const s = w.stats(1_000_000 + 2000);
    // np.percentile(vals, [50, 90, 99]) and np.mean(vals), computed with an independent mulberry32 in Python
    expect(s.latencyMs.p50).toBeCloseTo(534.9559191381559, 9);
    expect(s.latencyMs.p90).toBeCloseTo(912.506940937601, 9);
    expect(s.latencyMs.p99).toBeCloseTo(990.2439012588002, 9);
    expect(s.latencyMs.mean).toBeCloseTo(519.6141281826422, 9);
    expect(s.ttftMs.p50).toBeCloseTo(534.9559191381559 / 2, 9);
    expect(s.tpotMs.p99).toBeCloseTo(9.902439012588003, 9);
  });

  it('keeps only the last `capacity` records (ring wraps)', () => {
    const w = new SlidingWindow(300, 60_000);
    const r = mulberry32(7);
    const vals = Array.from({ length: 1000 }, () => r() * 1000);
    for (const v of vals) w.push(rec({ latencyMs: v, at: 1_000_000 }));
    const st = w.stats(1_000_000 + 2000);
    expect(st.requests).toBe(300);
    // np.percentile(vals[-300:], [50, 90, 99])
    expect(st.latencyMs.p50).toBeCloseTo(531.0238563688472, 9);
    expect(st.latencyMs.p90).toBeCloseTo(911.6808029823005, 9);
    expect(st.latencyMs.p99).toBeCloseTo(991.4435964543372, 9);
    expect(w.samples(1_000_000 + 2000).latencyMs).toEqual(vals.slice(-300));
  });

  it('drops records older than maxAge (by completion time)', () => {
    const w = new SlidingWindow(100, 1000);
    w.push(rec({ at: 0, latencyMs: 100 })); // done at 100
    w.push(rec({ at: 500, latencyMs: 100 })); // done at 600
    w.push(rec({ at: 1500, latencyMs: 100 })); // done at 1600
    expect(w.stats(1100).requests).toBe(3);
    expect(w.stats(1101).requests).toBe(2);
    expect(w.stats(1601).requests).toBe(1);
    expect(w.stats(2601).requests).toBe(0);
    const empty = w.stats(2601);
    expect(empty.errorRate).toBeNaN();
    expect(empty.latencyMs.p50).toBeNaN();
    expect(empty.rps).toBe(0);
  });

  it('error rate counts server failures only: not 4xx, not 499 client hang-ups', () => {
    const w = new SlidingWindow(100, 60_000);
    const at = 1_000_000;
    w.push(rec({ at, status: 200 }));
    w.push(rec({ at, status: 500, errorCode: 'upstream_error' }));
    w.push(rec({ at, status: 502, errorCode: 'upstream_connect_failed' }));
    w.push(rec({ at, status: 200, errorCode: 'upstream_stream_broken' }));
    w.push(rec({ at, status: 400, errorCode: 'upstream_client_error' }));
    w.push(rec({ at, status: 404 }));
    w.push(rec({ at, status: 499, errorCode: 'client_closed' }));
    w.push(rec({ at, status: 200 }));
    const s = w.stats(at + 1000);
    expect(s.requests).toBe(8);
    expect(s.errors).toBe(3);
    expect(s.errorRate).toBeCloseTo(3 / 8, 12);
  });

  it('ignores NaN TTFT/TPOT (non-streaming, single-token) in their percentiles', () => {
    const w = new SlidingWindow(10, 60_000);
    w.push(rec({ ttftMs: NaN, tpotMs: NaN }));
    w.push(rec({ ttftMs: 30, tpotMs: NaN }));
    const s = w.samples(1_000_000 + 1000);
    expect(s.ttftMs).toEqual([30]);
    expect(s.tpotMs).toEqual([]);
    expect(s.latencyMs).toHaveLength(2);
  });

  it('req/s and tokens/s over the span from the oldest arrival', () => {
    const w = new SlidingWindow(100, 60_000);
    for (let i = 0; i < 10; i++) w.push(rec({ at: 1_000_000 + i * 100, latencyMs: 50, completionTokens: 20 }));
    const s = w.stats(1_002_000);
    expect(s.spanS).toBeCloseTo(2, 9);
    expect(s.rps).toBeCloseTo(5, 9);
    expect(s.tokensPerS).toBeCloseTo(100, 9);
    expect(w.samples(1_002_000).outputTokens).toBe(200);
  });

  it('keeps quality scores under the same bounds, and clear() empties everything', () => {
    const w = new SlidingWindow(3, 1000);
    for (let i = 0; i < 5; i++) w.pushQuality(i, 10_000);
    w.pushQuality(9, 0);
    expect(w.samples(10_500).quality).toEqual([3, 4]);
    w.push(rec({ at: 10_000 }));
    w.clear();
    expect(w.samples(10_500)).toMatchObject({ requests: 0, quality: [] });
  });
});

describe('isVersionError', () => {
  const table: [number, ErrorCode | undefined, boolean][] = [
    [200, undefined, false],
    [200, 'upstream_stream_broken', true],
    [200, 'drain_aborted', true],
    [400, 'upstream_client_error', false],
    [404, undefined, false],
    [429, undefined, false],
    [499, 'client_closed', false],
    [500, 'upstream_error', true],
    [502, 'upstream_invalid_json', true],
    [503, 'drain_aborted', true],
    [503, 'worker_queue_timeout', true],
    // the gateway's own exhaustion is no version's fault
    [503, 'local_resources_exhausted', false],
    [504, 'upstream_timeout', true],
  ];
  for (const [status, errorCode, expected] of table) {
    it(`${status} ${errorCode ?? ''} → ${expected}`, () => expect(isVersionError({ status, errorCode })).toBe(expected));
  }
});
