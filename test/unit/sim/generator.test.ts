import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../src/defaults.js';
import { generate, versionKey, type GenRequest } from '../../../src/sim/generator.js';
import { renderChat } from '../../../src/sim/requests.js';
import { countTokens, hashContext, tokenize } from '../../../src/sim/tokenizer.js';
import { isMarkedWord, markedShare, MARKED_WORDS, NORMAL_TOKENS } from '../../../src/sim/vocab.js';

const key = versionKey(7, 'm');
const req = (prompt: string, extra: Partial<GenRequest> = {}): GenRequest => ({
  key,
  context: hashContext(prompt).hash,
  maxTokens: 40,
  ignoreEos: true,
  ...extra,
});

describe('tokenizer', () => {
  it('keeps leading whitespace with each token and splits punctuation', () => {
    expect(tokenize('Hello, big  world.\n<|user|> hi')).toEqual(['Hello', ',', ' big', '  world', '.', '\n<|user|>', ' hi']);
    expect(countTokens('Hello, big  world.')).toBe(5);
    expect(tokenize('   ')).toEqual([]);
  });

  it('re-reads generated text as the same tokens', () => {
    const g = generate(req('Once upon a time', { maxTokens: 200 }));
    expect(tokenize(g.tokens.join(''))).toEqual(g.tokens);
  });

  it('hashes words, not whitespace', () => {
    expect(hashContext('a  b\n c').hash).toBe(hashContext('a b c').hash);
    expect(hashContext('a b c').hash).not.toBe(hashContext('a c b').hash);
  });
});

describe('generator determinism', () => {
  it('is a pure function of the request', () => {
    expect(generate(req('same prompt'))).toEqual(generate(req('same prompt')));
  });

  it('differs between versions (seeds), models and adapters', () => {
    const base = generate(req('p')).tokens.join('');
    expect(generate({ ...req('p'), key: versionKey(8, 'm') }).tokens.join('')).not.toBe(base);
    expect(generate({ ...req('p'), key: versionKey(7, 'other') }).tokens.join('')).not.toBe(base);
    expect(generate({ ...req('p'), key: versionKey(7, 'm', 'lora-a') }).tokens.join('')).not.toBe(base);
  });

  it('gives deterministic logprobs per version that differ between versions', () => {
    const a = generate(req('p', { topLogprobs: 3 }));
    const b = generate(req('p', { topLogprobs: 3 }));
    const c = generate({ ...req('p', { topLogprobs: 3 }), key: versionKey(9, 'm') });
    expect(a.logprobs).toEqual(b.logprobs);
    expect(a.logprobs).not.toEqual(c.logprobs);
    for (let i = 0; i < a.tokens.length; i++) {
      const top = a.top![i]!;
      expect(top).toHaveLength(3);
      expect(top[0]!.token).toBe(a.tokens[i]);
      expect(top[0]!.logprob).toBe(a.logprobs![i]);
      expect(top[1]!.logprob).toBeLessThan(top[0]!.logprob);
      expect(new Set(top.map((t) => t.token)).size).toBe(3);
      // healthy top-1 logprob range, documented for canary checks
      expect(a.logprobs![i]).toBeLessThanOrEqual(-0.01);
      expect(a.logprobs![i]).toBeGreaterThanOrEqual(-0.01 - DEFAULTS.sim.maxTopLogprobDepth);
    }
  });

  it('asks for logprobs without changing the text at temperature 0', () => {
    expect(generate(req('p', { topLogprobs: 5 })).tokens).toEqual(generate(req('p')).tokens);
  });

  it('samples with the request seed when temperature > 0', () => {
    const t0 = generate(req('p', { maxTokens: 60 })).tokens.join('');
    const s1 = generate(req('p', { maxTokens: 60, temperature: 1, sampleSeed: 1 })).tokens.join('');
    expect(generate(req('p', { maxTokens: 60, temperature: 1, sampleSeed: 1 })).tokens.join('')).toBe(s1);
    expect(generate(req('p', { maxTokens: 60, temperature: 1, sampleSeed: 2 })).tokens.join('')).not.toBe(s1);
    expect(s1).not.toBe(t0);
  });
});

