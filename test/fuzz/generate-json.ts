// JSON-body cases: a valid chat/completions request with wrong types, deep nesting, huge numbers,
// unicode and lone surrogates, invalid UTF-8, truncation, duplicate keys, missing fields, odd
// content types, enormous strings under the limit and declared bodies over it.
import type { Rng } from './rng.js';
import { host } from './cases.js';
import type { Built, GenContext, Want } from './cases.js';
import { pickSplit, validBody } from './generate-chunked.js';
import {
  chunkBody,
  clientHeaders,
  headOf,
  json,
  nestedArrays,
  nestedObjects,
  parsesAsJson,
  prompt,
  removeHeader,
  req,
  setHeader,
  withChunked,
  withLength,
} from './requests.js';

const UNICODE = [
  '🚀',
  'e\u0301',
  '\u202e',
  '\u200b',
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '\ufeff',
  '\uffff',
  '\u{10ffff}',
  '日本語',
  'ｆｕｌｌ',
  '\u0085\u2028\u2029',
  'a\u0000b',
];
const BAD_UTF8 = [
  [0xff],
  [0xfe],
  [0xc3, 0x28],
  [0xed, 0xa0, 0x80],
  [0xc0, 0xaf],
  [0xe2, 0x82],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xef, 0xbf],
];

/** Fields and values the gateway must refuse (400), per endpoint. */
const BAD_FIELDS: Record<'chat' | 'completions', Record<string, unknown[]>> = {
  chat: {
    model: [5, null, [], {}, '', true, 1.5],
    messages: ['hi', {}, [], [1], [null], ['x'], [{}], [{ role: 5, content: 'hi' }], [{ role: 'user', content: 5 }], [{ role: 'user', content: {} }], [[]]],
    stream: ['yes', 1, 0, [], {}],
    max_tokens: [0, -1, 1.5, '4', [], {}, true, 1e300],
    temperature: [3, -0.1, 'x', [], 2.0001],
    top_p: [1.5, -1, 'x'],
    n: [0, -1, 1.5, 'x'],
    user: [5, [], {}, true],
  },
  completions: {
    model: [5, null, [], {}, '', true],
    prompt: [5, null, {}, true],
    stream: ['yes', 1],
    max_tokens: [0, -1, 1.5, '4'],
    temperature: [3, 'x'],
  },
};

/** Values the gateway accepts and the simulated worker answers 200. */
const GOOD_FIELDS: Record<string, unknown[]> = {
  temperature: [0, 1, 2, 0.7, null],
  top_p: [0.5, 1, null],
  n: [1, null],
  user: ['u-123', null, ''],
  stream: [null, false],
  foo: [1, 'bar', { nested: [1, 2] }],
};

const CONTENT_TYPES: [string | null, Want][] = [
  [null, 'reject'],
  ['text/plain', 'reject'],
  ['application/x-www-form-urlencoded', 'reject'],
  ['application/jsonx', 'reject'],
  ['application/json, text/plain', 'reject'],
  ['json', 'reject'],
  ['', 'reject'],
  ['application/json; charset=utf-8', 'ok'],
  ['Application/JSON', 'ok'],
  ['application/json;', 'ok'],
  ['application/json ; foo=bar', 'ok'],
];

