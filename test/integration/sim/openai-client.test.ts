import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';

let sim: SimHandle;
let client: OpenAI;
beforeAll(async () => {
  sim = await startSim({ port: 0, seed: 11 });
  client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(() => sim.close());

describe('the official openai client', () => {
  it('chat, non-streaming', async () => {
    const r = await client.chat.completions.create({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, temperature: 0 });
    expect(r.choices[0]!.message.role).toBe('assistant');
    expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(r.usage!.prompt_tokens).toBe(4);
  });

  it('chat, streaming with usage, matches the non-streaming text', async () => {
    const params = { model: 'sim-model', messages: [{ role: 'user' as const, content: 'stream me' }], max_tokens: 16, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c) {
        text += c.delta.content ?? '';
        finish = c.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage!.completion_tokens).toBe(whole.usage!.completion_tokens);
  });

  it('completions, streaming and not', async () => {
    const whole = await client.completions.create({ model: 'sim-model', prompt: 'Once', max_tokens: 10, temperature: 0 });
    const stream = await client.completions.create({ model: 'sim-model', prompt: 'Once', max_tokens: 10, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(whole.choices[0]!.text);
  });

  it('models and typed errors', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain('sim-model');
    await expect(client.chat.completions.create({ model: 'missing', messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.chat.completions.create({ model: 'sim-model', messages: [], max_tokens: 1 })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });
});
