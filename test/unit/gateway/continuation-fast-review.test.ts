// Review of the continuation's rewriting on the text (Continuation's fast path): events where it gave
// the client something else than the full rewrite. Each stream is fed twice, as sent and with a
// comment line after every event's data (which the full rewrite ignores and which keeps the fast path
// from ever learning the worker's head): the client must get the same bytes, and the continuation
// must end in the same state.
import { describe, expect, it } from 'vitest';
import { Continuation } from '../../../src/gateway/resume.js';
import { emptySoFar } from '../../../src/gateway/resume-state.js';
import type { SoFar } from '../../../src/gateway/resume-state.js';

type Body = Record<string, unknown>;

const RUNNING = { stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } };
const NO_USAGE = { stream: true };

function soFar(chat: boolean): SoFar {
  const head = chat ? { id: 'chatcmpl-orig', object: 'chat.completion.chunk' } : { id: 'cmpl-orig', object: 'text_completion' };
  return { ...emptySoFar(), ...head, created: 1795800000, model: 'm', text: 'Once upon', role: chat, tokenEvents: 2, completionTokens: 2 };
}

const usage = (n: number) => `"usage":{"prompt_tokens":40,"total_tokens":${40 + n},"completion_tokens":${n}}`;
const delta = (t: string) => `{"index":0,"delta":{"content":${JSON.stringify(t)}},"logprobs":null,"finish_reason":null}`;

/** The client's bytes and the continuation's counts, for `data` events fed one a chunk. */
function run(chat: boolean, body: Body, data: readonly string[], reference: boolean) {
  const c = new Continuation(soFar(chat), chat, 2, body);
  let out = '';
  for (const d of data) {
    const s = c.feed(Buffer.from(`data: ${d}\n${reference ? ': reference\n' : ''}\n`));
    if (c.malformed !== undefined || c.workerError !== undefined) throw new Error(`malformed: ${String(c.malformed ?? c.workerError)}`);
    out += s;
  }
  return { out, state: { done: c.done, prompt: c.promptTokens, completion: c.completionTokens, prefilled: c.prefilled } };
}

function same(chat: boolean, body: Body, data: readonly string[]): string {
  const fast = run(chat, body, data, false);
  const full = run(chat, body, data, true);
  expect(fast.out).toBe(full.out);
  expect(fast.state).toEqual(full.state);
  return fast.out;
}

