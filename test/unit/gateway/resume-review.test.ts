// Regressions from the review of stream resume, on the pure parts: the meter's and the continuation's
// reading of a worker's error event and of garbage, what a continuation is asked (chat with echo,
// tokens an engine still held under continuous usage stats), good events before a bad one, and the
// cost of an event trickled a byte at a time (bytes searched, not time).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Continuation, planResume } from '../../../src/gateway/resume.js';
import { emptySoFar, readEvent } from '../../../src/gateway/resume-state.js';
import type { SoFar } from '../../../src/gateway/resume-state.js';
import { streamRequest } from '../../helpers/resume-client.js';
import { SseMeter } from '../../../src/gateway/sse.js';

const b = (s: string) => Buffer.from(s, 'utf8');
const req = streamRequest;
const ENGINE = { resume: 'continue_final_message', tokenIdPrompts: true } as const;
const ERROR = '{"error":{"object":"error","message":"EngineCore encountered an issue","type":"InternalServerError","param":null,"code":500}}';
const chatData = (content: string, usage?: number) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }],
    ...(usage === undefined ? {} : { usage: { prompt_tokens: 10, total_tokens: 10 + usage, completion_tokens: usage } }),
  });
const planned = (d: ReturnType<typeof planResume>) => {
  if (!('plan' in d)) throw new Error(JSON.stringify(d));
  return { sent: d.plan.sent, body: JSON.parse(d.plan.body.toString()) as Record<string, unknown> };
};

describe("SseMeter: a worker's error event and garbage shaped like an object", () => {
  it('reads `data: {"error":…}` as the worker\'s error (its message and code), forwarding the events before it', () => {
    const m = new SseMeter('chat');
    const good = `data: ${chatData('Hi')}\n\n`;
    expect(m.feed(b(`${good}data: ${ERROR}\n\ndata: [DONE]\n\n`), 1)).toBe(false);
    expect(m.workerError).toBe('EngineCore encountered an issue (code 500)');
    expect([m.out.toString(), m.tokenEvents, m.done, m.malformed]).toEqual([good, 1, false, undefined]);
  });

  it('an error that is null is no error', () => {
    const m = new SseMeter('chat');
    expect(m.feed(b(`data: {"choices":[{"delta":{"content":"x"}}],"error":null}\n\n`), 1)).toBe(true);
    expect([m.workerError, m.tokenEvents]).toEqual([undefined, 1]);
  });

  it('`data: {garbage}` is malformed (it was forwarded: only its first and last characters were checked)', () => {
    const m = new SseMeter('chat');
    expect(m.feed(b('data: {garbage}\n\n'), 1)).toBe(false);
    expect(m.malformed).toMatch(/^SSE data is not valid JSON: "\{garbage\}"/);
    expect(m.out.length).toBe(0);
  });

  it('the byte path takes only an event of one line: a second line that is not SSE is malformed (it was counted a token and forwarded)', () => {
    const ev = (tail: string) => `data: {"id":"a","object":"text_completion","choices":[{"index":0,"text":" y",${tail}\n\n`;
    const m = new SseMeter('completions');
    expect(m.feed(b(ev('"finish_reason":null}]}')), 1)).toBe(true);
    expect(m.feed(b(ev('\nnot sse]}')), 2)).toBe(false);
    expect(m.malformed).toBe('unexpected SSE line "not sse]}"');
    expect([m.out.length, m.tokenEvents]).toEqual([0, 1]);
    // a data field over two lines is one JSON text, read as such
    const two = new SseMeter('completions');
    expect(two.feed(b('data: {"choices":[{"index":0,\ndata: "text":" z"}]}\n\ndata: [DONE]\n\n'), 1)).toBe(true);
    expect([two.tokenEvents, two.done]).toEqual([1, true]);
  });

  it('forwards every byte and counts the same with LF, CRLF and CR line endings, however the bytes are cut (held events are searched on their new bytes only)', () => {
    const lf = `data: ${chatData('Hi')}\n\n: ping\n\ndata: ${chatData(' there ☕')}\n\n\ndata: [DONE]\n\n`;
    for (const text of [lf, lf.replace(/\n/g, '\r\n'), lf.replace(/\n/g, '\r')]) {
      const bytes = b(text);
      for (const size of [1, 2, 3, 5, 7, 64]) {
        const m = new SseMeter('chat');
        const out: Buffer[] = [];
        for (let i = 0; i < bytes.length; i += size) {
          expect(m.feed(bytes.subarray(i, i + size), i)).toBe(true);
          out.push(Buffer.from(m.out));
        }
        expect([m.tokenEvents, m.events, m.done], `${JSON.stringify(text.slice(-4))} in pieces of ${size}`).toEqual([2, 3, true]);
        // (a CRLF cut after its CR leaves its LF for the next event's start: held, at the very end, with no event after it)
        const got = Buffer.concat(out).toString();
        expect(got === text || (got === text.slice(0, -1) && text.endsWith('\r\n'))).toBe(true);
      }
    }
  });

  it('counts data events only: comments and an event not yet whole are not (the deadlines count from data events)', () => {
    const m = new SseMeter('chat');
    const ev = `data: ${chatData('Hi')}\n\n`;
    m.feed(b(': ping\n\n'), 1);
    m.feed(b(ev.slice(0, 20)), 2);
    expect(m.events).toBe(0);
    m.feed(b(ev.slice(20)), 3);
    m.feed(b('data: [DONE]\n\n'), 4);
    expect(m.events).toBe(2);
  });
});

