// Probe sets, pure: reading an engine's answer, recording by majority or reference, checking answers.
import { describe, expect, it } from 'vitest';
import { checkAnswer, parseAnswer, recordProbeSet } from '../../../src/health/probe-set.js';
import type { ProbeAnswer } from '../../../src/health/probe-set.js';
import type { GlidepathError } from '../../../src/errors.js';

const settings = { minMargin: 0.05, minTokens: 2, logprobTolerance: 0.2 };
const P = [{ prompt: 'p1', maxTokens: 4 }];

function ans(tokens: string[], logprobs: number[] | null = tokens.map(() => -0.5), margins: number[] | null = tokens.map(() => 1)): ProbeAnswer {
  return { tokens, logprobs, margins };
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as GlidepathError).code;
  }
  return 'no error';
}

describe('parseAnswer', () => {
  it('reads tokens, their logprobs and the lead over the runner-up from a completion with logprobs', () => {
    const body = JSON.stringify({
      choices: [
        {
          text: ' 7, 11',
          logprobs: {
            tokens: [' 7', ',', ' 11'],
            token_logprobs: [-0.1, -0.3, -0.2],
            top_logprobs: [{ ' 7': -0.1, ' 8': -2.1 }, { ',': -0.3 }, { ' 11': -0.2, ' 13': -0.25 }],
          },
        },
      ],
    });
    const a = parseAnswer(body) as ProbeAnswer;
    expect(a.tokens).toEqual([' 7', ',', ' 11']);
    expect(a.logprobs).toEqual([-0.1, -0.3, -0.2]);
    expect(a.margins?.map((m) => +m.toFixed(2))).toEqual([2, Infinity, 0.05]);
  });

  it('an engine without logprobs gives its text as the one thing to compare', () => {
    expect(parseAnswer(JSON.stringify({ choices: [{ text: 'Paris' }] }))).toEqual({ tokens: ['Paris'], logprobs: null, margins: null });
  });

  it('names what is wrong with a body that is no completion', () => {
    expect(parseAnswer('not json')).toMatch(/not JSON/);
    expect(parseAnswer('{"choices":[]}')).toMatch(/no choices\[0\]\.text/);
  });
});

