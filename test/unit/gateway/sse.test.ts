// SseMeter: events split across chunks, [DONE], usage, token timing, malformed input, comments.
import { describe, expect, it, vi } from 'vitest';
import { SseMeter, sseErrorEvent } from '../../../src/gateway/sse.js';
import { sseEvents } from '../../helpers/upstream.js';

const b = (s: string) => Buffer.from(s, 'utf8');

function isJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

/** Feed `text` cut at the given byte offsets, with times 1, 2, 3, … per chunk. */
function feedCut(m: SseMeter, text: string, cuts: number[]): boolean {
  const buf = b(text);
  let prev = 0;
  let t = 1;
  for (const c of [...cuts, buf.length]) {
    if (!m.feed(buf.subarray(prev, c), t++)) return false;
    prev = c;
  }
  return true;
}

describe('SseMeter', () => {
  it('counts token events, detects [DONE] and reads usage from a vLLM stream', () => {
    const m = new SseMeter();
    const events = sseEvents(5, { usage: { prompt_tokens: 12, completion_tokens: 5 } });
    events.forEach((e, i) => expect(m.feed(b(e), 10 * (i + 1))).toBe(true));
    // role event (empty content) is not a token; 5 content events are
    expect(m.tokenEvents).toBe(5);
    expect(m.firstAt).toBe(20);
    expect(m.lastAt).toBe(60);
    expect(m.itl).toEqual([10, 10, 10, 10]);
    expect(m.done).toBe(true);
    expect(m.usagePrompt).toBe(12);
    expect(m.usageCompletion).toBe(5);
    expect(m.malformed).toBeUndefined();
  });

  it('counts completion (`text`) events', () => {
    const m = new SseMeter('completions');
    for (const e of sseEvents(3, { completions: true })) m.feed(b(e), 1);
    expect(m.tokenEvents).toBe(3);
    expect(m.done).toBe(true);
  });

  it('gives the same result however the stream is cut into chunks', () => {
    const text = sseEvents(6, { usage: { prompt_tokens: 3, completion_tokens: 6 } }).join('');
    const len = b(text).length;
    for (const step of [1, 2, 3, 7, 50, 333]) {
      const cuts: number[] = [];
      for (let c = step; c < len; c += step) cuts.push(c);
      const m = new SseMeter();
      expect(feedCut(m, text, cuts), `step ${step}`).toBe(true);
      expect(m.tokenEvents).toBe(6);
      expect(m.done).toBe(true);
      expect(m.usageCompletion).toBe(6);
    }
  });

  it('an event cut right between its two newlines', () => {
    const m = new SseMeter();
    const e = sseEvents(1)[1]!;
    expect(m.feed(b(e.slice(0, -1)), 1)).toBe(true);
    expect(m.tokenEvents).toBe(0);
    expect(m.feed(b('\n'), 2)).toBe(true);
    expect(m.tokenEvents).toBe(1);
    expect(m.firstAt).toBe(2);
  });

  it('multi-byte UTF-8 split across chunks does not confuse it', () => {
    const e = `data: ${JSON.stringify({ choices: [{ delta: { content: '✓🚀é' } }], usage: { prompt_tokens: 1, completion_tokens: 1 } })}\n\n`;
    const buf = b(e);
    const m = new SseMeter();
    for (let i = 0; i < buf.length; i++) m.feed(buf.subarray(i, i + 1), i);
    expect(m.tokenEvents).toBe(1);
    expect(m.usagePrompt).toBe(1);
    expect(m.malformed).toBeUndefined();
  });

  it('skips comment lines, blank events and other fields', () => {
    const m = new SseMeter();
    expect(m.feed(b(': keep-alive\n\n'), 1)).toBe(true);
    expect(m.feed(b('\n\n'), 1)).toBe(true);
    expect(m.feed(b('retry: 1000\n\n'), 1)).toBe(true);
    expect(m.feed(b(sseEvents(1)[1]!), 2)).toBe(true);
    expect(m.feed(b(':\n\n'), 3)).toBe(true);
    expect(m.feed(b('data: [DONE]\n\n'), 4)).toBe(true);
    expect(m.tokenEvents).toBe(1);
    expect(m.done).toBe(true);
  });

  it('usage: null and an empty content are not tokens or usage', () => {
    const m = new SseMeter();
    m.feed(b('data: {"choices":[{"delta":{"content":""}}],"usage":null}\n\n'), 1);
    expect(m.tokenEvents).toBe(0);
    expect(m.usagePrompt).toBe(-1);
  });

  it('a key that only ends like the text key is not it', () => {
    const m = new SseMeter('completions');
    m.feed(b('data: {"choices":[{"index":0,"context_text":"no","text":""}]}\n\ndata: {"choices":[{"pretext":"x"}]}\n\n'), 1);
    expect(m.tokenEvents).toBe(0);
    m.feed(b('data: {"choices":[{"pretext":"x","text":"yes"}]}\n\n'), 2);
    expect(m.tokenEvents).toBe(1);
  });

  it('content that starts with an escaped quote is a token', () => {
    const m = new SseMeter();
    m.feed(b(`data: ${JSON.stringify({ choices: [{ delta: { content: '"quoted"' } }] })}\n\n`), 1);
    expect(m.tokenEvents).toBe(1);
  });

  it('"content":" inside the generated text does not count twice', () => {
    const m = new SseMeter();
    m.feed(b(`data: ${JSON.stringify({ choices: [{ delta: { content: 'say "content":"x"' } }] })}\n\n`), 1);
    expect(m.tokenEvents).toBe(1);
  });

  const malformed: [string, string, RegExp][] = [
    ['data that is not JSON', 'data: hello\n\n', /not a JSON object/],
    ['a JSON array', 'data: [1,2]\n\n', /not a JSON object/],
    ['an unexpected line', 'garbage here\n\n', /unexpected SSE line/],
    ['an HTML page', '<html><body>502 Bad Gateway</body></html>\n\n', /unexpected SSE line/],
    ['a truncated JSON object', 'data: {"choices":[\n\n', /not a JSON object/],
    ['invalid JSON in a usage event', 'data: {"usage":{"prompt_tokens":1,,}}\n\n', /not valid JSON/],
  ];
  for (const [name, text, msg] of malformed) {
    it(`flags ${name} as malformed`, () => {
      const m = new SseMeter();
      expect(m.feed(b(text), 1)).toBe(false);
      expect(m.malformed).toMatch(msg);
    });
  }

  it('flags an event longer than 1 MiB without a boundary', () => {
    const m = new SseMeter();
    const big = 'data: {"x":"' + 'a'.repeat(1 << 20);
    expect(m.feed(b(big), 1)).toBe(false);
    expect(m.malformed).toMatch(/longer than 1 MiB/);
  });

  it('does not report [DONE] for a stream that stopped before it', () => {
    const m = new SseMeter();
    for (const e of sseEvents(3).slice(0, -1)) m.feed(b(e), 1);
    expect(m.done).toBe(false);
    expect(m.tokenEvents).toBe(3);
  });

  it('accepts CRLF line endings (the SSE spec allows them)', () => {
    const m = new SseMeter();
    const text = sseEvents(4, { usage: { prompt_tokens: 2, completion_tokens: 4 } })
      .join('')
      .replace(/\n/g, '\r\n');
    const buf = b(text);
    // cut between \r and \n too
    for (let i = 0; i < buf.length; i += 5) expect(m.feed(buf.subarray(i, i + 5), i)).toBe(true);
    expect(m.tokenEvents).toBe(4);
    expect(m.done).toBe(true);
    expect(m.usageCompletion).toBe(4);
  });

  it('accepts extra blank lines between events', () => {
    const m = new SseMeter();
    const e = sseEvents(2);
    expect(m.feed(b(e[1]! + '\n' + e[2]! + '\n\n\n' + e.at(-1)!), 1)).toBe(true);
    expect(m.tokenEvents).toBe(2);
    expect(m.done).toBe(true);
  });

  it('accepts `data:` without the optional space', () => {
    const m = new SseMeter();
    m.feed(b('data:{"choices":[{"delta":{"content":"hi"}}]}\n\n'), 1);
    m.feed(b('data:[DONE]\n\n'), 2);
    expect(m.tokenEvents).toBe(1);
    expect(m.done).toBe(true);
  });

  it('reads the data line of an event that has an `event:` or `id:` field first', () => {
    const m = new SseMeter();
    m.feed(b('id: 1\ndata: {"choices":[{"delta":{"content":"hi"}}]}\n\n'), 1);
    m.feed(b('event: message\ndata: [DONE]\n\n'), 2);
    expect(m.tokenEvents).toBe(1);
    expect(m.done).toBe(true);
  });
});