describe("Continuation: the continuing worker's error event, an event with neither choices nor usage, good events before a bad one", () => {
  const so = (): SoFar => ({ ...emptySoFar(), id: 'orig', object: 'chat.completion.chunk', created: 7, model: 'm', text: 'Hello', role: true, tokenEvents: 1 });
  const cont = () => new Continuation(so(), true, 1, { stream: true, stream_options: { include_usage: true } });

  it("an error event is the worker's error, not the closing usage event (it was dropped, and the [DONE] after it ended the stream)", () => {
    const c = cont();
    const out = c.feed(b(`data: ${chatData(' wor', 1)}\n\ndata: ${ERROR}\n\ndata: [DONE]\n\n`));
    expect(c.workerError).toBe('EngineCore encountered an issue (code 500)');
    expect(c.done).toBe(false);
    expect(out).toContain('" wor"');
    expect(out).not.toContain('[DONE]');
  });

  it('an event with neither choices nor usage is malformed', () => {
    for (const data of ['{"id":"x","object":"chat.completion.chunk"}', '{"id":"x","choices":[],"usage":null}']) {
      const c = cont();
      expect(c.feed(b(`data: ${data}\n\ndata: [DONE]\n\n`))).toBe('');
      expect(c.malformed).toMatch(/^an event with neither choices nor usage/);
      expect(c.done).toBe(false);
    }
  });

  it('the events before a malformed one in the same read go to the client (they were all dropped)', () => {
    const c = cont();
    const out = c.feed(b(`data: ${chatData(' wor', 1)}\n\ndata: ${chatData('ld', 2)}\n\ndata: {garbage}\n\n`));
    expect(c.malformed).toMatch(/not JSON/);
    const texts = out
      .split('\n\n')
      .filter((e) => e !== '')
      .map((e) => (JSON.parse(e.slice(6)) as { id: string; choices: { delta: { content: string } }[] }).choices[0]?.delta.content);
    expect(texts).toEqual([' wor', 'ld']);
  });

  it('reads LF, CRLF and CR line endings alike, however the bytes are cut (held events are searched on their new bytes only)', () => {
    const lf = `data: ${chatData(' wor', 1)}\n\n: ping\n\ndata: ${chatData('ld ☕', 2)}\n\n\ndata: [DONE]\n\n`;
    const whole = cont().feed(b(lf));
    expect(whole).toContain('ld ☕');
    expect(whole.endsWith('data: [DONE]\n\n')).toBe(true);
    for (const text of [lf, lf.replace(/\n/g, '\r\n'), lf.replace(/\n/g, '\r')]) {
      const bytes = b(text);
      for (const size of [1, 2, 3, 5, 7, 64]) {
        const c = cont();
        let out = '';
        for (let i = 0; i < bytes.length; i += size) out += c.feed(bytes.subarray(i, i + size));
        expect([out, c.malformed, c.done], `${JSON.stringify(text.slice(-4))} in pieces of ${size}`).toEqual([whole, undefined, true]);
      }
    }
  });
});