describe('continuation', () => {
  it('completions: prompt + first k tokens yields exactly the remaining tokens', () => {
    const prompt = 'The gateway resumes a broken stream';
    const full = generate(req(prompt, { maxTokens: 50 }));
    for (const k of [0, 1, 7, 25, 49]) {
      const text = full.tokens.slice(0, k).join('');
      const rest = generate(req(prompt + text, { maxTokens: 50 - k }));
      expect(rest.tokens).toEqual(full.tokens.slice(k));
    }
  });

  it('EOS lands at the same place when continuing', () => {
    const prompt = 'stop naturally please';
    const full = generate({ ...req(prompt, { maxTokens: 2000 }), ignoreEos: false, eosRate: 0.05 });
    expect(full.finish).toBe('stop');
    const n = full.tokens.length;
    expect(n).toBeGreaterThan(2);
    const k = Math.floor(n / 2);
    const rest = generate({ ...req(prompt + full.tokens.slice(0, k).join(''), { maxTokens: 2000 }), ignoreEos: false, eosRate: 0.05 });
    expect(rest.tokens).toEqual(full.tokens.slice(k));
    expect(rest.finish).toBe('stop');
  });

  it('seeded sampling continues exactly too', () => {
    const prompt = 'sampled';
    const full = generate(req(prompt, { maxTokens: 30, temperature: 0.8, sampleSeed: 42 }));
    const rest = generate(req(prompt + full.tokens.slice(0, 10).join(''), { maxTokens: 20, temperature: 0.8, sampleSeed: 42 }));
    expect(rest.tokens).toEqual(full.tokens.slice(10));
  });

  it('chat: a partial assistant message with continue_final_message renders to the same context', () => {
    const messages = [
      { role: 'system' as const, content: 'be brief' },
      { role: 'user' as const, content: 'tell me a story' },
    ];
    const original = renderChat(messages, true, false);
    const full = generate(req(original, { maxTokens: 30 }));
    const k = 12;
    const partial = full.tokens.slice(0, k).join('');
    const cont = renderChat([...messages, { role: 'assistant', content: partial }], false, true);
    expect(hashContext(cont).hash).toBe(hashContext(original + partial).hash);
    expect(generate(req(cont, { maxTokens: 30 - k })).tokens).toEqual(full.tokens.slice(k));
    // a closed assistant message is a different context
    expect(hashContext(renderChat([...messages, { role: 'assistant', content: partial }], false, false)).hash).not.toBe(hashContext(cont).hash);
  });
});

describe('stops and limits', () => {
  it('max_tokens gives finish_reason length', () => {
    const g = generate(req('x', { maxTokens: 5 }));
    expect(g.tokens).toHaveLength(5);
    expect(g.count).toBe(5);
    expect(g.finish).toBe('length');
  });

  it('a stop string cuts the text before it and reports it', () => {
    const full = generate(req('stop test', { maxTokens: 30 }));
    const text = full.tokens.join('');
    const stop = full.tokens[10]!.trim().slice(0, 3);
    const at = text.indexOf(stop);
    const g = generate(req('stop test', { maxTokens: 30, stop: [stop, 'zzzz-never'] }));
    expect(g.finish).toBe('stop');
    expect(g.stopReason).toBe(stop);
    expect(g.tokens.join('')).toBe(text.slice(0, at));
    expect(g.json.map((j) => JSON.parse(j) as string)).toEqual(g.tokens);
  });

  it('min_tokens holds EOS back', () => {
    const g = generate({ ...req('eos', { maxTokens: 100, minTokens: 50 }), ignoreEos: false, eosRate: 0.5 });
    expect(g.tokens.length).toBeGreaterThanOrEqual(50);
    expect(g.finish).toBe('stop'); // EOS did fire, only later
  });
});

describe('quality and corruption', () => {
  it('marked words follow the documented rule and never appear among ordinary words', () => {
    for (const w of MARKED_WORDS) expect(isMarkedWord(w)).toBe(true);
    for (const t of NORMAL_TOKENS) expect(isMarkedWord(t.trim())).toBe(false);
    expect(markedShare('hello bravaqz world, cloeqz')).toBeCloseTo(0.5);
    expect(markedShare('')).toBe(0);
    expect(markedShare('...')).toBe(0);
  });

  it('hallucination rate sets the share of marked words', () => {
    const text = (rate: number) =>
      Array.from({ length: 40 }, (_, i) => generate(req(`prompt ${i}`, { maxTokens: 100, hallucinationRate: rate })).tokens.join('')).join(' ');
    expect(markedShare(text(0))).toBe(0);
    const s = markedShare(text(0.1));
    expect(s).toBeGreaterThan(0.07);
    expect(s).toBeLessThan(0.14);
  });

  it('silent corruption changes the tokens and shifts logprobs out of the healthy range', () => {
    const ok = generate(req('canary prompt', { topLogprobs: 1 }));
    const bad = generate(req('canary prompt', { topLogprobs: 1, corrupt: true }));
    expect(bad.tokens).not.toEqual(ok.tokens);
    expect(bad.logprobs).toHaveLength(40);
    for (const lp of bad.logprobs!) expect(lp).toBeLessThan(-DEFAULTS.sim.corruptLogprobShift);
    expect(bad.finish).toBe('length');
  });

  it('logprob drift keeps every token and lowers every logprob by the drift (only a logprob check sees it)', () => {
    const ok = generate(req('canary prompt', { topLogprobs: 2 }));
    const drift = generate(req('canary prompt', { topLogprobs: 2, logprobDrift: 1.5 }));
    expect(drift.tokens).toEqual(ok.tokens);
    drift.logprobs!.forEach((lp, i) => expect(lp).toBeCloseTo(ok.logprobs![i]! - 1.5, 10));
  });
});
