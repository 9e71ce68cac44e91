// What a stream sent, read back at a break: LF or CRLF framing, the role event, folding past the buffer's
// bound; plain text events read by their shape exactly as one JSON.parse each reads them.
import { describe, expect, it } from 'vitest';
import { SentLog, emptySoFar, readEvent, readEvents } from '../../../src/gateway/resume-state.js';
import type { SoFar } from '../../../src/gateway/resume-state.js';
import { SseMeter } from '../../../src/gateway/sse.js';

const ev = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 5, model: 'm', choices: [{ index: 0, delta }] })}`;

describe('SentLog', () => {
  it('reads events framed with LF and with CRLF alike (workers send either)', () => {
    for (const nl of ['\n', '\r\n']) {
      const log = new SentLog(true, 65_536);
      log.append(Buffer.from([ev({ role: 'assistant', content: '' }), ev({ content: 'Hé' }), ev({ content: 'llo' })].map((e) => e + nl + nl).join('')));
      expect(log.read()).toMatchObject({ id: 'c1', created: 5, text: 'Héllo', tokenEvents: 2, role: true, unreadable: 0 });
      log.release();
    }
  });

  it("reasoning sent under either name (reasoning_content, or newer vLLM's reasoning) cannot be carried on, read in full or by shape", () => {
    for (const key of ['reasoning_content', 'reasoning']) {
      const log = new SentLog(true, 65_536);
      // plain text events first: the later ones are read by their shape
      log.append(
        Buffer.from(
          [ev({ role: 'assistant', content: '' }), ev({ content: 'a' }), ev({ content: 'b' }), ev({ [key]: 'thinking' })].map((e) => `${e}\n\n`).join(''),
        ),
      );
      expect([key, log.read().unsupported]).toEqual([key, 'reasoning content']);
      log.release();
    }
  });

  it('never grows its buffer past its bound (it doubled past one that is not 16 KiB times a power of two)', () => {
    const log = new SentLog(true, 40_000);
    let most = 0;
    let want = '';
    for (let i = 0; i < 400; i++) {
      log.append(Buffer.from(`${ev({ content: ` word${i}` })}\n\n`));
      want += ` word${i}`;
      most = Math.max(most, log.capacity);
    }
    expect(most).toBeGreaterThan(16_384);
    expect(most).toBeLessThanOrEqual(40_000);
    expect(log.read().text).toBe(want);
    log.release();
  });

  it('folds what it holds into text past its bound, and reads the same', () => {
    const log = new SentLog(true, 4096);
    let want = '';
    for (let i = 0; i < 200; i++) {
      log.append(Buffer.from(`${ev({ content: ` w${i}` })}\n\n`));
      want += ` w${i}`;
    }
    expect(log.size).toBeLessThanOrEqual(16_384);
    expect(log.read()).toMatchObject({ text: want, tokenEvents: 200 });
  });

  it('keeps the token ids of what it folded, and reading twice reads the same', () => {
    const log = new SentLog(false, 4096);
    const ids: number[] = [];
    for (let i = 0; i < 200; i++) {
      log.append(Buffer.from(`data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, text: ` w${i}`, token_ids: [i] }] })}\n\n`));
      ids.push(i);
    }
    expect(log.read()).toMatchObject({ tokenIds: ids, idsAtText: 200, idsMissing: false });
    expect(log.read().tokenIds).toEqual(ids);
  });
});

/** The reference: every event's `data:` read in full, one JSON.parse each (what readEvents did before its fast path). */
function readEachInFull(bytes: Buffer, chat: boolean): SoFar {
  const s = emptySoFar();
  for (const e of bytes.toString('utf8').replace(/\r\n?/g, '\n').split('\n\n')) {
    // (an empty first data line adds nothing, as in the loop before the fast path)
    let data = '';
    for (const l of e.split('\n')) {
      if (!l.startsWith('data:')) continue;
      const v = l.slice(l.charCodeAt(5) === 32 ? 6 : 5);
      data = data === '' ? v : `${data}\n${v}`;
    }
    if (data !== '') readEvent(s, data, chat);
  }
  return s;
}

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('readEvents: plain text events read by their shape', () => {
  const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [{ index: 0, ...choice, logprobs: null, finish_reason: null }], ...extra })}\n\n`;
  const pieces = [' plain', ' "quoted"', ' back\\slash', '\n', 'tab\t', ' é', ' 漢字', ' 🙂', ' \u2028', '', ' }]}', ' "content":"x"', ' \\"'];

  it('reads what one JSON.parse per event reads, whatever the texts, events and framing (seeded)', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const r = rng(seed);
      const chat = r() < 0.7;
      const events: string[] = [];
      if (chat && r() < 0.8) events.push(chunk({ delta: { role: 'assistant', content: '' } }));
      const n = 1 + Math.floor(r() * 40);
      for (let i = 0; i < n; i++) {
        const text = pieces[Math.floor(r() * pieces.length)] as string;
        const x = r();
        // mostly plain text events; now and then one of another kind between them
        if (x < 0.8) events.push(chunk(chat ? { delta: { content: text } } : { text }));
        else if (x < 0.84) events.push(chunk(chat ? { delta: { content: text }, token_ids: [i] } : { text, token_ids: [i] }));
        else if (x < 0.87) events.push(chunk(chat ? { delta: { content: text } } : { text }, { usage: { prompt_tokens: 3, completion_tokens: i } }));
        else if (x < 0.9) events.push(`: keep-alive\n\n`);
        else if (x < 0.92) events.push(chunk(chat ? { delta: { tool_calls: [{ index: 0 }] } } : { text, index: 1 }));
        else if (x < 0.94)
          events.push(`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":${JSON.stringify(text)}},"finish_reason":null}]}\n\n`);
        else if (x < 0.96) events.push(`data: not json\n\n`);
        else if (x < 0.98) events.push(`event: message\ndata: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text }, text }] })}\n\n`);
        else events.push(chunk(chat ? { delta: { content: text, role: null } } : { text }));
      }
      if (r() < 0.5) events.push(chunk({ delta: {}, text: '' }).replace('"finish_reason":null', '"finish_reason":"stop"'));
      if (r() < 0.5) events.push('data: [DONE]\n\n');
      let wire = events.join('');
      if (r() < 0.2) wire = wire.replace(/\n/g, '\r\n');
      const bytes = Buffer.from(wire);
      const s = emptySoFar();
      readEvents(s, bytes, chat);
      expect(s, `seed ${seed}`).toEqual(readEachInFull(bytes, chat));
    }
  });

  it('an event that keeps the shape around more than one string literal is read in full', () => {
    // the same head and tail as the text events, with a middle that closes the delta and adds a finish
    const head = '{"id":"c","choices":[{"index":0,"delta":{"content":';
    const tail = '},"finish_reason":null}]}';
    const events = [`data: ${head}"a"${tail}`, `data: ${head}"b"},"finish_reason":"length","x":{"y":"z"${tail}`, `data: ${head}"c"${tail}`];
    const bytes = Buffer.from(events.map((e) => `${e}\n\n`).join(''));
    const s = emptySoFar();
    readEvents(s, bytes, true);
    expect(s).toEqual(readEachInFull(bytes, true));
    expect(s.text).toBe('abc');
  });

  it("SGLang's `role: null` on every event: the role is the client's, the text read by its shape", () => {
    const ev2 = (content: string) =>
      `data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":null,"content":${JSON.stringify(content)},"reasoning_content":null,"tool_calls":null},"finish_reason":null}]}\n\n`;
    const bytes = Buffer.from(['Hel', 'lo', ' "w"'].map(ev2).join(''));
    const s = emptySoFar();
    readEvents(s, bytes, true);
    expect(s).toEqual(readEachInFull(bytes, true));
    expect(s).toMatchObject({ text: 'Hello "w"', role: true, tokenEvents: 3 });
  });
});