describe('what a continuation is asked', () => {
  it('chat with echo is not resumed (the continuation would echo the partial answer)', () => {
    const s = emptySoFar();
    readEvent(s, chatData('Hi'), true);
    expect(planResume(req({ messages: [{ role: 'user', content: 'x' }], echo: true }), true, s, ENGINE)).toEqual({ refused: 'echo' });
  });

  it('continuous usage: the count where text was last sent, not one that includes tokens the engine still held', () => {
    const s = emptySoFar();
    readEvent(s, chatData('He', 1), true);
    readEvent(s, chatData('llo', 2), true);
    // a token whose text is held back (half a character, a stop string's start): counted, not sent
    readEvent(s, chatData('', 3), true);
    const p = planned(planResume(req({ messages: [{ role: 'user', content: 'x' }], max_tokens: 10, min_tokens: 5 }), true, s, ENGINE));
    expect([p.sent, p.body.max_tokens, p.body.min_tokens]).toEqual([2, 8, 3]);
  });

  it('nothing sent yet (only held tokens): the request as it was, with nothing counted as sent', () => {
    const s = emptySoFar();
    readEvent(s, chatData('', 1), true);
    readEvent(s, chatData('', 2), true);
    const p = planned(planResume(req({ messages: [{ role: 'user', content: 'x' }], max_tokens: 10 }), true, s, ENGINE));
    expect([p.sent, p.body.max_tokens, p.body.messages]).toEqual([0, 10, [{ role: 'user', content: 'x' }]]);
  });
});

describe('an event trickled a byte at a time costs linear work (bytes searched; it was quadratic)', () => {
  const spies: { mockRestore(): void }[] = [];
  afterEach(() => {
    for (const s of spies.splice(0)) s.mockRestore();
  });

  /** Bytes (characters) searched by indexOf / lastIndexOf on buffers and strings while `run` runs. */
  function searched(run: () => void): number {
    const found = [vi.spyOn(Buffer.prototype, 'indexOf'), vi.spyOn(Buffer.prototype, 'lastIndexOf'), vi.spyOn(String.prototype, 'indexOf')];
    spies.push(...found);
    run();
    let n = 0;
    for (const s of found) for (const ctx of s.mock.contexts as unknown as { length: number }[]) n += ctx.length;
    for (const s of spies.splice(0)) s.mockRestore();
    return n;
  }

  const big = 'x'.repeat(20_000);
  // a few passes over the event once it is whole; rescanning what is held on every read was ~length / 2 per byte (10 000×)
  const LINEAR = 50;

  it('SseMeter', () => {
    const ev = b(`data: ${chatData(big)}\n\n`);
    const m = new SseMeter('chat');
    const n = searched(() => {
      for (let i = 0; i < ev.length; i++) m.feed(ev.subarray(i, i + 1), i);
    });
    expect([m.tokenEvents, m.malformed]).toEqual([1, undefined]);
    expect(n).toBeLessThan(LINEAR * ev.length);
  });

  it('Continuation', () => {
    const ev = b(`data: ${chatData(big, 1)}\n\n`);
    const c = new Continuation({ ...emptySoFar(), text: 'a', role: true }, true, 1, { stream: true });
    let out = '';
    const n = searched(() => {
      for (let i = 0; i < ev.length; i++) out += c.feed(ev.subarray(i, i + 1));
    });
    expect(out).toContain(big);
    expect(n).toBeLessThan(LINEAR * ev.length);
  });
});

