import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, startSimFleet, type SimHandle } from '../../../src/sim/index.js';
import { chat, chunks, get, post, sseData, streamedText } from './helpers.js';

let sim: SimHandle;
let twins: SimHandle[];
let other: SimHandle;

beforeAll(async () => {
  sim = await startSim({ port: 0, seed: 1 });
  twins = await startSimFleet(2, { portBase: 0, seed: 5, version: 'v5' });
  other = await startSim({ port: 0, seed: 6, version: 'v6' });
});
afterAll(async () => {
  await Promise.all([sim, ...twins, other].map((h) => h.close()));
});

describe('chat completions', () => {
  it('answers non-streaming in vLLM shape with real usage', async () => {
    const r = await post(sim.url, '/v1/chat/completions', chat('hello there', { max_tokens: 12, ignore_eos: true }));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json');
    const b = r.json;
    expect(b.id).toMatch(/^chatcmpl-/);
    expect(b.object).toBe('chat.completion');
    expect(b.model).toBe('sim-model');
    expect(b.choices).toHaveLength(1);
    expect(b.choices[0].message.role).toBe('assistant');
    expect(b.choices[0].finish_reason).toBe('length');
    // template: "<|user|> hello there <|end|>\n<|assistant|>" = 5 tokens
    expect(b.usage).toEqual({ prompt_tokens: 5, completion_tokens: 12, total_tokens: 17, prompt_tokens_details: null });
  });

  it('streams role chunk, token deltas, finish_reason on the last token, usage, [DONE]', async () => {
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chat('hello there', { max_tokens: 6, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
    );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const data = sseData(r.text);
    expect(data.at(-1)).toBe('[DONE]');
    const cs = chunks(r.text);
    expect(cs).toHaveLength(1 + 6 + 1);
    expect(cs[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    for (const c of cs) {
      expect(c.object).toBe('chat.completion.chunk');
      expect(c.id).toBe(cs[0].id);
    }
    for (const c of cs.slice(1, 6)) expect(c.choices[0]).toMatchObject({ index: 0, logprobs: null, finish_reason: null });
    expect(cs[6].choices[0]).toMatchObject({ finish_reason: 'length', stop_reason: null });
    expect(cs[7].choices).toEqual([]);
    expect(cs[7].usage.completion_tokens).toBe(6);
    const whole = await post(sim.url, '/v1/chat/completions', chat('hello there', { max_tokens: 6, ignore_eos: true }));
    expect(streamedText(r.text)).toBe(whole.json.choices[0].message.content);
  });

  it('omits the usage chunk unless asked', async () => {
    const r = await post(sim.url, '/v1/chat/completions', chat('x', { max_tokens: 3, ignore_eos: true, stream: true }));
    expect(chunks(r.text).every((c) => c.usage === undefined && c.choices.length === 1)).toBe(true);
  });

  it('stream_options.continuous_usage_stats puts running usage in every chunk', async () => {
    const r = await post(
      sim.url,
      '/v1/chat/completions',
      chat('count', { max_tokens: 4, ignore_eos: true, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }),
    );
    const cs = chunks(r.text);
    expect(cs).toHaveLength(1 + 4 + 1);
    expect(cs.slice(0, 5).map((c) => c.usage.completion_tokens as number)).toEqual([0, 1, 2, 3, 4]);
    expect(cs[4].usage).toEqual({ prompt_tokens: 4, total_tokens: 8, completion_tokens: 4 });
    expect(cs[5].choices).toEqual([]);
    const plain = await post(sim.url, '/v1/chat/completions', chat('count', { max_tokens: 4, ignore_eos: true, stream: true }));
    expect(streamedText(r.text)).toBe(streamedText(plain.text));
  });

  it('returns logprobs and top_logprobs deterministically', async () => {
    const body = chat('logprobs please', { max_tokens: 4, ignore_eos: true, logprobs: true, top_logprobs: 3 });
    const a = await post(sim.url, '/v1/chat/completions', body);
    const b = await post(sim.url, '/v1/chat/completions', body);
    const content = a.json.choices[0].logprobs.content;
    expect(content).toHaveLength(4);
    expect(content[0].top_logprobs).toHaveLength(3);
    expect(content[0].bytes).toEqual([...Buffer.from(content[0].token as string)]);
    expect((content as { token: string }[]).map((c) => c.token).join('')).toBe(a.json.choices[0].message.content);
    expect(b.json.choices[0].logprobs).toEqual(a.json.choices[0].logprobs);
    const s = await post(sim.url, '/v1/chat/completions', { ...body, stream: true });
    const streamed = chunks(s.text)
      .slice(1)
      .flatMap((c) => c.choices[0].logprobs.content as unknown[]);
    expect(streamed).toEqual(content);
  });

  it('stops at a stop string with stop_reason', async () => {
    const full = await post(sim.url, '/v1/chat/completions', chat('stop here', { max_tokens: 20, ignore_eos: true }));
    const text = full.json.choices[0].message.content as string;
    const stop = text.split(' ')[5]!;
    const r = await post(sim.url, '/v1/chat/completions', chat('stop here', { max_tokens: 20, ignore_eos: true, stop }));
    expect(r.json.choices[0].finish_reason).toBe('stop');
    expect(r.json.choices[0].stop_reason).toBe(stop);
    expect(r.json.choices[0].message.content).toBe(text.slice(0, text.indexOf(stop)));
    const s = await post(sim.url, '/v1/chat/completions', chat('stop here', { max_tokens: 20, ignore_eos: true, stop, stream: true }));
    expect(streamedText(s.text)).toBe(text.slice(0, text.indexOf(stop)));
    expect(chunks(s.text).at(-1).choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: stop });
  });
});

describe('completions', () => {
  it('answers non-streaming and streaming with choices[0].text', async () => {
    const body = { model: 'sim-model', prompt: 'Once upon a time', max_tokens: 5, temperature: 0, ignore_eos: true };
    const r = await post(sim.url, '/v1/completions', body);
    expect(r.json.object).toBe('text_completion');
    expect(r.json.id).toMatch(/^cmpl-/);
    expect(r.json.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });
    const s = await post(sim.url, '/v1/completions', { ...body, stream: true });
    const cs = chunks(s.text);
    expect(cs).toHaveLength(5);
    expect(cs[0].choices[0]).toMatchObject({ index: 0, logprobs: null, finish_reason: null, stop_reason: null });
    expect(cs[4].choices[0].finish_reason).toBe('length');
    expect(streamedText(s.text)).toBe(r.json.choices[0].text);
  });

  it('returns completions-style logprobs', async () => {
    const r = await post(sim.url, '/v1/completions', { model: 'sim-model', prompt: 'abc', max_tokens: 3, temperature: 0, ignore_eos: true, logprobs: 2 });
    const lp = r.json.choices[0].logprobs;
    expect((lp.tokens as string[]).join('')).toBe(r.json.choices[0].text);
    expect(lp.token_logprobs).toHaveLength(3);
    expect(lp.text_offset[0]).toBe(0);
    expect(Object.keys(lp.top_logprobs[0] as object).length).toBeGreaterThanOrEqual(2);
  });
});

describe('determinism across workers and versions', () => {
  it('two workers of one version agree; another version differs', async () => {
    const body = chat('compare versions', { max_tokens: 30, ignore_eos: true, logprobs: true, top_logprobs: 2 });
    const [a, b, c] = await Promise.all([...twins, other].map((h) => post(h.url, '/v1/chat/completions', body)));
    expect(a!.json.choices[0].message.content).toBe(b!.json.choices[0].message.content);
    expect(a!.json.choices[0].logprobs).toEqual(b!.json.choices[0].logprobs);
    expect(c!.json.choices[0].message.content).not.toBe(a!.json.choices[0].message.content);
  });

  it('temperature > 0 with a seed is reproducible; without, it varies', async () => {
    const seeded = chat('sample', { max_tokens: 30, ignore_eos: true, temperature: 1, seed: 3 });
    const [a, b] = await Promise.all(twins.map((h) => post(h.url, '/v1/chat/completions', seeded)));
    expect(a!.json.choices[0].message.content).toBe(b!.json.choices[0].message.content);
    const texts = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const r = await post(sim.url, '/v1/chat/completions', chat('sample', { max_tokens: 30, ignore_eos: true, temperature: 1 }));
      texts.add(r.json.choices[0].message.content as string);
    }
    expect(texts.size).toBeGreaterThan(1);
  });

  it('a broken chat stream resumes on another worker with continue_final_message', async () => {
    const [w1, w2] = twins;
    const messages = [{ role: 'user', content: 'resume me' }];
    const full = await post(w1!.url, '/v1/chat/completions', { model: 'sim-model', messages, temperature: 0, max_tokens: 40 });
    const text = full.json.choices[0].message.content as string;
    const total = full.json.usage.completion_tokens as number;
    const s = await post(w1!.url, '/v1/chat/completions', { model: 'sim-model', messages, temperature: 0, max_tokens: 40, stream: true });
    const deltas = chunks(s.text)
      .slice(1)
      .map((c) => c.choices[0].delta.content as string);
    const k = Math.min(9, deltas.length - 1);
    const partial = deltas.slice(0, k).join('');
    const rest = await post(w2!.url, '/v1/chat/completions', {
      model: 'sim-model',
      messages: [...messages, { role: 'assistant', content: partial }],
      continue_final_message: true,
      add_generation_prompt: false,
      temperature: 0,
      max_tokens: 40 - k,
    });
    expect(partial + (rest.json.choices[0].message.content as string)).toBe(text);
    expect(rest.json.choices[0].finish_reason).toBe(full.json.choices[0].finish_reason);
    expect(k + (rest.json.usage.completion_tokens as number)).toBe(total);
  });

  it('a completions prompt plus generated text continues exactly', async () => {
    const body = { model: 'sim-model', prompt: 'The fleet', max_tokens: 25, temperature: 0, ignore_eos: true };
    const r = await post(twins[0]!.url, '/v1/completions', { ...body, logprobs: 0 });
    const full = r.json.choices[0].text as string;
    const cut = (r.json.choices[0].logprobs.tokens as string[]).slice(0, 8).join('');
    const rest = await post(twins[1]!.url, '/v1/completions', { ...body, prompt: body.prompt + cut, max_tokens: 25 - 8 });
    expect(cut + (rest.json.choices[0].text as string)).toBe(full);
  });
});

describe('judge model', () => {
  it('scores pointwise and pairwise in the documented JSON format', async () => {
    const p = await post(sim.url, '/v1/chat/completions', {
      model: 'judge',
      messages: [{ role: 'user', content: 'Score 1-10.\n<response>a calm clear answer</response>' }],
    });
    expect(JSON.parse(p.json.choices[0].message.content as string)).toHaveProperty('score');
    const pair = await post(sim.url, '/v1/chat/completions', {
      model: 'judge',
      stream: true,
      messages: [{ role: 'user', content: '<response_a>clear answer here</response_a><response_b>bravaqz cloeqz drieqz</response_b>' }],
    });
    expect(JSON.parse(streamedText(pair.text))).toMatchObject({ winner: 'A' });
    const bad = await post(sim.url, '/v1/chat/completions', { model: 'judge', messages: [{ role: 'user', content: 'hi' }] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('judge_format');
  });

  it('is listed in /v1/models', async () => {
    const r = await get(sim.url, '/v1/models');
    expect((r.json.data as { id: string }[]).map((m) => m.id)).toEqual(['sim-model', 'judge']);
  });
});
