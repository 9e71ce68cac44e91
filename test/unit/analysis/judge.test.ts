// The canary judge on seeded synthetic telemetry: bad canaries fail, equal ones pass, tiny samples
// wait, and the false-fail rate of equal canaries judged at every look stays at or under alpha.
import { describe, expect, it } from 'vitest';
import { combine, judgeCanary, judgeConfig, statisticalCheckCount, type MetricSamples, type MetricVerdict, type Verdict } from '../../../src/analysis/judge.js';
import { concat, versionSamples } from './canary.js';
import { rng } from './random.js';

const cfg = judgeConfig();
const metric = (v: Verdict, name: string): MetricVerdict => v.metrics.find((m) => m.name === name)!;

describe('judgeCanary: seed scenarios', () => {
  it('fails a canary whose latency is 30 % slower (p99 included) and says why', () => {
    const r = rng(11);
    const v = judgeCanary(versionSamples(r, 2000), versionSamples(r, 200, { latencyScale: 1.3 }), cfg, { index: 0 });
    expect(metric(v, 'latency').outcome).toBe('fail');
    expect(v.outcome).toBe('fail');
    expect(v.action).toBe('rollback');
    expect(v.score).toBeLessThan(cfg.scoreMarginal);
    const check = metric(v, 'latency').checks[0]!;
    expect(check.significant).toBe(true);
    expect(check.effect).toBeGreaterThan(0.2);
    expect(metric(v, 'latency').shift!.relativeToStableMedian).toBeGreaterThan(0.15);
  });

  it('regression: a uniformly 30 % slower canary with few samples fails on its shift even when its p99 reads low', () => {
    // 100 canary samples: their p99 is a noisy estimate (judging on p99 alone caught 5 of these 20);
    // the location shift is not.
    let caught = 0;
    for (let seed = 100; seed < 120; seed++) {
      const r = rng(seed);
      const v = judgeCanary(versionSamples(r, 3000), versionSamples(r, 100, { latencyScale: 1.3 }), cfg, { index: 0 });
      const lat = metric(v, 'latency');
      if (lat.outcome === 'fail') {
        caught++;
        expect(lat.checks[0]!.effect).toBeGreaterThan(0.2);
      }
    }
    expect(caught).toBeGreaterThanOrEqual(16);
  });

  it('fails a canary whose p99 is 30 %+ slower while Mann-Whitney sees no shift (tail test)', () => {
    // 5 % of the canary's requests take 4x as long: the median barely moves, p99 does.
    const r = rng(21);
    const v = judgeCanary(versionSamples(r, 3000), versionSamples(r, 1000, { tailShare: 0.05, tailScale: 4 }), cfg, { index: 0 });
    const lat = metric(v, 'latency');
    expect(lat.checks.find((c) => c.id === 'latency.tail')!.outcome).toBe('fail');
    expect(lat.checks[0]!.outcome).toBe('pass');
    expect(lat.checks[0]!.effect).toBeGreaterThan(0.3);
    expect(lat.outcome).toBe('fail');
    expect(v.outcome).toBe('fail');
  });

  it('fails a canary with a higher error rate (critical metric)', () => {
    const r = rng(12);
    const v = judgeCanary(versionSamples(r, 2000, { errorRate: 0.001 }), versionSamples(r, 200, { errorRate: 0.03 }), cfg, { index: 0 });
    expect(metric(v, 'errors').outcome).toBe('fail');
    expect(v.outcome).toBe('fail');
    expect(v.score).toBe(0);
    expect(v.reasons[0]).toMatch(/critical metric errors failed/);
  });

  it('fails a canary whose hallucination rate is 14 % vs 3 % (judge scores, critical)', () => {
    const r = rng(13);
    const v = judgeCanary(versionSamples(r, 2000, { hallucinationRate: 0.03 }), versionSamples(r, 300, { hallucinationRate: 0.14 }), cfg, { index: 0 });
    const q = metric(v, 'quality');
    expect(q.outcome).toBe('fail');
    expect(q.checks[0]!.effect).toBeGreaterThan(0.05);
    expect(v.outcome).toBe('fail');
  });

  it('passes a canary equal to stable, with every number reported', () => {
    const r = rng(14);
    const v = judgeCanary(versionSamples(r, 2000), versionSamples(r, 200), cfg, { index: 3 });
    expect(v.outcome).toBe('pass');
    expect(v.action).toBe('advance');
    expect(v.score).toBe(100);
    expect(v.metrics.map((m) => m.name)).toEqual(['latency', 'ttft', 'tpot', 'errors', 'quality', 'throughput']);
    const lat = metric(v, 'latency');
    expect(lat.stable.n).toBe(2000);
    expect(lat.canary.p99).toBeGreaterThan(0);
    expect(lat.checks[0]!.pValue).toBeGreaterThan(0);
    expect(v.look).toEqual({ index: 3, method: 'msprt', alpha: 0.05, alphaPerCheck: 0.05 / 12, checks: 12 });
    expect(Object.keys(v.sequentialPValues).sort()).toEqual([
      'errors.absolute',
      'errors.relative',
      'errors.sequential',
      'latency.relative',
      'latency.tail',
      'quality.relative',
      'tpot.absolute',
      'tpot.relative',
      'tpot.tail',
      'ttft.absolute',
      'ttft.relative',
      'ttft.tail',
    ]);
    expect(JSON.parse(JSON.stringify(v))).toMatchObject({
      outcome: 'pass',
      action: 'advance',
      score: 100,
      look: v.look,
      sequentialPValues: v.sequentialPValues,
    });
  });

  it('waits (nodata) on tiny samples', () => {
    const r = rng(15);
    const v = judgeCanary(versionSamples(r, 2000), versionSamples(r, 10), cfg, { index: 0 });
    expect(v.outcome).toBe('nodata');
    expect(v.action).toBe('wait');
    expect(metric(v, 'latency').outcome).toBe('nodata');
  });
});

