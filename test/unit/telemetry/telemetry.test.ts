// Telemetry: records reach the window, Prometheus and subscribers; the exposition is valid.
import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';
import { record } from '../../helpers/records.js';

const rec = (over: Partial<RequestRecord> = {}): RequestRecord =>
  record({ ttftMs: 120, tpotMs: 15, itlMs: [15, 15], latencyMs: 1500, promptTokens: 7, completionTokens: 3, at: Date.now(), ...over });

describe('Telemetry', () => {
  it('records into the version window, Prometheus and subscribers', async () => {
    const t = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
    const vt = t.forVersion('m', 'v1');
    expect(t.forVersion('m', 'v1')).toBe(vt);
    const seen: RequestRecord[] = [];
    const off = t.subscribe((r) => seen.push(r));
    t.record(vt, rec());
    t.record(vt, rec({ status: 502, errorCode: 'upstream_error', ttftMs: NaN, tpotMs: NaN, promptTokens: 0, completionTokens: 0 }));
    off();
    t.record(vt, rec());
    expect(seen).toHaveLength(2);
    expect(t.stats('m', 'v1').requests).toBe(3);
    expect(t.stats('m', 'v1').errors).toBe(1);
    // in-flight is read from its source (the pool) at scrape time
    let inflight = 3;
    vt.metrics.trackInflight(() => inflight);
    const text = await t.metrics.registry.metrics();
    expect(text).toContain('glidepath_requests_total{model="m",version="v1",code="200"} 2');
    expect(text).toContain('glidepath_requests_total{model="m",version="v1",code="502"} 1');
    expect(text).toContain('glidepath_tokens_total{model="m",version="v1",kind="prompt"} 14');
    expect(text).toContain('glidepath_tokens_total{model="m",version="v1",kind="completion"} 6');
    // NaN TTFT is not observed
    expect(text).toContain('glidepath_time_to_first_token_seconds_count{model="m",version="v1"} 2');
    expect(text).toContain('glidepath_time_to_first_token_seconds_sum{model="m",version="v1"} 0.24');
    expect(text).toContain('glidepath_request_duration_seconds_count{model="m",version="v1"} 3');
    expect(text).toContain('glidepath_time_per_output_token_seconds_bucket{le="0.02",model="m",version="v1"} 2');
    expect(text).toContain('glidepath_inflight_requests{model="m",version="v1"} 3');
    inflight = 0;
    expect(await t.metrics.registry.metrics()).toContain('glidepath_inflight_requests{model="m",version="v1"} 0');
  });

  it('a subscriber that throws does not stop the others or the request path', () => {
    const t = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
    const vt = t.forVersion('m', 'v1');
    let after = 0;
    t.subscribe(() => {
      throw new Error('listener bug');
    });
    t.subscribe(() => after++);
    expect(() => t.record(vt, rec())).not.toThrow();
    expect(after).toBe(1);
    expect(t.stats('m', 'v1').requests).toBe(1);
  });

  it('quality scores and window reset', () => {
    const t = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
    t.recordQuality('m', 'v1', 0.8);
    t.record(t.forVersion('m', 'v1'), rec());
    expect(t.samples('m', 'v1').quality).toEqual([0.8]);
    t.resetWindow('m', 'v1');
    expect(t.samples('m', 'v1').requests).toBe(0);
  });

  it('each GatewayMetrics has its own registry (two data planes in one process do not collide)', async () => {
    const a = new GatewayMetrics();
    const b = new GatewayMetrics();
    a.routeWeight.labels('m', 'v1').set(0.5);
    expect(await b.registry.metrics()).not.toContain('version="v1"');
  });
});