describe('sseErrorEvent', () => {
  it("is an OpenAI error object as an SSE event, followed by [DONE]; from a worker (another gateway), a meter reads it as the worker's error", () => {
    const s = sseErrorEvent('worker w1 dropped the stream', 'upstream_stream_broken');
    expect(s).toBe('data: {"error":{"message":"worker w1 dropped the stream","type":"upstream_error","code":"upstream_stream_broken"}}\n\ndata: [DONE]\n\n');
    const m = new SseMeter();
    expect(m.feed(b(s), 1)).toBe(false);
    expect(m.workerError).toBe('worker w1 dropped the stream (code "upstream_stream_broken")');
    expect(m.done).toBe(false);
  });
});

describe('SseMeter fast path (text key checked where the last token event had it)', () => {
  const ev = (id: string, text: string, tail = ']}') =>
    `data: {"id":"${id}","object":"text_completion","choices":[{"index":0,"text":${JSON.stringify(text)},"finish_reason":null}${tail}\n\n`;

  it('follows the key when the fields before it change length, and an empty value is no token', () => {
    const m = new SseMeter('completions');
    expect(m.feed(b(ev('a', ' x') + ev('a', ' y') + ev('abc', ' z') + ev('abc', '') + ev('a', ' w') + 'data: [DONE]\n\n'), 1)).toBe(true);
    expect(m.tokenEvents).toBe(4);
    expect(m.done).toBe(true);
  });

  it('a line that is not `data: ` at the same place is still malformed', () => {
    const m = new SseMeter('completions');
    expect(m.feed(b(ev('a', ' x')), 1)).toBe(true);
    expect(m.feed(b(ev('a', ' y').replace('data: ', 'datx: ')), 2)).toBe(false);
    expect(m.malformed).toMatch(/unexpected SSE line "datx: /);
    expect(m.tokenEvents).toBe(1);
  });

  it('the key at the remembered place but with another key name is not a token', () => {
    const m = new SseMeter('completions');
    expect(m.feed(b(ev('a', ' x')), 1)).toBe(true);
    expect(m.feed(b(ev('a', ' y').replace('"text":', '"test":')), 2)).toBe(true);
    expect(m.tokenEvents).toBe(1);
  });

  it('the fast path compares every byte of `data: ` and of the key (chat and completions)', () => {
    const chat = (t: string) => `data: {"id":"c","choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
    const done = 'data: [DONE]\n\n';
    for (const [endpoint, make, key] of [
      ['chat', chat, 'content":"'],
      ['completions', (t: string) => ev('a', t), 'text":"'],
    ] as const) {
      const good = make(' y');
      const k = good.indexOf(key);
      // each byte of the key replaced: not a token (the text path finds no key there); each byte of
      // `data: ` replaced: not a data line, so malformed (or, for the space, `data:` with no space and
      // a body that does not start with `{`)
      // (a byte that breaks the JSON, a quote or the colon, makes the event malformed: the text path parses it)
      for (let i = 0; i < key.length; i++) {
        const m = new SseMeter(endpoint);
        const bad = good.slice(0, k + i) + (good[k + i] === 'x' ? 'y' : 'x') + good.slice(k + i + 1);
        const json = isJson(bad.slice(6, -2));
        expect(m.feed(b(make(' x') + bad + make(' z') + done), 1), `${endpoint} key byte ${i}`).toBe(json);
        expect(m.tokenEvents, `${endpoint} key byte ${i}`).toBe(json ? 2 : 1);
      }
      for (let i = 0; i < 6; i++) {
        const m = new SseMeter(endpoint);
        const bad = good.slice(0, i) + 'x' + good.slice(i + 1);
        expect(m.feed(b(make(' x') + bad + done), 1), `${endpoint} data byte ${i}`).toBe(false);
        expect(m.tokenEvents).toBe(1);
      }
      const m = new SseMeter(endpoint);
      expect(m.feed(b(make(' x') + good + make(' z') + done), 1)).toBe(true);
      expect(m.tokenEvents).toBe(3);
    }
  });

  it('a new meter starts where the last one found the key: a stream of token events and [DONE] is never decoded as text; a wrong guess is only slower', () => {
    const stream = (id: string, n: number) => Array.from({ length: n }, (_, i) => ev(id, ` t${i}`)).join('') + 'data: [DONE]\n\n';
    expect(new SseMeter('completions').feed(b(stream('a', 2)), 1)).toBe(true);
    const toString = vi.spyOn(Buffer.prototype, 'toString');
    try {
      const m = new SseMeter('completions');
      expect(m.feed(b(stream('a', 5)), 1)).toBe(true);
      expect(toString).not.toHaveBeenCalled();
      expect([m.tokenEvents, m.done]).toEqual([5, true]);
    } finally {
      toString.mockRestore();
    }
    // other streams (the key elsewhere, chat instead of completions) are read right after it, and after each other
    for (const [endpoint, text, tokens] of [
      ['completions', stream('abcdef', 3), 3],
      ['completions', stream('a', 4).replace('"text":', '"test":'), 3],
      ['chat', `data: {"id":"c","choices":[{"index":0,"delta":{"content":" x"}}]}\n\n${stream('a', 2)}`, 1],
      ['completions', stream('a', 1), 1],
    ] as const) {
      const m = new SseMeter(endpoint);
      expect(m.feed(b(text), 1)).toBe(true);
      expect([m.tokenEvents, m.done]).toEqual([tokens, true]);
    }
  });

  it('keeps a copy of an incomplete event: the chunk it came in may be overwritten (a borrowed read buffer)', () => {
    const m = new SseMeter('completions');
    const text = ev('a', ' x') + ev('a', ' y');
    const shared = Buffer.from(text);
    const cut = text.length - 20;
    expect(m.feed(shared.subarray(0, cut), 1)).toBe(true);
    const rest = Buffer.from(shared.subarray(cut));
    shared.fill(0x7a); // the next read lands in the same memory
    expect(m.feed(rest, 2)).toBe(true);
    expect(m.tokenEvents).toBe(2);
    expect(m.malformed).toBeUndefined();
  });

  it('counts the same with a carried tail and with CRLF (positions shifted from the chunk)', () => {
    const text = ev('a', ' x') + ev('a', ' y') + ev('a', ' z') + 'data: [DONE]\n\n';
    for (const t of [text, text.replace(/\n/g, '\r\n')]) {
      const m = new SseMeter('completions');
      expect(feedCut(m, t, [5, 90, 91, 200])).toBe(true);
      expect(m.tokenEvents).toBe(3);
      expect(m.done).toBe(true);
    }
  });
});
