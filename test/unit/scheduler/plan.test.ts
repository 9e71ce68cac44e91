// The scheduler's decisions: mins by priority, SLO violations sized by their overshoot, preemption of
// strictly lower priorities only (lowest, then least traffic; below min only for critical), idle and
// comfortable models giving back, the cool-down and starting replicas that stop flapping.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { plan, wantedFor } from '../../../src/scheduler/plan.js';
import { PLAN_SETTINGS, modelLoad } from '../../helpers/scheduler.js';
import { LoadWindow } from '../../../src/scheduler/window.js';

const S = PLAN_SETTINGS;
const m = modelLoad;

const summary = (p: ReturnType<typeof plan>) =>
  p.decisions.map((d) => `${d.action} ${d.model} ${d.from}→${d.to}${d.for ? ` for ${d.for}` : ''}${d.belowMin ? ' below min' : ''}`);

describe('scheduler plan', () => {
  it('gives every model its min in priority order; what does not fit is reported short', () => {
    const p = plan(
      [m('b', 'batch', { replicas: 0, minReplicas: 1 }), m('c', 'critical', { replicas: 0, minReplicas: 2 }), m('s', 'standard', { replicas: 0 })],
      3,
      S,
    );
    expect(Object.fromEntries(p.targets)).toEqual({ b: 0, c: 2, s: 1 });
    expect(p.short).toEqual([{ model: 'b', wanted: 1, got: 0, reason: 'no free GPU and nothing of a lower priority to take' }]);
  });

  it('sizes an SLO violation by its overshoot (not +1), up to max', () => {
    const c = m('c', 'critical', { replicas: 2, ttftP99Ms: 600 });
    expect(wantedFor(c, S)?.want).toBe(8); // 2 × 3 / 0.8 = 7.5
    expect(wantedFor({ ...c, maxReplicas: 5 }, S)?.want).toBe(5);
    expect(wantedFor({ ...c, ttftP99Ms: 210 }, S)?.want).toBe(3); // 2 × 1.05 / 0.8 = 2.6, at least one more
    expect(wantedFor({ ...c, ttftP99Ms: 150 }, S)).toBeUndefined();
  });

  it('a saturated model is sized from its measured capacity: demand over what a replica serves, not its p99', () => {
    // 2 replicas finish 10 req/s but 20 arrive (a queue grows): 20 × 50 tokens = 1,000 tok/s over 250 a replica at 80 %
    const c = m('c', 'critical', { replicas: 2, ttftP99Ms: 600, rps: 10, capacity: { workerTokensPerS: 250, arrivalsPerS: 20, tokensPerRequest: 50 } });
    expect(wantedFor(c, S)).toEqual({
      want: 5,
      why: 'TTFT p99 600 ms > SLO 200 ms: demand 1000 tok/s (20.0 req/s × 50 tok) over 250 tok/s a replica (measured), sized for 80 % → 5',
    });
    expect(wantedFor({ ...c, maxReplicas: 4 }, S)?.want).toBe(4);
    // its sequence slots full (30 in flight of 2 × 16): saturated though nothing queues at the gateway
    const full = { ...c, rps: 20, inFlight: 30, seqsPerReplica: 16, capacity: { workerTokensPerS: 500, arrivalsPerS: 20, tokensPerRequest: 50 } };
    expect(wantedFor(full, S)?.want).toBe(3); // 1,000 / (500 × 0.8) = 2.5, and at least one more
    // keeping up (arrivals = finished, slots free): the latency is not throughput, the overshoot sizes it
    expect(wantedFor({ ...c, rps: 20 }, S)?.want).toBe(8);
    // not measured (no tokens yet): the overshoot too
    expect(wantedFor({ ...c, capacity: { workerTokensPerS: Number.NaN, arrivalsPerS: 20, tokensPerRequest: Number.NaN } }, S)?.want).toBe(8);
    // within its SLO: nothing, whatever the queue
    expect(wantedFor({ ...c, ttftP99Ms: 150 }, S)).toBeUndefined();
  });

  it('a scale signal sizes a model beside its SLO: requests in flight over queue_depth, tokens/s over tokens_per_s; the larger ask wins', () => {
    const q = m('q', 'standard', { slo: {}, replicas: 2, queued: 25, scaleSignal: { queueDepth: 4 } });
    expect(wantedFor(q, S)).toEqual({ want: 7, why: 'scale signal: 25 request(s) in flight > 2 × 4 → 7' });
    expect(wantedFor({ ...q, queued: 8 }, S)).toBeUndefined();
    const t = m('t', 'standard', { slo: {}, replicas: 1, tokensPerS: 900, scaleSignal: { tokensPerS: 400 } });
    expect(wantedFor(t, S)?.want).toBe(3);
    // beside an SLO violation asking for 8 (×3 on 2, at 80 %): the larger wins, both said
    const both = { ...q, slo: { ttftP99Ms: 200 }, ttftP99Ms: 600 };
    expect(wantedFor(both, S)).toEqual({
      want: 8,
      why: 'TTFT p99 600 ms > SLO 200 ms: ×3.00 on 2 replica(s), sized for 80 % → 8; scale signal: 25 request(s) in flight > 2 × 4 → 7',
    });
    // a model with a signal and no SLO gives one back when one fewer carries it at half of what each is sized for
    const calm = m('calm', 'standard', { slo: {}, replicas: 3, queued: 4, scaleSignal: { queueDepth: 4 } });
    expect(summary(plan([calm], 0, S))).toEqual(['scale_down calm 3→2']);
    expect(plan([calm], 0, S).decisions[0]?.reason).toBe('its scale signal fits 2 replica(s) at 50 %: one replica back');
    expect(summary(plan([{ ...calm, queued: 5 }], 0, S))).toEqual([]);
    // with an SLO too, both must be comfortable
    expect(summary(plan([{ ...calm, slo: { ttftP99Ms: 200 }, ttftP99Ms: 150 }], 0, S))).toEqual([]);
    // the config: a positive number each, read into the model's settings; anything else named
    const cfg = parseConfig({ models: [{ name: 'q', versions: [{ id: 'v1' }], scale_signal: { queue_depth: 4, tokens_per_s: 500 } }] });
    expect(cfg.models[0]?.scaleSignal).toEqual({ queueDepth: 4, tokensPerS: 500 });
    expect(() => parseConfig({ models: [{ name: 'q', versions: [{ id: 'v1' }], scale_signal: { queue_depth: 0 } }] })).toThrow(
      /models\[0\]\.scale_signal\.queue_depth/,
    );
    expect(() => parseConfig({ models: [{ name: 'q', versions: [{ id: 'v1' }], scale_signal: { rps: 3 } }] })).toThrow(/scale_signal/);
    expect(() => parseConfig({ models: [{ name: 'q', versions: [{ id: 'v1' }], scale_signal: {} }] })).toThrow(/queue_depth, tokens_per_s or both/);
  });

  it('every decision says what it is expected to change', () => {
    const p = plan([m('c', 'critical', { replicas: 1, rps: 12, ttftP99Ms: 400 }), m('b', 'batch', { replicas: 2, minReplicas: 0, rps: 2 })], 0, S);
    expect(p.decisions.map((d) => `${d.model}: ${d.effect}`)).toEqual([
      'b: 1 GPU(s) freed; 1.0 → 2.0 req/s a replica',
      'b: 1 GPU(s) freed; no replica: its 2.0 req/s refused (503) until it has one again',
      'c: 2 GPU(s) taken; 12.0 → 4.0 req/s a replica',
    ]);
  });

  it('a surge on the critical model takes the batch model first, then the standard one; never the high one', () => {
    const models = [
      m('crit', 'critical', { replicas: 2, minReplicas: 2, ttftP99Ms: 400 }),
      m('high', 'high', { replicas: 2 }),
      m('std', 'standard', { replicas: 2 }),
      m('bat', 'batch', { replicas: 2, minReplicas: 0 }),
    ];
    const p = plan(models, 0, S);
    // 2 × 2 / 0.8 = 5: three more, from batch (both) and standard (one, above its min)
    expect(summary(p)).toEqual(['preempt bat 2→1 for crit', 'preempt bat 1→0 for crit', 'preempt std 2→1 for crit', 'scale_up crit 2→5']);
    expect(p.targets.get('high')).toBe(2);
  });

  it('a high model never takes from the same priority or higher, and below a min only a critical one takes', () => {
    const p = plan(
      [
        m('h1', 'high', { replicas: 1, ttftP99Ms: 400 }),
        m('h2', 'high', { replicas: 3, rps: 0 }),
        m('c', 'critical', { replicas: 2 }),
        m('s', 'standard', { replicas: 1 }),
      ],
      0,
      S,
    );
    expect(summary(p)).toEqual([]);
    expect(p.short[0]).toMatchObject({ model: 'h1', got: 1 });
    const q = plan([m('c', 'critical', { replicas: 1, ttftP99Ms: 400 }), m('s', 'standard', { replicas: 1 })], 0, S);
    expect(summary(q)).toEqual(['preempt s 1→0 for c below min', 'scale_up c 1→2']);
  });

  it('among victims of one priority, the one with the least traffic goes first', () => {
    const p = plan(
      [
        m('c', 'critical', { replicas: 1, ttftP99Ms: 250 }),
        m('busy', 'batch', { replicas: 1, minReplicas: 0, rps: 9 }),
        m('quiet', 'batch', { replicas: 1, minReplicas: 0, rps: 2 }),
      ],
      0,
      S,
    );
    expect(summary(p)).toEqual(['preempt quiet 1→0 for c', 'scale_up c 1→2']);
  });

  it('idle models go to their min and comfortable ones give back one replica, past the cool-down only', () => {
    const models = [
      m('idle', 'standard', { replicas: 3, idleMs: 400_000, rps: 0 }),
      m('calm', 'high', { replicas: 3, ttftP99Ms: 50 }),
      m('fresh', 'high', { replicas: 3, ttftP99Ms: 50, sinceChangeMs: 10_000 }),
    ];
    const p = plan(models, 0, S);
    expect(summary(p)).toEqual(['scale_down calm 3→2', 'scale_down idle 3→1']);
    expect(p.free).toBe(3);
  });

  it('a comfortable model keeps a replica its load still needs (in flight against one fewer × its sequences, with headroom)', () => {
    const busy = m('calm', 'high', { replicas: 3, ttftP99Ms: 50, seqsPerReplica: 4, inFlight: 7 });
    // 2 replicas × 4 sequences × 0.8 = 6.4 < 7: kept
    expect(summary(plan([busy], 0, S))).toEqual([]);
    const p = plan([{ ...busy, inFlight: 6 }], 0, S);
    expect(summary(p)).toEqual(['scale_down calm 3→2']);
    expect(p.decisions[0]?.reason).toBe('TTFT p99 50 ms < 50 % of its SLO 200 ms, 6.0 in flight fit 2 × 4 sequences: one replica back');
  });

  it('a model waiting for replicas it started is not raised again (its p99 still holds the time before them)', () => {
    const p = plan([m('c', 'critical', { replicas: 4, starting: 2, ttftP99Ms: 800 })], 8, S);
    expect(summary(p)).toEqual([]);
    expect(p.short).toEqual([{ model: 'c', wanted: 8, got: 4, reason: '2 replica(s) still starting' }]);
  });

  it('batch models with traffic take what is left, up to max; one preempted this round does not take it back', () => {
    const p = plan([m('bat', 'batch', { replicas: 1, minReplicas: 0, maxReplicas: 3 }), m('idle-bat', 'batch', { replicas: 0, minReplicas: 0, rps: 0 })], 5, S);
    expect(summary(p)).toEqual(['scale_up bat 1→3']);
    expect(p.free).toBe(3);
    // a 2-GPU critical replica takes one 1-GPU batch replica … and another: the second GPU is not handed back
    const q = plan([m('c', 'critical', { replicas: 1, gpusPerReplica: 2, ttftP99Ms: 250 }), m('bat', 'batch', { replicas: 3, minReplicas: 0 })], 1, S);
    expect(summary(q)).toEqual(['preempt bat 3→2 for c', 'scale_up c 1→2']);
    expect(q.free).toBe(0);
  });

  it('preemptions that do not add up to a whole replica are undone (nobody pays for a replica not started)', () => {
    // a 2-GPU critical replica against one 1-GPU batch replica: nothing moves, the shortfall is reported
    const p = plan([m('c', 'critical', { replicas: 1, gpusPerReplica: 2, ttftP99Ms: 600 }), m('b', 'batch', { replicas: 1, minReplicas: 0 })], 0, S);
    expect(summary(p)).toEqual([]);
    expect([p.free, p.short[0]?.model]).toEqual([0, 'c']);
    // a 2-GPU high replica: one standard replica above its min is not enough and no batch one is running
    const q = plan(
      [m('h', 'high', { gpusPerReplica: 2, ttftP99Ms: 300 }), m('s', 'standard', { replicas: 2 }), m('b', 'batch', { replicas: 0, minReplicas: 0 })],
      0,
      S,
    );
    expect(summary(q)).toEqual([]);
    expect(q.targets.get('b')).toBe(0);
  });

  it('a p99 over fewer than min_samples requests is not judged (one slow request adds nothing); a model above its max comes down', () => {
    expect(summary(plan([m('c', 'critical', { ttftP99Ms: 1000, samples: 19 }), m('b', 'batch', { replicas: 3, minReplicas: 0 })], 0, S))).toEqual([]);
    expect(summary(plan([m('s', 'standard', { replicas: 6, maxReplicas: 2 })], 0, S))).toEqual(['scale_down s 6→2']);
  });

  it('frozen models are neither raised, lowered nor preempted', () => {
    const p = plan(
      [m('c', 'critical', { replicas: 1, ttftP99Ms: 400 }), m('b', 'batch', { replicas: 2, minReplicas: 0, frozen: 'a rolling update runs' })],
      0,
      S,
    );
    expect(summary(p)).toEqual([]);
  });
});