describe('judgeCanary: policies', () => {
  it('a significant but small slowdown passes (effect within tolerance)', () => {
    const r = rng(16);
    const v = judgeCanary(versionSamples(r, 5000), versionSamples(r, 2000, { latencyScale: 1.1 }), cfg, { index: 0 });
    const c = metric(v, 'latency').checks[0]!;
    expect(c.significant).toBe(true);
    expect(c.outcome).toBe('pass');
  });

  it('a large but not yet significant difference passes at this look (not enough evidence)', () => {
    const r = rng(17);
    const v = judgeCanary(versionSamples(r, 25), versionSamples(r, 25, { ttftScale: 1.25 }), judgeConfig({ ttft: { minSamples: 20 } }), { index: 0 });
    const c = metric(v, 'ttft').checks[0]!;
    expect(c.significant).toBe(false);
    expect(c.outcome).toBe('pass');
  });

  it('absolute TTFT gate: a canary significantly above p99 500 ms fails the gate; stable breaching too makes it inconclusive', () => {
    const r = rng(18);
    const slow = judgeCanary(versionSamples(r, 2000), versionSamples(r, 400, { ttftScale: 2 }), judgeConfig({ ttft: { maxP99Increase: 10 } }), { index: 0 });
    const gate = metric(slow, 'ttft').checks.find((c) => c.kind === 'absolute')!;
    expect(gate.outcome).toBe('fail');
    expect(metric(slow, 'ttft').checks[0]!.outcome).toBe('pass');
    const both = judgeCanary(versionSamples(r, 2000, { ttftScale: 2 }), versionSamples(r, 400, { ttftScale: 2 }), cfg, { index: 0 });
    expect(metric(both, 'ttft').outcome).toBe('inconclusive');
    expect(both.outcome).toBe('inconclusive'); // ttft weight 15 -> score 85: marginal, pause for a human
    expect(both.action).toBe('pause');
  });

  it('NaN and undefined values are removed before judging', () => {
    const r = rng(19);
    const s = versionSamples(r, 500);
    const c = versionSamples(r, 200);
    const dirty = { ...c, latencyMs: [...c.latencyMs, NaN, Infinity], quality: [...c.quality!, NaN] };
    const a = judgeCanary(s, c, cfg, { index: 0 });
    const b = judgeCanary(s, dirty, cfg, { index: 0 });
    expect(metric(b, 'latency').canary.n).toBe(200);
    expect(metric(b, 'latency').checks[0]!.pValue).toBe(metric(a, 'latency').checks[0]!.pValue);
  });

  it('missing quality scores are "not measured" and leave the score; mustHaveData turns them into a failure', () => {
    const r = rng(20);
    const s = versionSamples(r, 1000, { quality: false });
    const c = versionSamples(r, 200, { quality: false });
    const v = judgeCanary(s, c, cfg, { index: 0 });
    expect(metric(v, 'quality').measured).toBe(false);
    expect(v.outcome).toBe('pass');
    const few = judgeCanary(versionSamples(r, 1000), { ...versionSamples(r, 200), quality: [1, 1, 0] }, judgeConfig({ quality: { mustHaveData: true } }), {
      index: 0,
    });
    expect(metric(few, 'quality').outcome).toBe('fail');
    expect(few.outcome).toBe('fail');
    const wait = judgeCanary(versionSamples(r, 1000), { ...versionSamples(r, 200), quality: [1, 1, 0] }, cfg, { index: 0 });
    expect(wait.outcome).toBe('nodata'); // a critical metric that is measured but short of data: wait
    const oneSided = judgeCanary(versionSamples(r, 1000), versionSamples(r, 200, { quality: false }), cfg, { index: 0 });
    expect(metric(oneSided, 'quality')).toMatchObject({ measured: true, outcome: 'nodata' });
    expect(oneSided.outcome).toBe('nodata');
  });

  it('never throws on malformed telemetry: empty, NaN, negative and inconsistent counts', () => {
    const r = rng(22);
    const empty: MetricSamples = { ttftMs: [], tpotMs: [], latencyMs: [], requests: 0, errors: 0, durationS: 0, outputTokens: 0 };
    const junk: MetricSamples = {
      ttftMs: [NaN, Infinity],
      tpotMs: [-Infinity],
      latencyMs: [NaN],
      requests: NaN,
      errors: -3,
      durationS: NaN,
      outputTokens: NaN,
      quality: [NaN],
    };
    for (const [s, c] of [
      [empty, empty],
      [junk, junk],
      [versionSamples(r, 500), junk],
      [junk, versionSamples(r, 500)],
    ] as const) {
      const v = judgeCanary(s, c, cfg, { index: 0 });
      expect(['nodata', 'pass', 'inconclusive']).toContain(v.outcome);
    }
    const tooMany = judgeCanary(versionSamples(r, 500), { ...versionSamples(r, 200), errors: 900 }, cfg, { index: 0 });
    expect(metric(tooMany, 'errors').canary.rate).toBe(1); // errors are capped at requests
    expect(tooMany.outcome).toBe('fail');
  });

  /** A metric's verdict for combine(), and the default bands. */
  const m = (name: MetricVerdict['name'], outcome: MetricVerdict['outcome'], weight: number, critical = false): MetricVerdict => ({
    name,
    outcome,
    weight,
    critical,
    measured: true,
    stable: { n: 1 },
    canary: { n: 1 },
    checks: [],
    reason: outcome,
  });
  const bands = { scorePass: 95, scoreMarginal: 75, nodataWaitShare: 0.5 };

  it('scores like Kayenta: pass / marginal / fail bands and critical override', () => {
    expect(combine([m('latency', 'pass', 30), m('ttft', 'pass', 70)], bands).outcome).toBe('pass');
    expect(combine([m('latency', 'pass', 80), m('ttft', 'fail', 20)], bands)).toMatchObject({ outcome: 'inconclusive', score: 80 });
    expect(combine([m('latency', 'fail', 30), m('ttft', 'pass', 70)], bands)).toMatchObject({ outcome: 'fail', score: 70 });
    expect(combine([m('errors', 'fail', 1, true), m('ttft', 'pass', 99)], bands)).toMatchObject({ outcome: 'fail', score: 0 });
    expect(combine([m('latency', 'nodata', 60), m('ttft', 'pass', 40)], bands).outcome).toBe('nodata');
    expect(combine([m('latency', 'nodata', 40), m('ttft', 'pass', 60)], bands)).toMatchObject({ outcome: 'pass', score: 100 });
  });

  it('a failing metric does not wait for the others once their data could not rescue the verdict', () => {
    // latency (40) failing while ttft and tpot (15 each) have no data: at best 30 / 70 = 43 < 75
    const lost = combine([m('latency', 'fail', 40), m('ttft', 'nodata', 15), m('tpot', 'nodata', 15)], bands);
    expect(lost.outcome).toBe('fail');
    expect(lost.reasons[0]).toMatch(/even if the 2 metric\(s\) without data pass/);
    // while a critical metric has no data too (it waited before)
    expect(combine([m('latency', 'fail', 40), m('ttft', 'pass', 15), m('errors', 'nodata', 15, true)], bands).outcome).toBe('fail');
    // ttft (15) failing while latency (60) has no data: with latency passing the score could be 85, so it waits
    expect(combine([m('ttft', 'fail', 15), m('latency', 'nodata', 60), m('tpot', 'pass', 25)], bands).outcome).toBe('nodata');
  });

  it('the error count decides a clearly failing canary from its first requests, long before the minimum a pass needs', () => {
    const r = rng(2026);
    // stable: 2000 requests, no error; canary: its first 25 requests, every fifth one failing
    const stable = versionSamples(r, 2000, { errorRate: 0 });
    const first = (n: number, errors: number): MetricSamples => ({ ...versionSamples(r, n, { errorRate: 0 }), errors });
    let decidedAt = 0;
    let previous: Record<string, number> = {};
    for (let n = 1; n <= 60 && decidedAt === 0; n++) {
      const v = judgeCanary(stable, first(n, Math.floor(n / 5)), cfg, { index: n, previous });
      previous = v.sequentialPValues;
      if (v.outcome === 'fail') {
        decidedAt = n;
        expect(v.action).toBe('rollback');
        expect(metric(v, 'errors').checks[0]).toMatchObject({ id: 'errors.sequential', test: 'binomial-sequential', outcome: 'fail' });
        // the latency metrics have far too few samples, and the verdict did not wait for them
        expect(metric(v, 'latency').outcome).toBe('nodata');
      } else {
        expect(v.outcome).toBe('nodata');
      }
    }
    expect(decidedAt).toBeGreaterThan(5);
    expect(decidedAt).toBeLessThanOrEqual(25); // minRequests is 100
    // an equal canary's first requests never fail it that way
    const equal = judgeCanary(stable, first(25, 0), cfg, { index: 0 });
    expect(equal.outcome).toBe('nodata');
    expect(metric(equal, 'errors').checks[0]).toMatchObject({ id: 'errors.sequential', outcome: 'pass' });
  });

  it('builds its configuration from DEFAULTS.canary with per-metric overrides', () => {
    expect(cfg).toMatchObject({ alpha: 0.05, sequential: 'msprt', scorePass: 95, scoreMarginal: 75, hlConfLevel: 0.98 });
    expect(cfg.latency).toMatchObject({ weight: 40, maxP99Increase: 0.2, maxP99Ms: null });
    expect(cfg.ttft.maxP99Ms).toBe(500);
    expect(cfg.tpot.maxP99Ms).toBe(50);
    expect(cfg.errors).toMatchObject({ critical: true, maxRelativeIncrease: 0.5, maxRate: 0.001 });
    expect(cfg.quality).toMatchObject({ critical: true, maxDecrease: 0.05 });
    expect(cfg.throughput).toMatchObject({ minRatio: 0.9, weight: 0 });
    const o = judgeConfig({ alpha: 0.01, errors: { maxRate: null }, quality: { mustHaveData: true } });
    expect(o.alpha).toBe(0.01);
    expect(o.errors).toMatchObject({ maxRate: null, critical: true, minRequests: cfg.errors.minRequests });
    expect(o.quality.mustHaveData).toBe(true);
    expect(judgeConfig().errors.maxRate).toBe(0.001); // overrides never leak into the defaults
  });

  it('carries the always-valid p-values as running minima across looks', () => {
    const r = rng(23);
    const s = versionSamples(r, 1000);
    const first = judgeCanary(s, versionSamples(r, 200, { latencyScale: 1.3 }), cfg, { index: 0 });
    const second = judgeCanary(s, versionSamples(r, 200), cfg, { index: 1, previous: first.sequentialPValues });
    expect(second.sequentialPValues['latency.relative']).toBeLessThanOrEqual(first.sequentialPValues['latency.relative']!);
    expect(metric(second, 'latency').checks[0]!.significant).toBe(true);
  });

  it('splits alpha over the enabled statistical checks', () => {
    expect(statisticalCheckCount(cfg)).toBe(12); // errors: the sequential count test, Fisher, the binomial gate
    expect(statisticalCheckCount(judgeConfig({ ttft: { maxP99Ms: null }, quality: { enabled: false } }))).toBe(10);
  });
});

