// The shared request-body helpers: content type, size limit, JSON (src/http/body.ts).
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { checkContentType, parseJsonBody, readBody } from '../../../src/http/body.js';
import { caught } from '../../helpers/errors.js';

describe('checkContentType', () => {
  it('accepts application/json with parameters, in any case', () => {
    expect(() => checkContentType('application/json')).not.toThrow();
    expect(() => checkContentType('Application/JSON; charset=utf-8')).not.toThrow();
    expect(() => checkContentType(' application/json ;charset=UTF-8')).not.toThrow();
  });
  it('refuses anything else with 415 naming what it got', () => {
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', '']) {
      const e = caught(() => checkContentType(ct));
      expect(e.status).toBe(415);
      expect(e.code).toBe('unsupported_content_type');
    }
    expect(caught(() => checkContentType(undefined)).message).toMatch(/got none/);
    expect(caught(() => checkContentType('text/plain')).message).toMatch(/"text\/plain"/);
  });
});

describe('readBody', () => {
  function fakeReq(chunks: Buffer[], headers: Record<string, string> = {}): IncomingMessage {
    const r = Readable.from(chunks) as unknown as IncomingMessage;
    (r as { headers: Record<string, string> }).headers = headers;
    return r;
  }

  it('reads the whole body', async () => {
    const body = await readBody(fakeReq([Buffer.from('ab'), Buffer.from('cd')]), 100);
    expect(body.toString()).toBe('abcd');
  });

  it('refuses a declared length over the limit before reading', async () => {
    await expect(readBody(fakeReq([Buffer.from('x')], { 'content-length': '101' }), 100)).rejects.toMatchObject({ status: 413, code: 'body_too_large' });
  });

  it('refuses as soon as the streamed body crosses the limit', async () => {
    await expect(readBody(fakeReq([Buffer.alloc(60), Buffer.alloc(60)]), 100)).rejects.toMatchObject({ status: 413 });
  });

  it('a body of exactly the limit is fine', async () => {
    expect((await readBody(fakeReq([Buffer.alloc(100)]), 100)).length).toBe(100);
  });
});

describe('parseJsonBody', () => {
  it('parses JSON and refuses an empty or broken body with 400 invalid_json', () => {
    expect(parseJsonBody(Buffer.from('{"a":[1]}'))).toEqual({ a: [1] });
    expect(caught(() => parseJsonBody(Buffer.alloc(0)))).toMatchObject({
      status: 400,
      code: 'invalid_json',
      message: 'request body is empty; expected a JSON object',
    });
    expect(caught(() => parseJsonBody(Buffer.from('{"a":')))).toMatchObject({
      status: 400,
      code: 'invalid_json',
      message: expect.stringMatching(/^request body is not valid JSON: /) as unknown,
    });
  });
});
