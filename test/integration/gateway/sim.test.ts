// The gateway in front of the simulator: byte-for-byte streaming passthrough against the simulator's
// own output, and the official `openai` client through the gateway.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import { destroyAfter, sseEvents, startUpstream } from '../../helpers/upstream.js';
import type { Upstream } from '../../helpers/upstream.js';
import { httpCall, startGateway } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

const MODEL = 'sim-model';
let sim: SimHandle;
let broken: Upstream;
let gw: Gateway;

beforeAll(async () => {
  sim = await startSim({ model: MODEL, version: 'v1', seed: 7, interTokenMs: 0, jitter: 0 });
  broken = await startUpstream();
  gw = await startGateway([
    { name: MODEL, versions: [{ id: 'v1', workers: [sim.url] }], route: { weights: { v1: 1 } } },
    { name: 'broken', versions: [{ id: 'b1', workers: [broken.url] }], route: { weights: { b1: 1 } } },
  ]);
});
afterAll(async () => {
  await gw.close();
  await sim.close();
  await broken.close();
});

/**
 * The simulator gives every request its own `id` (a counter and random bytes) and `created` (wall
 * clock seconds), so two answers to the same request differ in exactly those fields. Everything
 * else — framing, field order, whitespace, the text — must be identical.
 */
function normalise(body: string): string {
  return body.replace(/"id":"(chatcmpl|cmpl)-[0-9a-f]+"/g, '"id":"$1-ID"').replace(/"created":\d+/g, '"created":0');
}

describe('streaming passthrough against the simulator', () => {
  for (const [name, path, body] of [
    [
      'chat',
      '/v1/chat/completions',
      { model: MODEL, messages: [{ role: 'user', content: 'Tell me about rollouts.' }], stream: true, temperature: 0, max_tokens: 40 },
    ],
    [
      'chat with usage',
      '/v1/chat/completions',
      { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], stream: true, temperature: 0, max_tokens: 16, stream_options: { include_usage: true } },
    ],
    ['completions', '/v1/completions', { model: MODEL, prompt: 'Once upon a time', stream: true, temperature: 0, max_tokens: 24 }],
  ] as const) {
    it(`${name}: the gateway's body is the simulator's own body (id/created normalised)`, async () => {
      const direct = await httpCall(sim.url, path, body);
      const via = await httpCall(gw.url, path, body);
      expect(direct.status).toBe(200);
      expect(via.status).toBe(200);
      expect(via.headers['content-type']).toBe(direct.headers['content-type']);
      expect(via.headers['x-glidepath-version']).toBe('v1');
      expect(direct.body).toMatch(/data: \[DONE\]\n\n$/);
      // same length in bytes once the per-request fields are equal: no reframing, no re-encoding
      expect(normalise(via.body)).toBe(normalise(direct.body));
      expect(Buffer.byteLength(normalise(via.body))).toBe(Buffer.byteLength(normalise(direct.body)));
    });
  }

  it('non-streaming: same JSON apart from id/created', async () => {
    const body = { model: MODEL, messages: [{ role: 'user', content: 'Hello' }], temperature: 0, max_tokens: 20 };
    const direct = await httpCall(sim.url, '/v1/chat/completions', body);
    const via = await httpCall(gw.url, '/v1/chat/completions', body);
    expect(normalise(via.body)).toBe(normalise(direct.body));
  });
});

describe('the official openai client through the gateway', () => {
  const client = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });

  it('non-streaming chat completion', async () => {
    const r = await client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say something' }], temperature: 0, max_tokens: 12 });
    expect(r.object).toBe('chat.completion');
    expect(typeof r.choices[0]!.message.content).toBe('string');
    expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('streaming chat completion gives the same text as non-streaming at temperature 0', async () => {
    const req = { model: MODEL, messages: [{ role: 'user' as const, content: 'Explain canaries' }], temperature: 0, max_tokens: 24 };
    const whole = await client().chat.completions.create(req);
    const stream = await client().chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(usage?.completion_tokens).toBe(whole.usage!.completion_tokens);
  });

  it('completions, streaming and not', async () => {
    const c = await client().completions.create({ model: MODEL, prompt: 'abc', max_tokens: 8, temperature: 0 });
    expect(c.choices[0]!.text.length).toBeGreaterThan(0);
    const s = await client().completions.create({ model: MODEL, prompt: 'abc', max_tokens: 8, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(c.choices[0]!.text);
  });

  it('lists the models', async () => {
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toEqual([MODEL, 'broken']);
  });

  it('gets typed errors: unknown model → NotFoundError, bad input → BadRequestError', async () => {
    await expect(client().chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
    });
    await expect(client().chat.completions.create({ model: MODEL, messages: [] })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('a stream that breaks mid-way surfaces as an error in the client, after the tokens it got', async () => {
    broken.script(destroyAfter(sseEvents(10, { model: 'broken' }), 4));
    const stream = await client().chat.completions.create({ model: 'broken', messages: [{ role: 'user', content: 'x' }], stream: true });
    let text = '';
    let err: unknown;
    try {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    } catch (e) {
      err = e;
    }
    expect(text).toBe('tok0 tok1 tok2 ');
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String((err as Error).message)).toMatch(/dropped the stream/);
  });
});
