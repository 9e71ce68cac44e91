// Regressions found by an adversarial review of the capacity-based sizing and the scale signal: a
// TPOT-only SLO judged comfortable, per-worker rates diluted by stopped or failing workers, rates
// divided by the whole window when the sample bound cut it short.
import { describe, expect, it } from 'vitest';
import { plan } from '../../../src/scheduler/plan.js';
import type { ModelLoad, PlanSettings } from '../../../src/scheduler/plan.js';
import { LoadWindow } from '../../../src/scheduler/window.js';

const S: PlanSettings = { idleAfterMs: 300_000, cooldownMs: 60_000, relaxBelow: 0.5, headroom: 0.8, minSamples: 20 };
function m(model: string, priority: ModelLoad['priority'], o: Partial<ModelLoad> = {}): ModelLoad {
  return {
    model,
    priority,
    slo: { ttftP99Ms: 200 },
    minReplicas: 1,
    maxReplicas: 8,
    gpusPerReplica: 1,
    replicas: 1,
    starting: 0,
    ttftP99Ms: 100,
    tpotP99Ms: 20,
    rps: 1,
    inFlight: 1,
    samples: 100,
    idleMs: 0,
    sinceChangeMs: Infinity,
    ...o,
  };
}

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
