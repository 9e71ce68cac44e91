// The data plane's HTTP/1.1 server over real sockets: its own error answers for bad requests, then timeouts and closing.
import { once } from 'node:events';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Raw, parseResponses } from '../../helpers/raw.js';
import type { FrontResponse } from '../../../src/gateway/front.js';
import { closeFronts, echo, echoed, get, post, start, tick } from '../../helpers/front-server.js';
import type { Echoed } from '../../helpers/front-server.js';

afterEach(closeFronts);

describe('rejections: an error answer of our own, JSON naming the problem, then close', () => {
  const H = 'Host: a\r\n';
  const cases: [string, string, number, string, RegExp?][] = [
    ['a method that is not a token', `GE(T / HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_method'],
    ['absolute-form target', `GET http://evil/ HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request_target', /origin-form/],
    ['asterisk-form target', `OPTIONS * HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request_target'],
    ['an empty target', `GET  HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request_target'],
    ['a control character in the target', `GET /a\x01b HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request_target'],
    ['no version', `GET /\r\n${H}\r\n`, 400, 'invalid_request_line'],
    ['HTTP/2.0', `GET / HTTP/2.0\r\n${H}\r\n`, 505, 'http_version_not_supported', /HTTP\/2\.0/],
    ['HTTP/1.2', `GET / HTTP/1.2\r\n${H}\r\n`, 505, 'http_version_not_supported'],
    ['a lower-case version', `GET / http/1.1\r\n${H}\r\n`, 400, 'invalid_http_version'],
    ['junk after the version', `GET / HTTP/1.1 x\r\n${H}\r\n`, 400, 'invalid_http_version'],
    ['bare LF line endings', 'GET / HTTP/1.1\nHost: a\n\n', 400, 'invalid_line_ending'],
    ['a bare LF inside the head', `GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n`, 400, 'invalid_header'],
    ['a bare CR inside a value', `GET / HTTP/1.1\r\n${H}X: a\rb\r\n\r\n`, 400, 'invalid_header'],
    ['a bare CR in the request line', `GET /\r HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request_target'],
    ['whitespace before the colon', `GET / HTTP/1.1\r\nHost : a\r\n\r\n`, 400, 'invalid_header', /whitespace before the colon/],
    ['obs-fold', `GET / HTTP/1.1\r\n${H}X-A: b\r\n c\r\n\r\n`, 400, 'invalid_header', /folding/],
    ['a control character in a value', `GET / HTTP/1.1\r\n${H}X-A: b\x00c\r\n\r\n`, 400, 'invalid_header'],
    ['DEL in a value', `GET / HTTP/1.1\r\n${H}X-A: b\x7fc\r\n\r\n`, 400, 'invalid_header'],
    ['a header line without a colon', `GET / HTTP/1.1\r\n${H}X-A b\r\n\r\n`, 400, 'invalid_header'],
    ['an empty header name', `GET / HTTP/1.1\r\n${H}: b\r\n\r\n`, 400, 'invalid_header'],
    ['HTTP/1.1 without Host', 'GET / HTTP/1.1\r\nX: 1\r\n\r\n', 400, 'invalid_host'],
    ['two Host headers', `GET / HTTP/1.1\r\n${H}Host: b\r\n\r\n`, 400, 'invalid_host'],
    [
      'Content-Length with Transfer-Encoding (CL.TE smuggling)',
      `POST / HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n${H}\r\n`,
      400,
      'conflicting_framing',
    ],
    [
      'Transfer-Encoding with Content-Length (TE.CL smuggling)',
      `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGET /smuggled HTTP/1.1\r\n${H}\r\n0\r\n\r\n`,
      400,
      'conflicting_framing',
    ],
    ['Transfer-Encoding: gzip', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n`, 501, 'unsupported_transfer_encoding', /501/],
    ['Transfer-Encoding: gzip, chunked', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n`, 501, 'unsupported_transfer_encoding'],
    [
      'two Transfer-Encoding headers',
      `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n`,
      501,
      'unsupported_transfer_encoding',
    ],
    ['Transfer-Encoding: xchunked', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n`, 501, 'unsupported_transfer_encoding'],
    ['Transfer-Encoding in HTTP/1.0', 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'invalid_transfer_encoding'],
    ['a non-numeric Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: abc\r\n\r\n`, 400, 'invalid_content_length'],
    ['a negative Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n`, 400, 'invalid_content_length'],
    ['a signed Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: +5\r\n\r\nhello`, 400, 'invalid_content_length'],
    ['an empty Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length:\r\n\r\n`, 400, 'invalid_content_length'],
    ['a Content-Length list that differs', `POST / HTTP/1.1\r\n${H}Content-Length: 5, 6\r\n\r\nhello`, 400, 'invalid_content_length'],
    [
      'repeated Content-Length headers that differ',
      `POST / HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello`,
      400,
      'invalid_content_length',
    ],
    ['a chunk size that is not hex', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\n`, 400, 'invalid_chunk'],
    ['a 0x chunk size', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n`, 400, 'invalid_chunk'],
    ['a signed chunk size', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n`, 400, 'invalid_chunk'],
    [
      'a chunk size with too many digits',
      `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n00000000000000005\r\nhello\r\n0\r\n\r\n`,
      400,
      'invalid_chunk',
    ],
    ['a chunk size line ending in bare LF', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n`, 400, 'invalid_chunk'],
    ['chunk data not followed by CRLF', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n`, 400, 'invalid_chunk', /CRLF/],
    ['a malformed trailer', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n`, 400, 'invalid_chunk'],
    ['an unsupported expectation', `POST / HTTP/1.1\r\n${H}Content-Length: 1\r\nExpect: 200-ok\r\n\r\nx`, 417, 'expectation_failed'],
  ];

  it.each(cases)('%s', async (_name, bytes, status, code, mentions) => {
    const { port, seen } = await start();
    const raw = new Raw(port).send(bytes);
    await raw.close();
    const rs = parseResponses(raw.text, true);
    expect(rs, raw.text).toHaveLength(1);
    const r = rs[0]!;
    expect(r.status).toBe(status);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['connection']).toBe('close');
    const body = JSON.parse(r.body) as { error: { message: string; type: string; code: string } };
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code });
    expect(body.error.message.length).toBeGreaterThan(5);
    if (mentions) expect(body.error.message).toMatch(mentions);
    expect(seen).toHaveLength(0);
  });

  it('a head over maxHeaderBytes: 431, whether or not it has ended', async () => {
    const { port, seen } = await start(echo, { maxHeaderBytes: 1024 });
    const big = `X-Big: ${'a'.repeat(1100)}\r\n`;
    for (const bytes of [`GET / HTTP/1.1\r\nHost: a\r\n${big}\r\n`, `GET / HTTP/1.1\r\nHost: a\r\n${big}`]) {
      const raw = new Raw(port).send(bytes);
      await raw.close();
      const rs = parseResponses(raw.text, true);
      expect(rs.map((r) => r.status)).toEqual([431]);
      expect((JSON.parse(rs[0]!.body) as { error: { code: string } }).error.code).toBe('headers_too_large');
    }
    // exactly at the limit is fine
    const head = `GET / HTTP/1.1\r\nHost: a\r\nX-Fill: `;
    const ok = new Raw(port).send(`${head}${'b'.repeat(1024 - head.length - 4)}\r\n\r\n`);
    const [r] = await ok.responses(1);
    expect(r!.status).toBe(200);
    ok.socket.destroy();
    expect(seen).toHaveLength(1);
  });

  it('a body over maxBodyBytes: 413, declared (before it is sent) or chunked (as soon as crossed)', async () => {
    const { port, seen } = await start(echo, { maxBodyBytes: 10 });
    const declared = new Raw(port).send('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n');
    await declared.close();
    expect(parseResponses(declared.text, true).map((r) => r.status)).toEqual([413]);

    const chunked = new Raw(port).send('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n');
    await tick();
    chunked.send('5\r\n');
    await chunked.close();
    const rs = parseResponses(chunked.text, true);
    expect(rs.map((r) => r.status)).toEqual([413]);
    expect((JSON.parse(rs[0]!.body) as { error: { code: string } }).error.code).toBe('body_too_large');

    const exact = new Raw(port).send(post('/', '0123456789'));
    const [r] = await exact.responses(1);
    expect(echoed(r!).body).toBe('0123456789');
    exact.socket.destroy();
    expect(seen).toHaveLength(1);
  });

  it('uses errorBody for its own answers', async () => {
    const { port } = await start(echo, { errorBody: (status, code, message) => JSON.stringify({ status, code, message, mine: true }) });
    const raw = new Raw(port).send('GET * HTTP/1.1\r\nHost: a\r\n\r\n');
    await raw.close();
    const [r] = parseResponses(raw.text, true);
    expect(JSON.parse(r!.body)).toMatchObject({ status: 400, code: 'invalid_request_target', mine: true });
  });

  it('garbage and resets neither crash the server nor stop it serving', async () => {
    const { port, url } = await start();
    const junk = new Raw(port).send(Buffer.from([0, 1, 2, 255, 254, 13, 10, 13, 10]));
    await junk.close();
    expect(parseResponses(junk.text, true)[0]!.status).toBe(400);
    const reset = new Raw(port).send('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc');
    await once(reset.socket, 'connect');
    await tick();
    reset.socket.resetAndDestroy();
    await reset.close();
    const r = await request(`${url}/after`);
    expect(((await r.body.json()) as Echoed).url).toBe('/after');
  });
});

describe('timeouts and closing', () => {
  it('closes an idle keep-alive connection quietly after keepAliveTimeoutMs', async () => {
    const { port } = await start(echo, { keepAliveTimeoutMs: 100 });
    const raw = new Raw(port).send(get('/'));
    const [r] = await raw.responses(1);
    const t0 = Date.now();
    await raw.close();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(50);
    expect(raw.text).toBe(r!.raw);
  });

  it('408 for a head or a body that does not finish arriving within headersTimeoutMs', async () => {
    const { port, seen } = await start(echo, { headersTimeoutMs: 100 });
    for (const bytes of ['GET / HTTP/1.1\r\nHost: a\r\n', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc']) {
      const raw = new Raw(port).send(bytes);
      await raw.close();
      const rs = parseResponses(raw.text, true);
      expect(rs.map((r) => r.status)).toEqual([408]);
      expect((JSON.parse(rs[0]!.body) as { error: { code: string } }).error.code).toBe('request_timeout');
    }
    // a connection that never sends anything is closed without an answer
    const silent = new Raw(port);
    await silent.close();
    expect(silent.text).toBe('');
    expect(seen).toHaveLength(0);
  });

  it('no timeout runs while the handler has the request', async () => {
    const { url } = await start((req, res) => setTimeout(() => echo(req, res), 300), { headersTimeoutMs: 100, keepAliveTimeoutMs: 100 });
    const r = await request(`${url}/slow`);
    expect(((await r.body.json()) as Echoed).url).toBe('/slow');
  });

  it('closeAllConnections destroys idle and busy connections; onClose fires for the unfinished response', async () => {
    let pending: FrontResponse | undefined;
    let closed!: () => void;
    const closedP = new Promise<void>((r) => (closed = r));
    let hung!: () => void;
    const hungP = new Promise<void>((r) => (hung = r));
    const { server, port } = await start((req, res) => {
      if (req.url === '/hang') {
        pending = res;
        res.onClose(closed);
        hung();
      } else echo(req, res);
    });
    const idle = new Raw(port).send(get('/'));
    await idle.responses(1);
    const busy = new Raw(port).send(get('/hang'));
    await hungP;
    const closedServer = new Promise<void>((r) => server.close(() => r()));
    server.closeAllConnections();
    await Promise.all([idle.close(), busy.close(), closedP, closedServer]);
    expect(pending!.destroyed).toBe(true);
  });
});
