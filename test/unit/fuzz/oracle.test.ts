// The hostile-clients fuzz's own oracle (test/fuzz): an oracle that passes everything guards
// nothing, so the response reader and the judge are checked against answers they must refuse,
// and the generator against replay (a case is the same bytes from its seed and index alone).
import { describe, expect, it } from 'vitest';
import { headOver } from '../../fuzz/cases.js';
import type { FuzzCase } from '../../fuzz/cases.js';
import type { Outcome } from '../../fuzz/client.js';
import { generate } from '../../fuzz/generate.js';
import { judge } from '../../fuzz/judge.js';
import { PROFILES } from '../../fuzz/harness.js';
import { ResponseReader } from '../../fuzz/responses.js';
import type { Response } from '../../fuzz/responses.js';

const T = { caseMs: 1000, quietMs: 100, closeMs: 1000 };

function read(bytes: string, expected: number, head = (_i: number) => false, close = false): ResponseReader {
  const r = new ResponseReader(expected, head);
  // byte by byte: framing must not depend on how the answer arrives
  for (const ch of Buffer.from(bytes, 'latin1')) r.push(Buffer.from([ch]));
  if (close) r.close();
  return r;
}

const json = (status: number, body: string): string =>
  `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
const ERR = (code: string): string => JSON.stringify({ error: { message: 'm', type: 'invalid_request_error', code } });

function kase(over: Partial<FuzzCase> = {}): FuzzCase {
  return {
    seed: 1,
    index: 0,
    family: 'head',
    label: 'GET /health | x',
    target: 'data',
    pieces: [Buffer.from('GET /health HTTP/1.1\r\n\r\n')],
    gapMs: 0,
    answers: [{ want: 'reject', head: false }],
    complete: true,
    end: 'wait',
    mayCloseSilently: false,
    ...over,
  };
}

function outcome(responses: Response[], over: Partial<Outcome> = {}): Outcome {
  return {
    responses,
    interim: 0,
    serverClosed: true,
    closedBeforeOurFin: false,
    finSent: false,
    timedOut: false,
    hung: false,
    malformed: undefined,
    connectError: undefined,
    cutShort: 0,
    trailing: 0,
    ms: 1,
    ...over,
  };
}

function res(status: number, body = ERR('x')): Response {
  return { status, headers: {}, body: Buffer.from(body) };
}

describe('the response reader', () => {
  it('frames by content-length, chunked, HEAD and the close; counts 1xx apart', () => {
    const r = read(
      `HTTP/1.1 100 Continue\r\n\r\n${json(200, '{"a":1}')}HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n1;e=1\r\nd\r\n0\r\nT: 1\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nHTTP/1.0 200 OK\r\n\r\nuntil close`,
      4,
      (i) => i === 2,
      true,
    );
    expect(r.malformed).toBeUndefined();
    expect(r.interim).toBe(1);
    expect(r.finals.map((x) => [x.status, x.body.toString()])).toEqual([
      [200, '{"a":1}'],
      [200, 'abcd'],
      [200, ''],
      [200, 'until close'],
    ]);
  });

  it('reports broken framing before the expected answers, and bytes after them as trailing', () => {
    expect(read('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n', 1).malformed).toMatch(/chunked/);
    expect(read('garbage\r\n\r\n', 1).malformed).toMatch(/status line/);
    expect(read('HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n', 1).malformed).toMatch(/content-length/);
    const head = read(`${json(400, ERR('bad'))}`, 1, () => true);
    expect(head.malformed).toBeUndefined();
    expect(head.trailing).toBe(ERR('bad').length);
  });
});

describe('the judge', () => {
  it('fails a 5xx for a client fault, but for 505/501 with their codes', () => {
    expect(judge(kase(), outcome([res(500)]), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([res(502)]), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([res(505, ERR('http_version_not_supported'))]), T).problems).toEqual([]);
    expect(judge(kase(), outcome([res(501, ERR('unsupported_transfer_encoding'))]), T).problems).toEqual([]);
    expect(judge(kase(), outcome([res(505, ERR('other'))]), T).problems).toHaveLength(1);
    // even where anything goes
    expect(judge(kase({ answers: [{ want: 'any', head: false }] }), outcome([res(503)]), T).problems).toHaveLength(1);
  });

  it('fails a valid request not answered 2xx, an invalid one answered 2xx, and an error body that is not OpenAI-style', () => {
    expect(judge(kase({ answers: [{ want: 'ok', head: false }] }), outcome([res(400)]), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([res(200, '{}')]), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([res(400, 'oops')]), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([res(400)]), T).problems).toEqual([]);
  });

  it('fails a connection that hangs, times out, or closes without answering; not one the client gave up on', () => {
    expect(judge(kase(), outcome([], { hung: true }), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([], { timedOut: true, finSent: true }), T).problems).toHaveLength(1);
    expect(judge(kase(), outcome([], { closedBeforeOurFin: true }), T).problems).toHaveLength(1);
    expect(judge(kase({ complete: false, mayCloseSilently: true }), outcome([], { finSent: true }), T).problems).toEqual([]);
    expect(judge(kase({ end: 'leave', answers: [] }), outcome([]), T).problems).toEqual([]);
  });

  it('fails the defects it once knew like any other problem, and counts RFC differences as observations only', () => {
    const admin = kase({ target: 'admin', pieces: [Buffer.from('GET /admin/v1/models/%E0%A4%A/versions HTTP/1.1\r\n\r\n')] });
    expect(judge(admin, outcome([res(500)]), T).problems.map((p) => p.known)).toEqual([undefined]);
    const head = kase({ answers: [{ want: 'reject', head: true }] });
    expect(judge(head, outcome([res(400, '')], { trailing: 100 }), T).problems).toHaveLength(1);
    const v = judge(kase({ answers: [{ want: 'rfc-reject', head: false, rfc: 'an invalid Host' }] }), outcome([res(200, '{}')]), T);
    expect(v.problems).toEqual([]);
    expect(v.observations).toEqual(['200 to an invalid Host']);
  });
});

describe('the generator', () => {
  const ctx = { model: 'm', maxBodyBytes: 4 << 20, maxHeaderBytes: 16384, adminToken: 'gp_token', scale: PROFILES.short.scale };

  it('builds case i of seed s from (s, i) alone: the same bytes in any order', () => {
    const forward = Array.from({ length: 200 }, (_, i) => generate(7, i, ctx));
    const backward = Array.from({ length: 200 }, (_, i) => generate(7, 199 - i, ctx)).reverse();
    expect(backward.map((c) => [c.label, Buffer.concat(c.pieces).toString('base64')])).toEqual(
      forward.map((c) => [c.label, Buffer.concat(c.pieces).toString('base64')]),
    );
    expect(new Set(forward.map((c) => c.family)).size).toBe(5);
    expect(generate(8, 0, ctx).label === forward[0]!.label && Buffer.concat(generate(8, 0, ctx).pieces).equals(Buffer.concat(forward[0]!.pieces))).toBe(false);
  });

  it('knows where the data plane puts its head limit: leading empty lines count', () => {
    const head = (n: number): Buffer => Buffer.from(`GET / HTTP/1.1\r\nX: ${'v'.repeat(n - 23)}\r\n\r\n`, 'latin1');
    expect(head(16384).length).toBe(16384);
    expect(headOver(head(16384), 16384)).toBe(false);
    expect(headOver(head(16385), 16384)).toBe(true);
    expect(headOver(Buffer.concat([Buffer.from('\r\n'), head(16383)]), 16384)).toBe(true);
    expect(headOver(Buffer.alloc(16385, 0x61), 16384)).toBe(true);
  });
});
