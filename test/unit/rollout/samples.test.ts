// The samples a canary is judged on: both versions' records, and the canary's cold start left out.
import { describe, expect, it } from 'vitest';
import { PairSamples } from '../../../src/rollout/samples.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { record } from '../../helpers/records.js';

const rec = (version: string, latencyMs: number, over: Partial<RequestRecord> = {}): RequestRecord => record({ version, latencyMs, stream: false, ...over });

describe('PairSamples', () => {
  it("leaves out the candidate's first records (shadow copies included) and keeps every stable one", () => {
    const s = new PairSamples('m', 'v1', 'v2', 100, 3);
    // the canary's cold start: three slow answers, then normal ones
    s.record(rec('v2', 40, { shadow: true }));
    s.record(rec('v1', 10));
    s.record(rec('v2', 38));
    s.record(rec('v2', 36, { shadow: true }));
    for (let i = 0; i < 5; i++) s.record(rec('v2', 10 + i));
    s.record(rec('v1', 11));
    s.record(rec('v3', 99));
    s.record(rec('v2', 99, { model: 'other' }));
    expect(s.skippedB).toBe(3);
    expect(s.b.toMetricSamples().latencyMs).toEqual([10, 11, 12, 13, 14]);
    expect(s.a.toMetricSamples().latencyMs).toEqual([10, 11]);
  });

  it('leaves nothing out by default (experiments compare both arms from the first request)', () => {
    const s = new PairSamples('m', 'a', 'b', 100);
    s.record(rec('b', 40));
    expect(s.b.requests).toBe(1);
    expect(s.skippedB).toBe(0);
  });
});
