import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { chat, get, post } from './helpers.js';

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ port: 0, maxModelLen: 100, maxBodyBytes: 2048, kvCapacityTokens: 80 });
});
afterAll(() => sim.close());

const CHAT = '/v1/chat/completions';

describe('bad input gets vLLM statuses and OpenAI error bodies', () => {
  const cases: [string, string, unknown, Record<string, string> | undefined, number, RegExp][] = [
    ['malformed JSON', CHAT, '{"model": ', undefined, 400, /not valid JSON/],
    ['empty body', CHAT, '', undefined, 400, /empty/],
    ['a JSON array', CHAT, [1, 2], undefined, 400, /JSON object/],
    ['wrong type', CHAT, { model: 'sim-model', messages: 'hi' }, undefined, 400, /messages/],
    ['missing messages', CHAT, { model: 'sim-model' }, undefined, 400, /messages/],
    ['missing model', CHAT, { messages: [{ role: 'user', content: 'x' }] }, undefined, 400, /model/],
    ['bad role', CHAT, { model: 'sim-model', messages: [{ role: 'robot', content: 'x' }] }, undefined, 400, /role/],
    ['max_tokens 0', CHAT, chat('x', { max_tokens: 0 }), undefined, 400, /max_tokens must be at least 1/],
    ['max_tokens past the context', CHAT, chat('x', { max_tokens: 99 }), undefined, 400, /maximum context length is 100 tokens/],
    ['prompt longer than the context', '/v1/completions', { model: 'sim-model', prompt: 'w '.repeat(120) }, undefined, 400, /maximum context length/],
    ['more than the KV cache', CHAT, chat('x', { max_tokens: 90 }), undefined, 400, /KV/],
    ['min_tokens over max_tokens', CHAT, chat('x', { max_tokens: 3, min_tokens: 5 }), undefined, 400, /min_tokens must be less than or equal to max_tokens=3/],
    [
      'stream_options without stream',
      '/v1/completions',
      { model: 'sim-model', prompt: 'x', stream_options: { include_usage: true } },
      undefined,
      400,
      /only be defined when `stream=True`/,
    ],
    ['n > 1', CHAT, chat('x', { n: 2 }), undefined, 400, /n = 1/],
    ['too many top_logprobs', CHAT, chat('x', { logprobs: true, top_logprobs: 21 }), undefined, 400, /exceeds the maximum/],
    ['top_logprobs without logprobs', CHAT, chat('x', { top_logprobs: 2 }), undefined, 400, /requires logprobs/],
    ['negative temperature', CHAT, chat('x', { temperature: -1 }), undefined, 400, /temperature/],
    ['both continue and generation prompt', CHAT, chat('x', { continue_final_message: true }), undefined, 400, /Cannot set both/],
    ['token-id prompt', '/v1/completions', { model: 'sim-model', prompt: [1, 2, 3] }, undefined, 400, /token-id/],
    ['unknown model', CHAT, chat('x', { model: 'gpt-9' }), undefined, 404, /The model `gpt-9` does not exist/],
    ['wrong content type', CHAT, JSON.stringify(chat('x')), { 'content-type': 'text/plain' }, 415, /content-type must be application\/json/],
    ['body over the limit', CHAT, chat('x'.repeat(4000)), undefined, 413, /exceeds the limit of 2048 bytes/],
  ];

  it.each(cases)('%s', async (_name, path, body, headers, status, message) => {
    const r = await post(sim.url, path, body, headers);
    expect(r.status).toBe(status);
    expect(r.json.error.message).toMatch(message);
    expect(typeof r.json.error.type).toBe('string');
    expect(typeof r.json.error.code).toBe('string');
  });

  it('a body that grows past the limit without content-length is cut off with 413', async () => {
    const u = new URL(sim.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: u.hostname, port: u.port, path: CHAT, method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write('{"model":"sim-model","messages":[{"role":"user","content":"');
      req.write('y'.repeat(3000));
      req.end('"}]}');
    });
    expect(status).toBe(413);
  });

  // Regression: the simulator answered 413 and reset the connection at once, so a client still
  // writing its body got EPIPE (or ECONNRESET) instead of the answer. 4 MiB is more than the
  // socket buffers take: the client is still writing when the answer goes out.
  it.each([
    ['content-length', (n: number) => `content-length: ${n}\r\n\r\n`, (b: Buffer) => [b]],
    ['chunked', () => 'transfer-encoding: chunked\r\n\r\n', (b: Buffer) => [Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]],
  ] as const)('a client still sending an oversized body (%s) reads its 413 instead of EPIPE', async (_name, head, frame) => {
    const u = new URL(sim.url);
    const body = Buffer.alloc(4 * 1024 * 1024, 'y');
    const { reply, error } = await new Promise<{ reply: string; error: string | undefined }>((resolve) => {
      let reply = '';
      let error: string | undefined;
      const s = connect(Number(u.port), u.hostname, () => {
        s.write(`POST ${CHAT} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\n${head(body.length)}`);
        for (const part of frame(body)) s.write(part);
      });
      s.on('data', (d: Buffer) => (reply += d.toString('latin1')));
      s.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
      s.on('close', () => resolve({ reply, error }));
    });
    expect(error).toBeUndefined();
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(reply).toMatch(/exceeds the limit of 2048 bytes/);
  });

  it('a malformed HTTP request does not take the process down', async () => {
    const { connect } = await import('node:net');
    const u = new URL(sim.url);
    const reply = await new Promise<string>((resolve) => {
      const s = connect(Number(u.port), u.hostname, () => s.write('NOT HTTP AT ALL\r\n\r\n'));
      let out = '';
      s.on('data', (d) => (out += d.toString()));
      s.on('close', () => resolve(out));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400/);
    expect((await get(sim.url, '/health')).status).toBe(200);
    expect((await post(sim.url, CHAT, chat('still alive', { max_tokens: 2 }))).status).toBe(200);
  });
});