describe('recordProbeSet', () => {
  it('takes the majority answer and names the dissenter', () => {
    const answers = new Map([
      ['w0', [ans(['a', 'b', 'c'], [-0.1, -0.2, -0.3])]],
      ['w1', [ans(['a', 'b', 'c'], [-0.12, -0.2, -0.3])]],
      ['w2', [ans(['x', 'y', 'z'])]],
    ]);
    const r = recordProbeSet({ prompts: P, answers, settings, now: 5 });
    expect(r.set.probes[0]?.tokens).toEqual(['a', 'b', 'c']);
    expect(r.set.basis).toBe('majority');
    expect(r.set.from).toEqual(['w0', 'w1']);
    expect(r.dissenters.map((d) => d.worker)).toEqual(['w2']);
    // the range covers both agreeing workers ± the tolerance, and never above 0
    expect(r.set.probes[0]?.logprobs?.[0]).toEqual({ min: -0.12 - 0.2, max: 0 });
    expect(r.set.probes[0]?.logprobs?.[0]?.max).toBeLessThanOrEqual(0);
  });

  it('two workers that disagree: no majority, nobody can tell (probe_disagreement)', () => {
    const answers = new Map([
      ['w0', [ans(['a', 'b'])]],
      ['w1', [ans(['x', 'y'])]],
    ]);
    expect(code(() => recordProbeSet({ prompts: P, answers, settings, now: 0 }))).toBe('probe_disagreement');
  });

  it('keeps tokens only up to the first near-tie (a healthy engine may answer otherwise past it)', () => {
    const answers = new Map([
      ['w0', [ans(['a', 'b', 'c', 'd'], null, [1, 1, 0.01, 1])]],
      ['w1', [ans(['a', 'b', 'X', 'Y'], null, [1, 1, 0.02, 1])]],
    ]);
    const r = recordProbeSet({ prompts: P, answers, settings, now: 0 });
    expect(r.set.probes[0]?.tokens).toEqual(['a', 'b']);
    expect(r.dissenters).toEqual([]);
  });

  it('a prompt with too few reproducible tokens is left out and says why; none left is probe_set_empty', () => {
    const two = [...P, { prompt: 'p2', maxTokens: 4 }];
    const answers = new Map([['w0', [ans(['a', 'b']), ans(['q', 'r'], null, [0.01, 1])]]]);
    const r = recordProbeSet({ prompts: two, answers, settings, now: 0 });
    expect(r.set.probes.map((p) => p.prompt)).toEqual(['p1']);
    expect(r.set.skipped[0]).toMatchObject({ prompt: 'p2' });
    const none = new Map([['w0', [ans(['q', 'r'], null, [0.01, 1])]]]);
    expect(code(() => recordProbeSet({ prompts: P, answers: none, settings, now: 0 }))).toBe('probe_set_empty');
  });

  it('one worker is checked against the configured reference: one that answers otherwise dissents', () => {
    const reference = [{ prompt: 'p1', tokens: ['a', 'b'] }];
    const good = recordProbeSet({ prompts: P, answers: new Map([['w0', [ans(['a', 'b', 'c'])]]]), reference, settings, now: 0 });
    expect(good.set.basis).toBe('reference');
    expect(good.set.probes[0]?.tokens).toEqual(['a', 'b']);
    expect(good.dissenters).toEqual([]);
    const bad = recordProbeSet({ prompts: P, answers: new Map([['w0', [ans(['a', 'x'])]]]), reference, settings, now: 0 });
    expect(bad.dissenters.map((d) => d.worker)).toEqual(['w0']);
  });

  it('one worker and no reference: recorded as `single` (nothing checked it)', () => {
    expect(recordProbeSet({ prompts: P, answers: new Map([['w0', [ans(['a', 'b'])]]]), settings, now: 0 }).set.basis).toBe('single');
  });

  it('workers that did not answer: probe_record_failed naming them', () => {
    const answers = new Map([
      ['w0', ['timeout: no answer within 10 ms']],
      ['w1', ['error: answered 500']],
    ]);
    expect(code(() => recordProbeSet({ prompts: P, answers, settings, now: 0 }))).toBe('probe_record_failed');
  });
});

describe('checkAnswer', () => {
  const e = {
    prompt: 'p',
    maxTokens: 4,
    tokens: ['a', 'b'],
    logprobs: [
      { min: -1, max: 0 },
      { min: -2, max: -1 },
    ],
  };
  it('passes the recorded tokens as a prefix with logprobs in range', () => {
    expect(checkAnswer(e, ans(['a', 'b', 'more'], [-0.5, -1.5, -9]))).toEqual({ ok: true });
  });
  it('a different token is token_mismatch naming it', () => {
    expect(checkAnswer(e, ans(['a', 'x'], [-0.5, -1.5]))).toMatchObject({
      ok: false,
      reason: 'token_mismatch',
      detail: expect.stringContaining('token 2 is "x"'),
    });
  });
  it('a shorter answer is token_mismatch', () => {
    expect(checkAnswer(e, ans(['a'], [-0.5]))).toMatchObject({ ok: false, reason: 'token_mismatch' });
  });
  it('right tokens with a logprob out of range is logprob_drift', () => {
    expect(checkAnswer(e, ans(['a', 'b'], [-0.5, -4]))).toMatchObject({ ok: false, reason: 'logprob_drift' });
  });
  it('an engine without logprobs is compared on text', () => {
    const t = { prompt: 'p', maxTokens: 4, tokens: ['Paris is'], logprobs: null };
    expect(checkAnswer(t, { tokens: ['Paris is big'], logprobs: null, margins: null })).toEqual({ ok: true });
    expect(checkAnswer(t, { tokens: ['London'], logprobs: null, margins: null })).toMatchObject({ ok: false, reason: 'token_mismatch' });
  });
});