describe('readEvents: no shape from a data field over several lines (regression: a later event with the newline and no `data:` was read as text)', () => {
  it('an event whose second line lacks `data:` is read as the reference reads it (unreadable), not as text', () => {
    // the first event's JSON is split over two `data:` lines (legal SSE): its data holds a "\n", so the
    // learnt head does too; a later event with that "\n" but no `data:` on its second line matches
    // `data: ` + head byte for byte, though its data (first line only) is not JSON. SseMeter once
    // forwarded both (it checked only `data: {` … `}`); now it reads the second line, not SSE, as
    // malformed and forwards the first only — the log is read alike either way.
    const learnt = 'data: {"id":"c","choices":[{"index":0,\ndata: "delta":{"content":"a"}}]}';
    const broken = 'data: {"id":"c","choices":[{"index":0,\n"delta":{"content":"b"}}]}';
    const bytes = Buffer.from(`${learnt}\n\n${broken}\n\n`);
    const meter = new SseMeter('chat');
    expect(meter.feed(bytes, 0)).toBe(false);
    expect(meter.malformed).toMatch(/unexpected SSE line "\\"delta\\"/);
    expect(meter.out.toString()).toBe(`${learnt}\n\n`);
    expect(meter.tokenEvents).toBe(1);
    const s = emptySoFar();
    readEvents(s, bytes, true);
    const ref = readEachInFull(bytes, true);
    expect(ref).toMatchObject({ text: 'a', unreadable: 1 });
    // planResume refuses a stream with an unreadable event; the fast path says the client has "ab"
    expect(s).toEqual(ref);
  });

  it('the same with the newline in the tail', () => {
    const learnt = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]\ndata: }';
    const broken = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"}}]\n}';
    const bytes = Buffer.from(`${learnt}\n\n${broken}\n\n`);
    const s = emptySoFar();
    readEvents(s, bytes, true);
    expect(s).toEqual(readEachInFull(bytes, true));
  });
});
