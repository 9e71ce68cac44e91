// The data plane's HTTP/1.1 server over real sockets: strict parsing, body framing, keep-alive and pipelining (responses: front-responses.test.ts; rejections and timeouts: front-rejections.test.ts).
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { Client, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Raw, parseResponses } from '../../helpers/raw.js';
import { closeFronts, echo, echoed, get, post, start, tick } from '../../helpers/front-server.js';
import type { Echoed } from '../../helpers/front-server.js';

afterEach(closeFronts);

describe('requests', () => {
  it('GET and POST over undici: method, url with query, lower-cased joined headers, body', async () => {
    const { url } = await start();
    const r = await request(`${url}/v1/x?y=1`, { headers: { 'X-Dup': ['a', 'b'], 'X-Upper': 'V' } });
    expect(r.statusCode).toBe(200);
    const e = (await r.body.json()) as Echoed;
    expect(e).toMatchObject({ method: 'GET', url: '/v1/x?y=1', body: '', v: '1.1' });
    expect(e.headers['x-dup']).toBe('a, b');
    expect(e.headers['x-upper']).toBe('V');
    expect(r.headers['connection']).toBe('keep-alive');
    expect(r.headers['keep-alive']).toBe('timeout=65');
    expect(r.headers['date']).toMatch(/GMT$/);

    const p = await request(`${url}/v1/completions`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    const pe = (await p.body.json()) as Echoed;
    expect(pe).toMatchObject({ method: 'POST', url: '/v1/completions', body: '{"a":1}' });
    expect(pe.headers['content-length']).toBe('7');
  });

  it('header names in any case become lower case: common names matched in place, near misses and others copied', async () => {
    const { port } = await start();
    const raw = new Raw(port).send(
      post(
        '/',
        'x',
        'CONTENT-TYPE: a/b\r\nX-Session-Id: s1\r\nx-session-ix: s2\r\nX-Sessio_-id: s3\r\nUser-Agent: u\r\nx-rare-Header: r\r\nx-glidepath-version: v\r\n',
      ),
    );
    const [r] = await raw.responses(1);
    const e = echoed(r!);
    expect(e.body).toBe('x');
    expect(e.headers).toMatchObject({
      host: 'a',
      'content-length': '1',
      'content-type': 'a/b',
      'x-session-id': 's1',
      'x-session-ix': 's2',
      'x-sessio_-id': 's3',
      'user-agent': 'u',
      'x-rare-header': 'r',
      'x-glidepath-version': 'v',
    });
    expect(Object.keys(e.headers).sort()).toEqual(
      ['content-length', 'content-type', 'host', 'user-agent', 'x-glidepath-version', 'x-rare-header', 'x-sessio_-id', 'x-session-id', 'x-session-ix'].sort(),
    );
    raw.socket.destroy();
  });

  it('a large body spanning many reads arrives whole', async () => {
    const { url } = await start((req, res) => {
      const sum = createHash('sha256').update(req.body).digest('hex');
      res.writeHead(200, { 'content-length': sum.length });
      res.end(sum);
    });
    const body = Buffer.alloc(900 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 31) & 0xff;
    const r = await request(url, { method: 'POST', body });
    expect(await r.body.text()).toBe(createHash('sha256').update(body).digest('hex'));
  });

  it('the body of a request that arrived in one read is a view of that read, not a copy', async () => {
    let before = '';
    const { port } = await start((req, res) => {
      before = Buffer.from(req.body.buffer, req.body.byteOffset - 4, 4).toString('latin1');
      echo(req, res);
    });
    const raw = new Raw(port).send(post('/', 'hello'));
    const [r] = await raw.responses(1);
    expect(echoed(r!).body).toBe('hello');
    expect(before).toBe('\r\n\r\n');
    raw.socket.destroy();
  });

  it('decodes a chunked body: extensions and trailers ignored, case-insensitive "Chunked"', async () => {
    const { port } = await start();
    const raw = new Raw(port).send(
      'POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n5;ext=1;q="x y"\r\nhello\r\n6 ; e\r\n world\r\nB\r\n 0123456789\r\n0\r\nX-Trailer: t\r\n\r\n',
    );
    const [r] = await raw.responses(1);
    const e = echoed(r!);
    expect(e.body).toBe('hello world 0123456789');
    expect(e.headers['transfer-encoding']).toBe('Chunked');
    raw.socket.destroy();
  });

  it('parses requests that trickle in a byte at a time (head, chunked body, then a content-length one)', async () => {
    const { port } = await start();
    const raw = new Raw(port);
    const bytes = `POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n${post('/d', 'xyz')}`;
    for (const ch of bytes) {
      raw.send(ch);
      await tick();
    }
    const [a, b] = await raw.responses(2);
    expect(echoed(a!)).toMatchObject({ url: '/c', body: 'abcde' });
    expect(echoed(b!)).toMatchObject({ url: '/d', body: 'xyz' });
    raw.socket.destroy();
  });

  it('accepts identical repeated Content-Length values and ignores one leading empty line', async () => {
    const { port } = await start();
    const raw = new Raw(port).send('\r\nPOST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3, 3\r\n\r\nabc');
    const [r] = await raw.responses(1);
    const e = echoed(r!);
    expect(e.body).toBe('abc');
    expect(e.headers['content-length']).toBe('3');
    raw.socket.destroy();
  });

  it('Expect: 100-continue gets "100 Continue" before the body is sent', async () => {
    const { port, seen } = await start();
    const raw = new Raw(port).send('POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
    await raw.until(() => raw.text.includes('\r\n\r\n'), 'the interim answer');
    expect(raw.text).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    expect(seen).toHaveLength(0);
    raw.send('hello');
    const [cont, r] = await raw.responses(2);
    expect(cont!.status).toBe(100);
    expect(echoed(r!).body).toBe('hello');
    raw.socket.destroy();
  });

  it('Expect: an empty list element is ignored (RFC 9110 §5.6.1.2; the differential test found the 417)', async () => {
    const { port } = await start();
    const raw = new Raw(port).send('POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\nExpect:\r\n\r\n');
    await raw.until(() => raw.text.includes('\r\n\r\n'), 'the interim answer');
    expect(raw.text).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    raw.send('hello');
    const [, r] = await raw.responses(2);
    expect(echoed(r!).body).toBe('hello');
    raw.socket.destroy();
  });

  it('Expect: 100-continue with a declared body over the limit: 413 straight away, no 100', async () => {
    const { port, seen } = await start(echo, { maxBodyBytes: 10 });
    const raw = new Raw(port).send('POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n');
    await raw.close();
    const rs = parseResponses(raw.text, true);
    expect(rs.map((r) => r.status)).toEqual([413]);
    expect(seen).toHaveLength(0);
  });
});

describe('keep-alive and pipelining', () => {
  it('reuses one connection for several requests (undici Client)', async () => {
    const { server, url } = await start();
    let connections = 0;
    server.on('connection', () => connections++);
    const client = new Client(url);
    try {
      for (let i = 0; i < 4; i++) {
        const r = await client.request({ path: `/${i}`, method: i % 2 ? 'POST' : 'GET', body: i % 2 ? `b${i}` : undefined });
        const e = (await r.body.json()) as Echoed;
        expect(e.url).toBe(`/${i}`);
        expect(e.body).toBe(i % 2 ? `b${i}` : '');
      }
    } finally {
      await client.close();
    }
    expect(connections).toBe(1);
  });

  it('answers pipelined requests one at a time, in order', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const order: string[] = [];
    const { port } = await start((req, res) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      order.push(req.url);
      const done = (): void => {
        inFlight--;
        echo(req, res);
      };
      // the first is answered last in time if the server (wrongly) ran them concurrently
      if (req.url === '/1') setTimeout(done, 20);
      else setImmediate(done);
    });
    const raw = new Raw(port).send(get('/1') + post('/2', 'two') + get('/3') + post('/4', '') + get('/5'));
    const rs = await raw.responses(5);
    expect(rs.map((r) => echoed(r).url)).toEqual(['/1', '/2', '/3', '/4', '/5']);
    expect(echoed(rs[1]!).body).toBe('two');
    expect(order).toEqual(['/1', '/2', '/3', '/4', '/5']);
    expect(maxInFlight).toBe(1);
    raw.socket.destroy();
  });

  it('a head repeated on a connection (only Content-Length may change) is read like a fresh one; earlier requests keep their headers', async () => {
    const { port, seen } = await start(echo, { maxBodyBytes: 200 });
    const body = (n: number): string => 'x'.repeat(n);
    const h = 'X-Session-Id: s1\r\nContent-Type: application/json\r\n';
    const sizes = [7, 7, 12, 99, 100, 100, 0, 3];
    const raw = new Raw(port).send(sizes.map((n) => post('/v1/completions', body(n), h)).join(''));
    const rs = await raw.responses(sizes.length);
    for (const [i, n] of sizes.entries()) {
      const e = echoed(rs[i]!);
      expect(e.body).toBe(body(n));
      expect(e.headers).toEqual({ host: 'a', 'content-length': String(n), 'x-session-id': 's1', 'content-type': 'application/json' });
      // the objects the handler got are not changed by the requests after them
      expect(seen[i]!.headers['content-length']).toBe(String(n));
      expect(seen[i]!.body.toString()).toBe(body(n));
    }
    // the same head: the same (read-only) object; another length: another object
    expect(seen[1]!.headers).toBe(seen[0]!.headers);
    expect(seen[2]!.headers).not.toBe(seen[1]!.headers);
    // a head that differs anywhere else is parsed afresh, and still checked: a bad Content-Length
    // in the place of the digits, a changed value, a new header, another target, and a body over the limit
    raw.send(post('/v1/completions', 'abc', 'X-Session-Id: s2\r\nContent-Type: application/json\r\n'));
    raw.send(post('/v1/chat/completions', 'abc', h));
    raw.send(post('/v1/chat/completions', 'abcd', `${h}X-Extra: 1\r\n`));
    raw.send(post('/v1/chat/completions', body(201), h));
    const more = await raw.responses(sizes.length + 4);
    expect(echoed(more[8]!).headers['x-session-id']).toBe('s2');
    expect(echoed(more[9]!).url).toBe('/v1/chat/completions');
    expect(echoed(more[10]!).headers['x-extra']).toBe('1');
    expect(echoed(more[10]!).body).toBe('abcd');
    expect(more[11]!.status).toBe(413);
    await raw.close();

    // a head over 4 KiB is not kept (an idle connection would hold it): parsed each time
    const big = `${h}X-Pad: ${'p'.repeat(5000)}\r\n`;
    const r1 = new Raw(port).send(post('/', 'a', big) + post('/', 'b', big));
    const [b1, b2] = await r1.responses(2);
    expect([echoed(b1!).body, echoed(b2!).body]).toEqual(['a', 'b']);
    const [s1, s2] = seen.slice(-2);
    expect(s1!.headers['x-pad']).toBe(s2!.headers['x-pad']);
    expect(s2!.headers).not.toBe(s1!.headers);
    r1.socket.destroy();

    for (const bad of ['1a', '+5', '', ' 5 6', '5, 6', '9999999999999999']) {
      const r2 = new Raw(port).send(post('/', 'ok', h) + `POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${bad}\r\n${h}\r\n`);
      const [ok, refused] = await r2.responses(2);
      expect(ok!.status, bad).toBe(200);
      expect(refused!.status, bad).toBe(bad === '9999999999999999' ? 413 : 400);
      await r2.close();
    }
  });

  it('pauses a connection that pipelines more than the read-ahead while busy, and answers everything after', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let busy!: () => void;
    const busyP = new Promise<void>((r) => (busy = r));
    let paused!: () => void;
    const pausedP = new Promise<void>((r) => (paused = r));
    const { server, port } = await start(
      (req, res) => {
        if (req.url === '/first') {
          busy();
          void released.then(() => echo(req, res));
        } else echo(req, res);
      },
      { maxBodyBytes: 512, maxHeaderBytes: 512, readAheadBytes: 1024 },
    );
    server.on('connection', (s: Socket) => {
      const orig = s.pause.bind(s);
      s.pause = () => {
        paused();
        return orig();
      };
    });
    const raw = new Raw(port).send(get('/first'));
    await busyP;
    let more = '';
    for (let i = 0; i < 60; i++) more += post(`/p${i}`, 'x'.repeat(100));
    raw.send(more);
    await pausedP;
    release();
    const rs = await raw.responses(61);
    expect(rs.map((r) => echoed(r).url)).toEqual(['/first', ...Array.from({ length: 60 }, (_, i) => `/p${i}`)]);
    raw.socket.destroy();
  });

  it('HTTP/1.0 without a length: body delimited by closing the connection', async () => {
    const { port } = await start((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('a');
      res.write(Buffer.from('b'));
      res.end('c');
    });
    const raw = new Raw(port).send('GET /old HTTP/1.0\r\n\r\n');
    await raw.close();
    const [r] = parseResponses(raw.text, true);
    expect(r!.headers['connection']).toBe('close');
    expect(r!.headers['transfer-encoding']).toBeUndefined();
    expect(r!.body).toBe('abc');
  });

  it('HTTP/1.0 keep-alive with content-length keeps the connection; without keep-alive it closes', async () => {
    const { port } = await start();
    const raw = new Raw(port).send('GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    const [a] = await raw.responses(1);
    expect(a!.headers['connection']).toBe('keep-alive');
    expect(echoed(a!).v).toBe('1.0');
    raw.send('GET /2 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n');
    const [, b] = await raw.responses(2);
    expect(echoed(b!).url).toBe('/2');
    raw.send('GET /3 HTTP/1.0\r\n\r\n');
    await raw.close();
    const rs = parseResponses(raw.text, true);
    expect(rs).toHaveLength(3);
    expect(rs[2]!.headers['connection']).toBe('close');
  });

  it('"connection: close" from the client: answered with close, then the connection ends (pipelined rest dropped)', async () => {
    const { port, seen } = await start();
    const raw = new Raw(port).send(get('/1', 'Connection: close\r\n') + get('/2'));
    await raw.close();
    const rs = parseResponses(raw.text, true);
    expect(rs).toHaveLength(1);
    expect(rs[0]!.headers['connection']).toBe('close');
    expect(seen.map((r) => r.url)).toEqual(['/1']);
  });

  it("honours the handler's connection: close", async () => {
    const { port } = await start((_req, res) => {
      res.writeHead(200, { 'content-length': 2, connection: 'close' });
      res.end('ok');
    });
    const raw = new Raw(port).send(get('/'));
    await raw.close();
    const rs = parseResponses(raw.text, true);
    expect(rs).toHaveLength(1);
    expect(rs[0]!.headers['connection']).toBe('close');
    expect(rs[0]!.raw.match(/connection:/gi)).toHaveLength(1);
  });

  it('a client that half-closes has left: the answer in progress is abandoned (onClose), like node:http', async () => {
    let left!: () => void;
    const leftP = new Promise<void>((r) => (left = r));
    const { port } = await start((_req, res) => {
      res.onClose(left);
    });
    const raw = new Raw(port).send(get('/1') + get('/2'));
    raw.socket.end();
    await Promise.all([leftP, raw.close()]);
    expect(raw.text).toBe('');
  });
});
