// Request parsing: every bad input is a 4xx GlidepathError whose OpenAI body names the field.
import { describe, expect, it } from 'vitest';
import { GlidepathError } from '../../../src/errors.js';
import { parseRequest } from '../../../src/gateway/request.js';
import { jsonDepth } from '../../../src/http/body.js';
import type { Endpoint } from '../../../src/gateway/request.js';

function errorOf(fn: () => unknown): GlidepathError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GlidepathError);
    return err as GlidepathError;
  }
  throw new Error('expected an error');
}

const buf = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
const chat = (extra: Record<string, unknown> = {}) => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('parseRequest', () => {
  it('parses a chat request', () => {
    const raw = buf(chat({ stream: true, user: 'u1', max_tokens: 16, temperature: 0, top_p: 1, n: 1 }));
    const p = parseRequest(raw, 'chat');
    expect(p).toMatchObject({ model: 'm', stream: true, user: 'u1', maxTokens: 16 });
    expect(p.raw).toBe(raw);
  });

  it('parses a completions request and max_completion_tokens', () => {
    expect(parseRequest(buf({ model: 'm', prompt: ['a', 'b'], max_completion_tokens: 3 }), 'completions')).toMatchObject({
      stream: false,
      maxTokens: 3,
      user: undefined,
    });
    expect(parseRequest(buf({ model: 'm', prompt: 'x', stream: null, user: null }), 'completions').stream).toBe(false);
  });

  it('accepts content as parts or null (tool-call messages)', () => {
    expect(() =>
      parseRequest(
        buf(
          chat({
            messages: [
              { role: 'user', content: [{ type: 'text', text: 'x' }] },
              { role: 'assistant', content: null },
            ],
          }),
        ),
        'chat',
      ),
    ).not.toThrow();
  });

  const bad: [string, unknown, Endpoint, string, RegExp][] = [
    ['empty body', '', 'chat', 'invalid_json', /empty/],
    ['not JSON', '{"model":', 'chat', 'invalid_json', /not valid JSON/],
    ['a JSON string', '"hello"', 'chat', 'invalid_json', /must be a JSON object, got string/],
    ['null', 'null', 'chat', 'invalid_json', /got null/],
    ['an array', '[]', 'chat', 'invalid_json', /got array/],
    ['no model', { messages: [] }, 'chat', 'invalid_request', /^model: required/],
    ['model a number', { model: 1, messages: [] }, 'chat', 'invalid_request', /^model: expected a non-empty string, got number/],
    ['model empty', { model: '', messages: [] }, 'chat', 'invalid_request', /^model: expected a non-empty string/],
    ['stream a string', chat({ stream: 'true' }), 'chat', 'invalid_request', /^stream: expected a boolean, got string/],
    ['no messages', { model: 'm' }, 'chat', 'invalid_request', /^messages: required/],
    ['messages an object', { model: 'm', messages: {} }, 'chat', 'invalid_request', /^messages: expected an array, got object/],
    ['messages empty', { model: 'm', messages: [] }, 'chat', 'invalid_request', /^messages: must contain at least one message/],
    ['a message that is a string', { model: 'm', messages: ['hi'] }, 'chat', 'invalid_request', /^messages\[0\]: expected an object, got string/],
    [
      'a message without role',
      { model: 'm', messages: [{ role: 'user', content: 'a' }, { content: 'b' }] },
      'chat',
      'invalid_request',
      /^messages\[1\]\.role: expected a string, got undefined/,
    ],
    ['content a number', { model: 'm', messages: [{ role: 'user', content: 1 }] }, 'chat', 'invalid_request', /^messages\[0\]\.content/],
    ['no prompt', { model: 'm' }, 'completions', 'invalid_request', /^prompt: required/],
    ['prompt an object', { model: 'm', prompt: {} }, 'completions', 'invalid_request', /^prompt: expected a string or an array, got object/],
    ['max_tokens 0', chat({ max_tokens: 0 }), 'chat', 'invalid_request', /^max_tokens: must be at least 1, got 0/],
    ['max_tokens a string', chat({ max_tokens: '5' }), 'chat', 'invalid_request', /^max_tokens: expected an integer, got string/],
    ['max_completion_tokens fractional', chat({ max_completion_tokens: 2.5 }), 'chat', 'invalid_request', /^max_completion_tokens/],
    ['n 0', chat({ n: 0 }), 'chat', 'invalid_request', /^n: must be at least 1/],
    ['temperature negative', chat({ temperature: -0.1 }), 'chat', 'invalid_request', /^temperature: must be between 0 and 2/],
    ['temperature a string', chat({ temperature: 'hot' }), 'chat', 'invalid_request', /^temperature: expected a number, got string/],
    ['top_p above 1', chat({ top_p: 1.5 }), 'chat', 'invalid_request', /^top_p: must be between 0 and 1/],
    ['user an object', chat({ user: {} }), 'chat', 'invalid_request', /^user: expected a string, got object/],
  ];
  for (const [name, body, endpoint, code, msg] of bad) {
    it(`${name} → 400 ${code}`, () => {
      const e = errorOf(() => parseRequest(buf(body), endpoint));
      expect(e.status).toBe(400);
      expect(e.code).toBe(code);
      expect(e.message).toMatch(msg);
      expect(e.toBody()).toEqual({ error: { message: e.message, type: 'invalid_request_error', code } });
    });
  }
});

describe('deeply nested JSON (a body that holds JSON.parse for seconds)', () => {
  it('jsonDepth counts array and object nesting, not brackets inside strings, and stops past the limit', () => {
    expect(jsonDepth(Buffer.from('{"a":[1,{"b":[]}]}'), 10)).toBe(4);
    expect(jsonDepth(Buffer.from('{"a":"[[[[{{{{\\"[[["}'), 10)).toBe(1);
    expect(jsonDepth(Buffer.from('['.repeat(1000)), 10)).toBe(11);
  });

  it('a large body nested past the limit is a 400 naming the limit; one with brackets in its strings is parsed', () => {
    const deep = Buffer.from(`{"model":"m","messages":${'['.repeat(300_000)}${']'.repeat(300_000)}}`);
    expect(() => parseRequest(deep, 'chat')).toThrow(/nests JSON deeper than 256 levels/);
    const text = '['.repeat(40_000);
    expect(parseRequest(buf(chat({ messages: [{ role: 'user', content: text }] })), 'chat').model).toBe('m');
  });
});