describe('scheduler window', () => {
  it('measures what a worker serves over the time it served in the window (one that started late is not diluted), the median worker', () => {
    const w = new LoadWindow(30_000, 10_000);
    // w0 and w1 serve the whole 30 s window, 100 tok/s each; w2 started 10 s before now, 100 tok/s too
    for (let t = 0; t < 30; t++) for (const id of ['w0', 'w1']) w.add(1_000 * (t + 1), 50, 10, 900, 100, id);
    for (let t = 20; t < 30; t++) w.add(1_000 * (t + 1), 50, 10, 900, 100, 'w2');
    // a refused request: no worker, no tokens; it counts as a request, not in the tokens a request asks for
    w.add(30_000, Number.NaN, Number.NaN, 1, 0, '');
    const s = w.stats(30_000);
    expect(s.workerTokensPerS).toBeCloseTo(100, 0);
    expect(s.tokensPerRequest).toBe(100);
    expect(s.samples).toBe(71);
  });
});

// Regressions found by an adversarial review of the capacity-based sizing and the scale signal.
describe('scheduler, regressions of an adversarial review (plan and window)', () => {
  it('TPOT-only SLO + scale signal: a model far over its TPOT SLO is not scaled down for comfort', () => {
    const x = m('x', 'standard', { slo: { tpotP99Ms: 50 }, tpotP99Ms: 150, replicas: 3, queued: 0, scaleSignal: { queueDepth: 4 } });
    const p = plan([x], 0, S);
    expect(p.decisions.map((d) => `${d.action} ${d.from}->${d.to}: ${d.reason}`)).toEqual([]);
  });

  it('window: a worker that stopped mid-window does not dilute what a replica serves (the workers serving now are measured)', () => {
    const w = new LoadWindow(30_000, 10_000);
    // w0 serves the whole window at 100 tok/s; w1, w2 served 100 tok/s for the first 10 s, then were stopped
    for (let t = 0; t < 30; t++) w.add(1_000 * (t + 1), 50, 10, 900, 100, 'w0');
    for (let t = 0; t < 10; t++) for (const id of ['w1', 'w2']) w.add(1_000 * (t + 1), 50, 10, 900, 100, id);
    expect(w.stats(30_000, new Set(['w0'])).workerTokensPerS).toBeCloseTo(100, 0);
  });

  it('window: past windowMaxSamples the rates are over the time the samples cover, not the whole window', () => {
    const w = new LoadWindow(30_000, 4_096);
    // 200 req/s of 10 tokens on one worker for 30 s: 2,000 tok/s
    for (let i = 0; i < 6_000; i++) w.add(i * 5 + 5, 50, 10, 100, 10, 'w0');
    const s = w.stats(30_000);
    expect([Math.round(s.tokensPerS), Math.round(s.workerTokensPerS)]).toEqual([2000, 2000]);
  });

  it('window: a worker whose requests fail (0 tokens) does not drag the median down', () => {
    const w = new LoadWindow(30_000, 10_000);
    for (let t = 0; t < 30; t++) w.add(1_000 * (t + 1), 50, 10, 900, 100, 'ok');
    for (let t = 0; t < 30; t++) w.add(1_000 * (t + 1), Number.NaN, Number.NaN, 5, 0, 'broken');
    expect(w.stats(30_000).workerTokensPerS).toBeCloseTo(100, 0);
  });
});
describe('scheduler, regressions (a replacement starting)', () => {
  it('TPOT-only SLO + signal, a replacement starting: the model over its TPOT SLO is not scaled down', () => {
    const x = m('x', 'standard', { slo: { tpotP99Ms: 50 }, tpotP99Ms: 150, replicas: 3, starting: 1, queued: 0, scaleSignal: { queueDepth: 4 } });
    const p = plan([x], 2, S);
    expect(p.decisions.map((d) => `${d.action} ${d.from}->${d.to}`)).toEqual([]);
  });
});