describe('log-probabilities across the break', () => {
  /** A completion event: its text, ids and logprobs (one entry per token, `text_offset` as vLLM counts them: from the first generated character). */
  const compl = (text: string, tokens: string[], offsets: number[], ids?: number[]) =>
    JSON.stringify({
      id: 'c',
      object: 'text_completion',
      created: 1,
      model: 'm',
      choices: [
        {
          index: 0,
          text,
          ...(ids === undefined ? {} : { token_ids: ids }),
          logprobs: { text_offset: offsets, token_logprobs: tokens.map(() => -0.5), tokens, top_logprobs: tokens.map((t) => ({ [t]: -0.5 })) },
          finish_reason: null,
        },
      ],
    });
  const lpOf = (out: string) =>
    out
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: { logprobs: { tokens: string[]; text_offset: number[] } }[] }).choices[0]?.logprobs);

  it("completions: a continuation's text_offset counts from the first generated character, in code points (it started again at 0)", () => {
    const so = emptySoFar();
    // "a😀" is 3 UTF-16 units, 2 code points (Python's len, vLLM's count)
    for (const [t, o] of [
      ['a', 0],
      ['😀', 1],
    ] as const)
      readEvent(so, compl(t, [t], [o]), false);
    const c = new Continuation(so, false, 2, { stream: true, logprobs: 1 });
    const out = c.feed(b(`data: ${compl(' b', [' b'], [0])}\n\ndata: ${compl('c', ['c'], [2])}\n\n`));
    expect(lpOf(out).map((l) => l?.text_offset)).toEqual([[2], [4]]);
    // without logprobs asked nothing is moved (and the fast path stays open)
    const plain = new Continuation(so, false, 2, { stream: true });
    expect(lpOf(plain.feed(b(`data: ${compl(' b', [' b'], [0])}\n\n`))).map((l) => l?.text_offset)).toEqual([[0]]);
  });

  it('the entries of tokens whose text the broken worker still held are not sent twice (chat and completions)', () => {
    // completions: the second token's text was held (half a character): its id and entry went out, its text did not
    const so = emptySoFar();
    readEvent(so, compl('a', ['a'], [0], [10]), false);
    readEvent(so, compl('', ['\\xf0'], [1], [11]), false);
    expect([so.logprobs, so.logprobsAtText]).toEqual([2, 1]);
    const c = new Continuation(so, false, 1, { stream: true, logprobs: 1 });
    // the continuation generates it again, with the character's end
    const out = c.feed(b(`data: ${compl('😀', ['\\xf0', '\\x9f'], [0, 0], [11, 12])}\n\n`));
    expect(lpOf(out)).toEqual([{ text_offset: [1], token_logprobs: [-0.5], tokens: ['\\x9f'], top_logprobs: [{ '\\x9f': -0.5 }] }]);
    // chat: logprobs.content
    const chatEv = (content: string, toks: string[]) =>
      JSON.stringify({
        id: 'c',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'm',
        choices: [
          { index: 0, delta: { content }, logprobs: { content: toks.map((token) => ({ token, logprob: -1, top_logprobs: [] })) }, finish_reason: null },
        ],
      });
    const cs = emptySoFar();
    readEvent(cs, chatEv('Hi', ['Hi']), true);
    readEvent(cs, chatEv('', ['\\xf0']), true);
    const cc = new Continuation(cs, true, 1, { stream: true, logprobs: true });
    const got = cc.feed(b(`data: ${chatEv('😀', ['\\xf0', '\\x9f'])}\n\n`));
    const content = (JSON.parse(got.slice(6)) as { choices: { logprobs: { content: { token: string }[] } }[] }).choices[0]?.logprobs.content;
    expect(content?.map((e) => e.token)).toEqual(['\\x9f']);
  });
});

describe('a continued chat whose final assistant message has content parts', () => {
  const so = (): SoFar => ({ ...emptySoFar(), id: 'c', text: 'lo wor', role: true, tokenEvents: 2 });
  const messages = (content: unknown) => [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content },
  ];
  it('goes on in its last text part (a part of its own was joined to it with a newline by the engine)', () => {
    const d = planned(planResume(req({ messages: messages([{ type: 'text', text: 'Hel' }]), continue_final_message: true }), true, so(), ENGINE));
    expect((d.body.messages as { content: unknown }[])[1]?.content).toEqual([{ type: 'text', text: 'Hello wor' }]);
    const empty = planned(planResume(req({ messages: messages([]), continue_final_message: true }), true, so(), ENGINE));
    expect((empty.body.messages as { content: unknown }[])[1]?.content).toEqual([{ type: 'text', text: 'lo wor' }]);
  });
  it('is not continued when its last part is not text (nowhere to join the text to)', () => {
    const parts = [
      { type: 'text', text: 'Look:' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
    ];
    expect(planResume(req({ messages: messages(parts), continue_final_message: true }), true, so(), ENGINE)).toEqual({
      refused: 'a final assistant message whose content ends in a part that is not text',
    });
  });
});

describe('a stop string across the break with include_stop_str_in_output', () => {
  const so = (): SoFar => ({ ...emptySoFar(), id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', text: 'the EN', role: true, tokenEvents: 2 });
  const textOf = (out: string) =>
    out
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { content: string }; finish_reason: string | null }[] }).choices[0]);
  it('ends the stream with the stop string (it was cut before it, as if not asked)', () => {
    const c = new Continuation(so(), true, 2, { stream: true, stop: ['END'], include_stop_str_in_output: true });
    expect(textOf(c.feed(b(`data: ${chatData('D and')}\n\n`)))).toEqual([expect.objectContaining({ delta: { content: 'D' }, finish_reason: 'stop' })]);
    expect(c.cut).toBe(true);
    const without = new Continuation(so(), true, 2, { stream: true, stop: ['END'] });
    expect(textOf(without.feed(b(`data: ${chatData('D and')}\n\n`)))).toEqual([expect.objectContaining({ delta: { content: '' }, finish_reason: 'stop' })]);
  });
});