describe('judgeCanary: false-fail rate of equal canaries judged at every look', () => {
  it('stays <= alpha over 120 seeded canaries x 5 looks (and the sequential p-values carry over)', () => {
    const runs = 120;
    const looks = 5;
    let failed = 0;
    let paused = 0;
    for (let run = 0; run < runs; run++) {
      const r = rng(1000 + run);
      let s = versionSamples(r, 150);
      let c = versionSamples(r, 40);
      let previous: Record<string, number> | undefined;
      let anyFail = false;
      for (let look = 0; look < looks; look++) {
        const v = judgeCanary(s, c, cfg, { index: look, previous });
        // running minima: no always-valid p-value rises from one look to the next
        for (const [id, p] of Object.entries(previous ?? {})) expect(v.sequentialPValues[id]).toBeLessThanOrEqual(p);
        previous = v.sequentialPValues;
        if (v.outcome === 'fail') anyFail = true;
        if (v.outcome === 'inconclusive') paused++;
        s = concat(s, versionSamples(r, 150));
        c = concat(c, versionSamples(r, 40));
      }
      if (anyFail) failed++;
    }
    expect(failed / runs).toBeLessThanOrEqual(cfg.alpha);
    expect(paused / (runs * looks)).toBeLessThan(0.2);
  });

  it('the same design catches a 30 % slower canary (the bound above is not met by a judge that never fails)', () => {
    const runs = 20;
    let caught = 0;
    for (let run = 0; run < runs; run++) {
      const r = rng(1000 + run);
      let s = versionSamples(r, 150);
      let c = versionSamples(r, 40, { latencyScale: 1.3 });
      let previous: Record<string, number> | undefined;
      for (let look = 0; look < 5; look++) {
        const v = judgeCanary(s, c, cfg, { index: look, previous });
        previous = v.sequentialPValues;
        if (v.outcome === 'fail') {
          caught++;
          break;
        }
        s = concat(s, versionSamples(r, 150));
        c = concat(c, versionSamples(r, 40, { latencyScale: 1.3 }));
      }
    }
    expect(caught / runs).toBeGreaterThan(0.5);
  });
});
