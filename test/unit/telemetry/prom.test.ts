import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ArrayCounter, ArrayHistogram } from '../../../src/telemetry/prom.js';

describe('array-backed Prometheus metrics', () => {
  it('render exactly as prom-client renders the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const opts = { name: 'x_seconds', help: 'Some "quoted" help\\ with a backslash.', labelNames: ['model', 'version'] as const, buckets: [0.01, 0.1, 0.5, 1] };
    const h = new ArrayHistogram({ ...opts, registers: [ours] });
    const ph = new Histogram({ ...opts, registers: [theirs] });
    const copts = { name: 'y_total', help: 'Things.', labelNames: ['model', 'code'] as const };
    const c = new ArrayCounter({ ...copts, registers: [ours] });
    const pc = new Counter({ ...copts, registers: [theirs] });
    const obs: [string, string, number][] = [
      ['m', 'v1', 0.005],
      ['m', 'v1', 0.01],
      ['m', 'v1', 0.7],
      ['m', 'v1', 3],
      ['m', 'v2"\\\n', 0.2],
    ];
    for (const [m, v, x] of obs) {
      h.labels(m, v).observe(x);
      ph.labels(m, v).observe(x);
      c.labels(m, '200').inc(2);
      pc.labels(m, '200').inc(2);
    }
    c.labels('m', '503').inc();
    pc.labels('m', '503').inc();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('sorts its buckets, observes n at once, ignores NaN, counts values above the last bound only in +Inf', async () => {
    const r = new Registry();
    const h = new ArrayHistogram({ name: 'z', help: 'z', labelNames: ['a'], buckets: [2, 1], registers: [r] });
    const child = h.labels('x');
    child.observe(1.5, 3);
    child.observe(NaN);
    child.observe(10);
    expect(child.count).toBe(4);
    expect(child.sum).toBe(14.5);
    const text = await r.metrics();
    expect(text).toContain('z_bucket{le="1",a="x"} 0');
    expect(text).toContain('z_bucket{le="2",a="x"} 3');
    expect(text).toContain('z_bucket{le="+Inf",a="x"} 4');
  });

  it('keeps one child per label set and refuses wrong label counts and negative increments', () => {
    const c = new ArrayCounter({ name: 'c_total', help: 'c', labelNames: ['a', 'b'], registers: [] });
    expect(c.labels('1', '2')).toBe(c.labels('1', '2'));
    expect(c.labels('1', '2')).not.toBe(c.labels('12', ''));
    expect(() => c.labels('1')).toThrow(/expected 2 label values \(a, b\), got 1/);
    expect(() => c.labels('1', '2').inc(-1)).toThrow(/must be >= 0/);
    expect(() => c.labels('1', '2').inc(NaN)).toThrow(/must be >= 0/);
    expect(() => new ArrayHistogram({ name: 'h', help: 'h', labelNames: [], buckets: [1, Infinity], registers: [] })).toThrow(/finite/);
  });
});
