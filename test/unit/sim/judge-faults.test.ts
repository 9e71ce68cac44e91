import { describe, expect, it } from 'vitest';
import { judgePair, judgeReply, judgeScore, TIE_MARGIN } from '../../../src/sim/judge.js';
import { FaultState } from '../../../src/sim/faults.js';
import { fromSnakeFaults, toSnakeFaults } from '../../../src/config/sim-faults.js';
import { checkOptions, faultSchema, resolveOptions } from '../../../src/sim/options.js';
import { generate, versionKey } from '../../../src/sim/generator.js';
import { hashContext } from '../../../src/sim/tokenizer.js';
import { GlidepathError } from '../../../src/errors.js';

const sample = (rate: number, i: number) =>
  generate({ key: versionKey(1, 'm'), context: hashContext(`q${i}`).hash, maxTokens: 80, ignoreEos: true, hallucinationRate: rate }).tokens.join('');

describe('judge', () => {
  it('scores are deterministic, on 1..10 with one decimal, and fall with marked words', () => {
    const clean = Array.from({ length: 30 }, (_, i) => judgeScore(sample(0, i)));
    const bad = Array.from({ length: 30 }, (_, i) => judgeScore(sample(0.1, i)));
    for (const s of [...clean, ...bad]) {
      expect(s).toBeGreaterThanOrEqual(1);
      expect(s).toBeLessThanOrEqual(10);
      expect(Math.round(s * 10) / 10).toBe(s);
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean(clean)).toBeGreaterThan(8.5);
    expect(mean(bad)).toBeLessThan(4.5);
    expect(new Set(clean).size).toBeGreaterThan(5); // realistic spread
    expect(judgeScore(sample(0, 3))).toBe(judgeScore(sample(0, 3)));
  });

  it('pointwise and pairwise replies follow the documented format', () => {
    const a = sample(0, 1);
    const b = sample(0.2, 2);
    expect(JSON.parse(judgeReply(`Rate this.\n<response>${a}</response>`))).toEqual({ score: judgeScore(a) });
    const v = JSON.parse(judgeReply(`<response_a>${a}</response_a>\n<response_b>${b}</response_b>`)) as Record<string, unknown>;
    expect(v).toEqual({ winner: 'A', score_a: judgeScore(a), score_b: judgeScore(b) });
    expect(judgePair(a, a).winner).toBe('tie');
    expect(TIE_MARGIN).toBe(0.5);
    expect(() => judgeReply('no tags here')).toThrow(GlidepathError);
  });
});

describe('faults', () => {
  it('error rate is drawn deterministically from (seed, request number)', () => {
    const run = (seed: number) => {
      const f = new FaultState({ errorRate: 0.3, errorStatus: 503 }, seed, () => {});
      return Array.from({ length: 1000 }, () => f.decide().kind);
    };
    const a = run(1);
    expect(run(1)).toEqual(a);
    const errors = a.filter((k) => k === 'error').length;
    expect(errors).toBeGreaterThan(250);
    expect(errors).toBeLessThan(350);
  });

  it('counts every injected fault and applies precedence exit > hang > error > serve', () => {
    const seen: string[] = [];
    const f = new FaultState({ processExit: true, hang: true }, 0, (k) => seen.push(k));
    expect(f.decide().kind).toBe('process_exit');
    f.set({ hang: true, errorRate: 1 });
    expect(f.decide().kind).toBe('hang');
    f.set({ errorRate: 1 });
    expect(f.decide()).toEqual({ kind: 'error', status: 500 });
    f.set({ latencyMultiplier: 2, corrupt: true, crashAfterTokens: 3 });
    expect(f.decide()).toEqual({ kind: 'serve', crashAfterTokens: 3, latencyMultiplier: 2, corrupt: true, logprobDrift: 0 });
    f.clear();
    expect(f.decide()).toEqual({ kind: 'serve', crashAfterTokens: undefined, latencyMultiplier: 1, corrupt: false, logprobDrift: 0 });
    expect(seen).toEqual(['process_exit', 'hang', 'error', 'latency', 'corrupt']);
    expect(f.counts.error).toBe(1);
  });

  it('a flapping worker errs in every other period of flap_ms, by the clock it is given', () => {
    const f = new FaultState({ flapMs: 1000, errorStatus: 503 }, 0, () => {});
    const at = (ms: number) => f.decide(ms).kind;
    expect([at(0), at(999), at(1000), at(1999), at(2000), at(3500)]).toEqual(['serve', 'serve', 'error', 'error', 'serve', 'error']);
    expect(f.decide(1000)).toEqual({ kind: 'error', status: 503 });
    expect(f.counts.flap).toBe(4);
  });

  it('logprob drift serves with the shift and counts it', () => {
    const f = new FaultState({ logprobDrift: 2.5 }, 0, () => {});
    expect(f.decide()).toMatchObject({ kind: 'serve', corrupt: false, logprobDrift: 2.5 });
    expect(f.counts.drift).toBe(1);
  });

  it('the admin schema is snake_case, strict, and round-trips to camelCase', () => {
    const r = faultSchema.safeParse({ error_rate: 0.5, crash_after_tokens: 4, process_exit: false });
    expect(r.success).toBe(true);
    expect(fromSnakeFaults(r.data!)).toEqual({ errorRate: 0.5, crashAfterTokens: 4, processExit: false });
    expect(toSnakeFaults({ latencyMultiplier: 2 })).toEqual({ latency_multiplier: 2 });
    expect(faultSchema.safeParse({ errorRate: 0.5 }).success).toBe(false);
    expect(faultSchema.safeParse({ error_rate: 2 }).success).toBe(false);
    expect(faultSchema.safeParse({ error_status: 200 }).success).toBe(false);
  });
});

describe('options', () => {
  it('fills defaults and names every bad value', () => {
    const o = resolveOptions({});
    expect(o.model).toBe('sim-model');
    expect(checkOptions({ ...o, maxNumSeqs: 0, jitter: 2, faults: { errorRate: 3 } })).toEqual([
      'jitter: expected a number from 0 to 1, got 2',
      'maxNumSeqs: expected a positive integer, got 0',
      expect.stringContaining('faults.error_rate'),
    ]);
    expect(() => resolveOptions({ port: -1 })).toThrow(/port/);
  });
});

describe('version seeds', () => {
  it('without a seed, a version gets one derived from its id; an explicit seed wins', () => {
    const a = resolveOptions({ version: 'v1' });
    const b = resolveOptions({ version: 'v2' });
    expect(a.seed).not.toBe(b.seed);
    expect(resolveOptions({ version: 'v1' }).seed).toBe(a.seed);
    expect(resolveOptions({ version: 'v1', seed: 5 }).seed).toBe(5);
    expect(Number.isInteger(a.seed) && a.seed >= 0).toBe(true);
  });
});