describe('the rewriting on the text, reviewed against the full rewrite', () => {
  it("a worker whose head lacks an identity field the client has (the full rewrite adds it after the choices): every event keeps the client's", () => {
    // no `created`: the full rewrite appends the client's after the usage
    const head = '{"id":"chatcmpl-w2","object":"chat.completion.chunk","model":"m",';
    const data = [1, 2, 3].map((n) => `${head}"choices":[${delta(` t${n}`)}],${usage(n)}}`);
    for (const body of [RUNNING, NO_USAGE]) {
      const out = same(true, body, [...data, '[DONE]']);
      for (const e of out.split('\n\n').filter((x) => x.startsWith('data: {'))) expect(JSON.parse(e.slice(6))).toMatchObject({ created: 1795800000 });
    }
  });

  it("a worker that sends its identity after its choices (and an array last, before its usage): the client never gets the worker's", () => {
    const data = [1, 2, 3].map(
      (n) =>
        `{"id":"cmpl-w2","choices":[{"index":0,"text":" t${n}","logprobs":null,"finish_reason":null,"stop_reason":null}],"object":"text_completion","created":1795900000,"model":"m","warnings":[],${usage(n)}}`,
    );
    for (const body of [RUNNING, NO_USAGE]) {
      const out = same(false, body, [...data, '[DONE]']);
      expect(out).not.toContain('1795900000');
    }
  });

  it('an event whose choices array is empty after all (a "choices" key in the head, or the key twice) is the closing usage event', () => {
    // a field of the head holding a "choices" array: the first "choices":[ is not the event's
    const head = '{"id":"chatcmpl-w2","object":"chat.completion.chunk","created":1795900000,"model":"m","meta":{"choices":[1]},';
    const odd = [`${head}"choices":[${delta(' a')}],${usage(1)}}`, `${head}"choices":[${delta(' b')}],${usage(2)}}`, `${head}"choices":[],${usage(2)}}`];
    // the key twice (the last one counts)
    const w = '{"id":"chatcmpl-w2","object":"chat.completion.chunk","created":1795900000,"model":"m",';
    const twice = [`${w}"choices":[${delta(' a')}],${usage(1)}}`, `${w}"choices":[${delta(' b')}],"choices":[],${usage(2)}}`];
    for (const data of [odd, twice])
      for (const body of [NO_USAGE, { stream: true, stream_options: { include_usage: true } }]) same(true, body, [...data, '[DONE]']);
  });

  it('a first choice that is not an object is left to the full rewrite', () => {
    const w = '{"id":"cmpl-w2","object":"text_completion","created":1795900000,"model":"m",';
    const good = `${w}"choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],${usage(1)}}`;
    // a space before the closing bracket: an empty array all the same (the closing usage event, not asked for)
    const c = new Continuation(soFar(false), false, 2, NO_USAGE);
    expect(c.feed(Buffer.from(`data: ${good}\n\n`))).toContain('" a"');
    expect(c.feed(Buffer.from(`data: ${w}"choices":[ ],${usage(1)}}\n\n`))).toBe('');
  });

  it('a choice that is not an object is malformed, with or without a head learned (the full rewrite threw on it, out of the socket handler)', () => {
    for (const chat of [true, false]) {
      const w = chat
        ? '{"id":"chatcmpl-w2","object":"chat.completion.chunk","created":1795900000,"model":"m",'
        : '{"id":"cmpl-w2","object":"text_completion","created":1795900000,"model":"m",';
      const good = chat
        ? `${w}"choices":[${delta(' a')}],${usage(1)}}`
        : `${w}"choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],${usage(1)}}`;
      for (const bad of ['null', '1', '"x"'])
        for (const learned of [true, false]) {
          const c = new Continuation(soFar(chat), chat, 2, RUNNING);
          if (learned) expect(c.feed(Buffer.from(`data: ${good}\n\ndata: ${good}\n\n`))).toContain('" a"');
          expect(c.feed(Buffer.from(`data: ${w}"choices":[${bad}],${usage(2)}}\n\n`))).toBe('');
          expect(c.malformed).toMatch(/choice is not a JSON object/);
        }
    }
  });

  it('the common event still takes the rewrite on the text once a full rewrite showed the head', () => {
    const w = '{"id":"chatcmpl-w2","object":"chat.completion.chunk","created":1795900000,"model":"m",';
    const role = `${w}"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],${usage(0)}}`;
    // `1.0` is what only the text rewrite keeps as sent (the full one writes 1)
    const odd = `${w}"choices":[{"index":0,"delta":{"content":" b"},"logprobs":null,"finish_reason":null,"x":1.0}],${usage(2)}}`;
    const c = new Continuation(soFar(true), true, 2, RUNNING);
    const out = c.feed(Buffer.from(`data: ${role}\n\ndata: ${w}"choices":[${delta(' a')}],${usage(1)}}\n\ndata: ${odd}\n\n`));
    expect(out).toContain('"x":1.0}],"usage":{"prompt_tokens":38,"total_tokens":42,"completion_tokens":4}}');
  });

  it('held: a head that changes, CRLF, ids to skip and a stop string near the break give the full rewrite', () => {
    const w = (created: number) => `{"id":"cmpl-w2","object":"text_completion","created":${created},"model":"m",`;
    const ev = (n: number, created: number, ids: string) =>
      `${w(created)}"choices":[{"index":0,"text":" t${n}","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[${ids}]}],${usage(n)}}`;
    const data = [ev(1, 1, '7,8'), ev(2, 1, '9'), ev(3, 2, '10'), ev(4, 2, '11'), ev(5, 1, '12'), '[DONE]'];
    const so = { ...soFar(false), tokenIds: [5, 6, 7], idsAtText: 2 };
    for (const body of [RUNNING, { ...RUNNING, stop: ['upon t9'] }, { ...NO_USAGE, stop: 'xyz' }])
      for (const crlf of [false, true]) {
        const feed = (reference: boolean) => {
          const c = new Continuation({ ...so, tokenIds: [...so.tokenIds] }, false, 2, body);
          let out = '';
          for (const d of data)
            out += c.feed(Buffer.from(`data: ${d}\n${reference ? ': reference\n' : ''}\n`.replace(/\n/g, crlf ? '\r\n' : '\n'))) ?? 'MALFORMED';
          return out;
        };
        expect(feed(false)).toBe(feed(true));
      }
  });
});
