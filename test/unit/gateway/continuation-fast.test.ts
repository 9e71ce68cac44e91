// The continuation's events rewritten on their text (Continuation's fast path) against the same events
// rewritten in full: byte for byte the same for the client, whatever the options, the text (escapes,
// characters of every width), the chunking (one byte at a time included) and the stream's end. The
// reference gets each event with a comment line after its data, which the full rewrite ignores and
// which keeps the fast path from ever learning the worker's head.
import { describe, expect, it } from 'vitest';
import { Continuation } from '../../../src/gateway/resume.js';
import { emptySoFar } from '../../../src/gateway/resume-state.js';
import type { SoFar } from '../../../src/gateway/resume-state.js';

type Body = Record<string, unknown>;

const WORKER = { id: 'chatcmpl-worker2', object: 'chat.completion.chunk', created: 1795900000, model: 'm' };
const CWORKER = { id: 'cmpl-worker2', object: 'text_completion', created: 1795900000, model: 'm' };
const TEXTS = [' the', ' café', ' "quoted"', ' back\\slash', ' line\nbreak', ' 東京', ' 😀', ' tab\t', ' </script>', ' ü'];

/** A continuing worker's stream as the simulator and vLLM write it (running usage in vLLM's order on every event). */
function workerStream(chat: boolean, prompt: number, texts: readonly string[], finish: string): string[] {
  const head = chat ? WORKER : CWORKER;
  const usage = (n: number) => ({ prompt_tokens: prompt, total_tokens: prompt + n, completion_tokens: n });
  const ev: Body[] = [];
  if (chat) ev.push({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }], usage: usage(0) });
  texts.forEach((t, i) => {
    const last = i === texts.length - 1;
    const choice = chat
      ? { index: 0, delta: { content: t }, logprobs: null, finish_reason: last ? finish : null, ...(last ? { stop_reason: null } : {}) }
      : { index: 0, text: t, logprobs: null, finish_reason: last ? finish : null, stop_reason: null };
    ev.push({ ...head, choices: [choice], usage: usage(i + 1) });
  });
  ev.push({ ...head, choices: [], usage: { ...usage(texts.length), prompt_tokens_details: null } });
  return [...ev.map((e) => JSON.stringify(e)), '[DONE]'];
}

function soFar(chat: boolean): SoFar {
  const head = chat ? { id: 'chatcmpl-orig', object: 'chat.completion.chunk' } : { id: 'cmpl-orig', object: 'text_completion' };
  return { ...emptySoFar(), ...head, created: 1795800000, model: 'm', text: 'Once upon', role: chat, tokenEvents: 2, completionTokens: 2 };
}

/** Feed `data` events to a continuation in chunks of `size` bytes (0: one chunk per event); the concatenated output. */
function run(chat: boolean, body: Body, data: readonly string[], size: number, reference: boolean): string {
  const c = new Continuation(soFar(chat), chat, 2, body);
  const bytes = Buffer.from(data.map((d) => `data: ${d}\n${reference ? ': reference\n' : ''}\n`).join(''));
  const pieces: Buffer[] = [];
  if (size === 0) {
    let at = 0;
    for (const d of data) {
      const n = Buffer.byteLength(`data: ${d}\n${reference ? ': reference\n' : ''}\n`);
      pieces.push(bytes.subarray(at, at + n));
      at += n;
    }
  } else for (let at = 0; at < bytes.length; at += size) pieces.push(bytes.subarray(at, at + size));
  let out = '';
  for (const p of pieces) {
    const s = c.feed(p);
    if (c.malformed !== undefined || c.workerError !== undefined) throw new Error(`malformed: ${String(c.malformed ?? c.workerError)}`);
    out += s;
  }
  expect(c.done).toBe(true);
  return out;
}

const OPTIONS: [string, Body][] = [
  ['no usage asked', {}],
  ['usage at the end', { stream_options: { include_usage: true } }],
  ['running usage', { stream_options: { include_usage: true, continuous_usage_stats: true } }],
];

describe('a continued stream rewritten on its text equals the full rewrite, byte for byte', () => {
  for (const chat of [true, false]) {
    for (const [name, opts] of OPTIONS) {
      for (const size of [0, 1, 7, 64]) {
        it(`${chat ? 'chat' : 'completions'}, ${name}, ${size === 0 ? 'an event per chunk' : `${size}-byte chunks`}`, () => {
          const data = workerStream(chat, 40, TEXTS, 'length');
          const body = { stream: true, max_tokens: 12, ...opts };
          const fast = run(chat, body, data, size, false);
          expect(fast).toBe(run(chat, body, data, size, true));
          // and it is the client's stream: the original identity on every event, the usage counted once
          const events = fast.split('\n\n').filter((e) => e !== '' && e !== 'data: [DONE]');
          for (const e of events) expect(JSON.parse(e.slice(6))).toMatchObject({ id: chat ? 'chatcmpl-orig' : 'cmpl-orig', created: 1795800000 });
          const last = JSON.parse((events.at(-1) as string).slice(6)) as { usage?: unknown };
          if (name !== 'no usage asked') expect(last.usage).toMatchObject({ prompt_tokens: 38, completion_tokens: 12, total_tokens: 50 });
        });
      }
    }
  }

  it('a stop string across the break is still found (the text near the seam is rewritten in full)', () => {
    const body = { stream: true, max_tokens: 12, stop: ['upon the'], stream_options: { include_usage: true, continuous_usage_stats: true } };
    const data = workerStream(true, 40, TEXTS, 'length');
    const out = run(true, body, data, 0, false);
    expect(out).toBe(run(true, body, data, 0, true));
    expect(out).toContain('"finish_reason":"stop"');
    expect(out).not.toContain('café');
  });

  it('a worker that sends no running usage, or other fields after its choices, is rewritten in full all along', () => {
    const body = { stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } };
    const plain = TEXTS.map((t) => JSON.stringify({ ...WORKER, choices: [{ index: 0, delta: { content: t }, finish_reason: null }] }));
    const extra = TEXTS.map((t, i) =>
      JSON.stringify({
        ...WORKER,
        choices: [{ index: 0, delta: { content: t }, finish_reason: null }],
        usage: { prompt_tokens: 40, total_tokens: 41 + i, completion_tokens: 1 + i },
        system_fingerprint: 'fp',
      }),
    );
    for (const evs of [plain, extra]) {
      const data = [...evs, '[DONE]'];
      expect(run(true, body, data, 0, false)).toBe(run(true, body, data, 0, true));
    }
  });

  it('garbage after the head was learned is still garbage', () => {
    const good = workerStream(true, 40, TEXTS.slice(0, 3), 'length').slice(0, 3);
    for (const bad of [
      `{"id":"${WORKER.id}","object":"chat.completion.chunk","created":1795900000,"model":"m","choices":[{"index":0`,
      'not json at all',
      '{"id":"x"}]',
    ]) {
      const c = new Continuation(soFar(true), true, 2, { stream: true });
      expect(c.feed(Buffer.from(good.map((d) => `data: ${d}\n\n`).join('')))).toBeTypeOf('string');
      expect(c.feed(Buffer.from(`data: ${bad}\n\n`))).toBe('');
      expect(c.malformed).toMatch(/not JSON|not a JSON object/);
    }
  });
});