export function jsonCase(rng: Rng, ctx: GenContext): Built {
  const b = validBody(rng, ctx);
  const endpoint = b.path === '/v1/completions' ? 'completions' : 'chat';
  const obj = b.obj;
  let body: Buffer;
  let want: Want = 'ok';
  let contentType: string | null | undefined;
  let overLimit = false;
  const m = rng.weighted<string>([
    ['valid', 2],
    ['field-type', 6],
    ['missing-field', 2],
    ['unknown-model', 1],
    ['good-fields', 2],
    ['unicode', 3],
    ['invalid-utf8-in-string', 2],
    ['invalid-utf8-outside', 1],
    ['deep-nesting', 2],
    ['number-text', 2],
    ['truncated', 2],
    ['byte-flip', 3],
    ['duplicate-key', 1],
    ['top-level', 1],
    ['empty', 1],
    ['encoding', 1],
    ['whitespace', 1],
    ['content-type', 2],
    ['big-string', 1],
    ['over-limit', 1],
  ]);
  const label = [`POST ${b.path}`, m];
  switch (m) {
    case 'valid':
      body = json(obj);
      break;
    case 'field-type': {
      const fields = BAD_FIELDS[endpoint];
      const f = rng.pick(Object.keys(fields));
      obj[f] = rng.pick(fields[f] as unknown[]);
      label.push(f);
      body = json(obj);
      want = 'reject';
      break;
    }
    case 'missing-field':
      delete obj[rng.pick(endpoint === 'chat' ? ['model', 'messages'] : ['model', 'prompt'])];
      body = json(obj);
      want = 'reject';
      break;
    case 'unknown-model':
      obj.model = rng.pick(['nope', `${ctx.model.toUpperCase()}X`, `${ctx.model} `, `${ctx.model}\u0000`, `${ctx.model}'`]);
      body = json(obj);
      want = 'reject';
      break;
    case 'good-fields': {
      const f = rng.pick(Object.keys(GOOD_FIELDS));
      obj[f] = rng.pick(GOOD_FIELDS[f] as unknown[]);
      if (endpoint === 'chat' && rng.chance(0.3)) obj.messages = [{ role: 'user', content: rng.pick([null, [{ type: 'text', text: 'hi' }]]) }];
      label.push(f);
      body = json(obj);
      break;
    }
    case 'unicode': {
      const u = rng.pick(UNICODE);
      if (endpoint === 'chat') obj.messages = [{ role: 'user', content: `${prompt(rng)} ${u} ${prompt(rng, 2)}` }];
      else obj.prompt = `${prompt(rng)}${u}`;
      if (rng.chance(0.3)) obj.user = u;
      body = json(obj);
      break;
    }
    case 'invalid-utf8-in-string': {
      // inside a string value the bytes decode to U+FFFD: still valid JSON
      const marker = 'QQMARKQQ';
      if (endpoint === 'chat') obj.messages = [{ role: 'user', content: `hi ${marker} there` }];
      else obj.prompt = `hi ${marker} there`;
      const s = JSON.stringify(obj);
      const at = s.indexOf(marker);
      body = Buffer.concat([Buffer.from(s.slice(0, at)), Buffer.from(rng.pick(BAD_UTF8)), Buffer.from(s.slice(at + marker.length))]);
      break;
    }
    case 'invalid-utf8-outside': {
      const s = JSON.stringify(obj);
      const at = rng.pick([1, s.length - 1, s.indexOf(',') + 1]);
      body = Buffer.concat([Buffer.from(s.slice(0, at)), Buffer.from(rng.pick(BAD_UTF8)), Buffer.from(s.slice(at))]);
      want = 'reject';
      break;
    }
    case 'deep-nesting': {
      const depth = rng.size(10, ctx.scale.maxDepth);
      const where = rng.pick(['extra', 'content', 'whole-arrays', 'whole-objects']);
      label.push(`${where}:${depth}`);
      const s = JSON.stringify(obj);
      if (where === 'extra') {
        body = Buffer.from(`${s.slice(0, -1)},"x_nested":${nestedArrays(depth)}}`);
        want = 'any';
      } else if (where === 'content') {
        obj[endpoint === 'chat' ? 'messages' : 'prompt'] = 'PLACEHOLDER';
        const t = JSON.stringify(obj);
        const nested = endpoint === 'chat' ? `[{"role":"user","content":${nestedArrays(depth)}}]` : nestedArrays(depth);
        body = Buffer.from(t.replace('"PLACEHOLDER"', nested));
        want = 'any';
      } else {
        body = Buffer.from(where === 'whole-arrays' ? nestedArrays(depth) : nestedObjects(depth));
        want = 'reject';
      }
      break;
    }
    case 'number-text': {
      const s = JSON.stringify(obj);
      const [field, value, w] = rng.pick<[string, string, Want]>([
        ['max_tokens', '1e400', 'reject'],
        ['max_tokens', '123456789012345678901234567890', 'reject'],
        ['max_tokens', `1${'0'.repeat(400)}`, 'reject'],
        ['max_tokens', '-0', 'reject'],
        ['max_tokens', '1.0', 'ok'],
        ['max_tokens', '1E0', 'ok'],
        ['max_tokens', '0.1e1', 'ok'],
        ['temperature', '1e-400', 'ok'],
        ['temperature', '1e999', 'reject'],
        ['temperature', '-0', 'ok'],
        ['temperature', `0.${'0'.repeat(1000)}1`, 'ok'],
        ['max_tokens', '01', 'reject'],
        ['max_tokens', '+1', 'reject'],
        ['max_tokens', 'NaN', 'reject'],
        ['temperature', 'Infinity', 'reject'],
      ]);
      label.push(`${field}=${value.slice(0, 12)}`);
      const re = field === 'max_tokens' ? /"max_tokens":\d+/ : /"temperature":[\d.]+/;
      body = Buffer.from(re.test(s) ? s.replace(re, `"${field}":${value}`) : `${s.slice(0, -1)},"${field}":${value}}`);
      want = w;
      break;
    }
    case 'truncated': {
      const full = json(obj);
      body = full.subarray(0, rng.int(1, full.length - 1));
      want = 'reject';
      break;
    }
    case 'byte-flip': {
      body = Buffer.from(json(obj));
      for (let i = rng.int(1, 2); i > 0; i--) {
        const p = rng.int(0, body.length - 1);
        body[p] = rng.chance(0.5) ? (body[p] as number) ^ (1 << rng.int(0, 7)) : rng.int(0, 255);
      }
      want = parsesAsJson(body) ? 'any' : 'reject';
      break;
    }
    case 'duplicate-key': {
      const s = JSON.stringify(obj);
      // the last one wins (JSON.parse, and the worker parses the same bytes)
      if (rng.chance(0.5)) {
        body = Buffer.from(`{"model":5,${s.slice(1)}`);
      } else {
        body = Buffer.from(`${s.slice(0, -1)},"model":5}`);
        want = 'reject';
      }
      break;
    }
    case 'top-level':
      body = Buffer.from(rng.pick(['[]', '"x"', '1', 'null', 'true', `[${JSON.stringify(obj)}]`, '""', '{}', '{"model":"m"}extra', 'nul']));
      want = 'reject';
      break;
    case 'empty':
      body = Buffer.alloc(0);
      want = 'reject';
      break;
    case 'encoding':
      // a BOM, or the JSON in UTF-16: JSON.parse of the UTF-8 decoding fails
      body = rng.chance(0.5) ? Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json(obj)]) : Buffer.from(JSON.stringify(obj), 'utf16le');
      want = 'reject';
      break;
    case 'whitespace': {
      const ws = (): string => rng.pick([' ', '\n', '\t', '\r\n', '  \n\t']).repeat(rng.int(1, 50));
      body = Buffer.from(`${ws()}${JSON.stringify(obj, null, rng.pick([0, 1, 2, '\t']))}${ws()}`);
      break;
    }
    case 'content-type': {
      const [ct, w] = rng.pick(CONTENT_TYPES);
      contentType = ct;
      label.push(JSON.stringify(ct));
      body = json(obj);
      want = w;
      break;
    }
    case 'big-string': {
      const n = Math.min(ctx.maxBodyBytes - 4096, rng.size(16 * 1024, ctx.scale.bigBody));
      const text = 'lorem ipsum '.repeat(Math.ceil(n / 12)).slice(0, n);
      if (endpoint === 'chat') obj.messages = [{ role: 'user', content: text }];
      else obj.prompt = text;
      label.push(String(n));
      body = json(obj);
      want = 'any'; // the worker may find the prompt longer than its context
      break;
    }
    default: {
      // declared over the limit: refused from the head, before the body
      overLimit = true;
      body = json(obj);
      want = 'reject';
    }
  }
  const r = req('POST', b.path, clientHeaders(rng, host(rng), true));
  if (contentType === null) removeHeader(r, 'content-type');
  else if (contentType !== undefined) setHeader(r, 'Content-Type', contentType);
  let chunked = false;
  if (overLimit) {
    withLength(r, body);
    setHeader(r, 'Content-Length', String(ctx.maxBodyBytes + rng.int(1, 1 << 20)));
  } else if (rng.chance(0.2)) {
    chunked = true;
    withChunked(r, chunkBody(rng, body, pickSplit(rng)));
  } else withLength(r, body);
  if (chunked) label.push('chunked');
  const all = Buffer.concat([headOf(r), r.body]);
  return {
    label: label.join(' | '),
    target: 'data',
    pieces: [all],
    gapMs: 0,
    answers: [{ want, head: false }],
    complete: true,
    end: 'wait',
    mayCloseSilently: false,
  };
}
