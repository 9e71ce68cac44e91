// The data plane's HTTP/1.1 server over real sockets: strict parsing, body framing, keep-alive, pipelining, response framing, backpressure, timeouts.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { Client, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createFrontServer } from '../../../src/gateway/front.js';
import { Raw, parseResponses } from '../../helpers/raw.js';
import type { Parsed } from '../../helpers/raw.js';
import type { FrontHandler, FrontOptions, FrontRequest, FrontResponse } from '../../../src/gateway/front.js';

type Front = ReturnType<typeof createFrontServer>;

const servers: Front[] = [];
afterEach(async () => {
  while (servers.length) {
    const s = servers.pop()!;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

interface Started {
  server: Front;
  port: number;
  url: string;
  /** Requests the handler has seen. */
  seen: FrontRequest[];
}

/** Echo: the request as JSON, with a content-length. */
const echo: FrontHandler = (req, res) => {
  const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: req.body.toString('latin1'), v: req.httpVersion });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

async function start(handler: FrontHandler = echo, opts: Partial<FrontOptions> = {}): Promise<Started> {
  const seen: FrontRequest[] = [];
  const server = createFrontServer(
    (req, res) => {
      seen.push(req);
      handler(req, res);
    },
    { maxBodyBytes: 1 << 20, ...opts },
  );
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://127.0.0.1:${port}`, seen };
}

function get(path = '/', extra = ''): string {
  return `GET ${path} HTTP/1.1\r\nHost: a\r\n${extra}\r\n`;
}

function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: a\r\nContent-Length: ${Buffer.byteLength(body, 'latin1')}\r\n${extra}\r\n${body}`;
}

interface Echoed {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  v: string;
}

function echoed(p: Parsed): Echoed {
  return JSON.parse(p.body) as Echoed;
}

function tick(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

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

describe('responses', () => {
  it('a content-length response goes out in one socket write; so does a small end() without a length', async () => {
    const { server, port } = await start((req, res) => {
      if (req.url === '/cl') {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5 });
        res.end('hello');
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(Buffer.from('hello'));
      }
    });
    const writes: unknown[][] = [];
    server.on('connection', (s: Socket) => {
      const orig = s.write.bind(s) as (...a: unknown[]) => boolean;
      s.write = (...a: unknown[]): boolean => {
        writes.push(a);
        return orig(...a);
      };
    });
    const raw = new Raw(port).send(get('/cl'));
    const [r] = await raw.responses(1);
    expect(r!.body).toBe('hello');
    expect(writes).toHaveLength(1);
    expect(Buffer.from(writes[0]![0] as Buffer).toString('latin1')).toBe(r!.raw);
    raw.send(get('/chunked'));
    const [, c] = await raw.responses(2);
    expect(c!.headers['transfer-encoding']).toBe('chunked');
    expect(c!.raw.endsWith('\r\n\r\n5\r\nhello\r\n0\r\n\r\n')).toBe(true);
    expect(writes).toHaveLength(2);
    raw.socket.destroy();
  });

  it('a head reused from frozen headers still follows each response: status, framing, keep-alive or close, HTTP/1.0', async () => {
    const frozen = Object.freeze({ 'content-type': 'text/plain', 'x-glidepath-worker': 'w0' });
    const { port } = await start((req, res) => {
      res.writeHead(req.url === '/201' ? 201 : 200, frozen);
      res.end('x');
    });
    const raw = new Raw(port).send(get('/a') + get('/a') + get('/201') + get('/a', 'Connection: close\r\n'));
    const rs = await raw.responses(4);
    expect(rs.map((r) => [r.status, r.headers['transfer-encoding'], r.headers.connection, r.body])).toEqual([
      [200, 'chunked', 'keep-alive', 'x'],
      [200, 'chunked', 'keep-alive', 'x'],
      [201, 'chunked', 'keep-alive', 'x'],
      [200, 'chunked', 'close', 'x'],
    ]);
    expect({ ...rs[1]!.headers, date: '' }).toEqual({ ...rs[0]!.headers, date: '' });
    raw.socket.destroy();
    const old = new Raw(port).send('GET /a HTTP/1.0\r\n\r\n');
    const [r] = await old.responses(1);
    expect(r!.headers['transfer-encoding']).toBeUndefined();
    expect(r!.headers.connection).toBe('close');
    expect(r!.body).toBe('x');
    old.socket.destroy();
  });

  it('a frozen header object (formatted once, then reused) gives the same heads as a fresh one; a bad frozen one still throws', async () => {
    const frozen = Object.freeze({ 'content-type': 'text/event-stream', 'x-glidepath-worker': 'w0', connection: 'close' });
    const bad = Object.freeze({ 'x-bad': 'a\r\nset-cookie: x' });
    const errors: string[] = [];
    const { port } = await start((req, res) => {
      if (req.url === '/bad') {
        for (let i = 0; i < 2; i++) {
          try {
            res.writeHead(200, bad);
          } catch (e) {
            errors.push((e as Error).message);
          }
        }
        res.writeHead(200, {});
        res.end('ok');
        return;
      }
      res.writeHead(200, req.url === '/fresh' ? { ...frozen } : frozen);
      res.end('x');
    });
    const heads: Record<string, string>[] = [];
    for (const path of ['/frozen', '/frozen', '/fresh']) {
      const raw = new Raw(port).send(get(path));
      const [r] = await raw.responses(1);
      delete r!.headers.date;
      heads.push(r!.headers);
      raw.socket.destroy();
    }
    expect(heads[0]).toEqual({ 'content-type': 'text/event-stream', 'x-glidepath-worker': 'w0', 'transfer-encoding': 'chunked', connection: 'close' });
    expect(heads[1]).toEqual(heads[0]);
    expect(heads[2]).toEqual(heads[0]);
    const raw = new Raw(port).send(get('/bad'));
    const [r] = await raw.responses(1);
    expect(r!.body).toBe('ok');
    expect(errors).toEqual(['invalid character in response header x-bad', 'invalid character in response header x-bad']);
    raw.socket.destroy();
  });

  it('frames write()s as chunks (empty ones skipped) and ends with the last chunk; undici decodes it', async () => {
    const { port, url } = await start((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('hello');
      res.write('');
      res.write(Buffer.from(' wörld'));
      res.end('!');
    });
    const raw = new Raw(port).send(get('/'));
    const [r] = await raw.responses(1);
    const head = r!.raw.slice(0, r!.raw.indexOf('\r\n\r\n') + 4);
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(head).toContain('\r\ntransfer-encoding: chunked\r\n');
    expect(r!.raw.slice(head.length)).toBe('5\r\nhello\r\n7\r\n w\xc3\xb6rld\r\n1\r\n!\r\n0\r\n\r\n');
    raw.socket.destroy();
    const u = await request(url);
    expect(await u.body.text()).toBe('hello wörld!');
  });

  it('HEAD: headers (content-length as given) and no body bytes, so the next request on the connection still parses', async () => {
    const { port } = await start((_req, res) => {
      res.writeHead(200, { 'content-length': 5 });
      res.write('hel');
      res.end('lo');
    });
    const raw = new Raw(port).send(`HEAD / HTTP/1.1\r\nHost: a\r\n\r\n${get('/')}`);
    const [h, g] = await raw.responses(2, (i) => i === 0);
    expect(h!.headers['content-length']).toBe('5');
    expect(h!.raw.endsWith('\r\n\r\n')).toBe(true);
    expect(g!.body).toBe('hello');
    expect(raw.text).toBe(h!.raw + g!.raw);
    raw.socket.destroy();
  });

  it('header values go out as latin1 and string bodies as UTF-8, also when a non-ASCII head shares the write', async () => {
    const { port } = await start((req, res) => {
      const body = 'h\u00e9llo \u4e16';
      res.writeHead(200, { 'x-name': req.url === '/latin1' ? 'caf\u00e9' : 'cafe', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    const raw = new Raw(port).send(get('/latin1') + get('/ascii'));
    const [a, b] = await raw.responses(2);
    expect(a!.headers['x-name']).toBe('caf\xe9');
    expect(b!.headers['x-name']).toBe('cafe');
    for (const r of [a!, b!]) expect(Buffer.from(r.body, 'latin1').toString('utf8')).toBe('h\u00e9llo \u4e16');
    raw.socket.destroy();
  });

  it('204 gets neither a body nor chunked framing', async () => {
    const { port } = await start((_req, res) => {
      res.writeHead(204, {});
      res.end();
    });
    const raw = new Raw(port).send(get('/') + get('/'));
    const [a, b] = await raw.responses(2);
    expect(a!.status).toBe(204);
    expect(a!.headers['transfer-encoding']).toBeUndefined();
    expect(b!.status).toBe(204);
    raw.socket.destroy();
  });

  it('programming errors throw (writeHead twice, write before writeHead, header injection); writes after a disconnect are ignored', async () => {
    const errors: string[] = [];
    let destroyedInOnClose: boolean | undefined;
    let closedRes!: () => void;
    const afterClose = new Promise<void>((r) => (closedRes = r));
    const { port } = await start((_req, res) => {
      for (const f of [
        () => res.write('x'),
        () => res.end('x'),
        () => res.writeHead(200, { 'x-bad': 'a\r\nset-cookie: evil' }),
        () => res.writeHead(200, {}),
        () => res.writeHead(200, {}),
      ]) {
        try {
          f();
        } catch (err) {
          errors.push((err as Error).message);
        }
      }
      res.write('partial');
      res.onClose(() => {
        destroyedInOnClose = res.destroyed;
        try {
          res.write('more');
          res.end('done');
        } catch (err) {
          errors.push(`after close: ${(err as Error).message}`);
        }
        closedRes();
      });
    });
    const raw = new Raw(port).send(get('/'));
    await raw.until(() => raw.text.includes('partial'), 'the partial body');
    expect(raw.text).not.toContain('set-cookie');
    raw.socket.destroy();
    await afterClose;
    expect(destroyedInOnClose).toBe(true);
    expect(errors).toEqual([
      'write() before writeHead()',
      'end() before writeHead()',
      'invalid character in response header x-bad',
      'writeHead() called twice',
    ]);
  });

  it('onClose fires when the client leaves mid-response, and not for a response that ended', async () => {
    let closedCount = 0;
    let firedMid!: () => void;
    const mid = new Promise<void>((r) => (firedMid = r));
    const serverSockets: Promise<unknown>[] = [];
    const { server, port } = await start((req, res) => {
      if (req.url === '/stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: 1\n\n');
        res.onClose(() => firedMid());
      } else {
        res.onClose(() => closedCount++);
        res.writeHead(200, { 'content-length': 2 });
        res.end('ok');
        res.onClose(() => closedCount++);
      }
    });
    server.on('connection', (s: Socket) => serverSockets.push(once(s, 'close')));
    const a = new Raw(port).send(get('/stream'));
    await a.until(() => a.text.includes('data: 1'), 'the first event');
    a.socket.destroy();
    await mid;

    const b = new Raw(port).send(get('/done'));
    await b.responses(1);
    b.socket.destroy();
    await Promise.all(serverSockets);
    await tick();
    expect(closedCount).toBe(0);
  });

  it('write() returns false for a slow reader and onceDrain fires once it reads again', async () => {
    // under the 16 KiB high-water mark: a write over it returns false even when the kernel takes it all
    const piece = Buffer.alloc(8 * 1024, 120);
    const total = 8192 * piece.length; // 64 MiB: more than loopback buffers hold
    let sawFalse!: (v: boolean) => void;
    const sawFalseP = new Promise<boolean>((r) => (sawFalse = r));
    let drains = 0;
    const { port } = await start((_req, res) => {
      res.writeHead(200, { 'content-length': total });
      let sent = 0;
      const pump = (): void => {
        while (sent < total) {
          sent += piece.length;
          if (!res.write(piece) && sent < total) {
            sawFalse(true);
            res.onceDrain(() => {
              drains++;
              pump();
            });
            return;
          }
        }
        sawFalse(false);
        res.end();
      };
      pump();
    });
    const sock = connect(port, '127.0.0.1');
    sock.pause();
    sock.write(get('/big'));
    expect(await sawFalseP).toBe(true);
    expect(drains).toBe(0);
    let received = 0;
    let headLen = -1;
    const first: Buffer[] = [];
    const done = new Promise<void>((resolve) => {
      sock.on('data', (d: Buffer) => {
        received += d.length;
        if (headLen === -1) {
          first.push(d);
          const t = Buffer.concat(first).toString('latin1');
          const i = t.indexOf('\r\n\r\n');
          if (i !== -1) headLen = i + 4;
        }
        if (headLen !== -1 && received >= headLen + total) resolve();
      });
    });
    sock.resume();
    await done;
    expect(received).toBe(headLen + total);
    expect(drains).toBeGreaterThan(0);
    sock.destroy();
  });

  it('a handler that throws: 500 with a JSON body if nothing was sent, the connection dropped if something was; the server keeps serving', async () => {
    const { port, url } = await start((req, res) => {
      if (req.url === '/boom') throw new Error('boom');
      if (req.url === '/boom-after-head') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        throw new Error('boom');
      }
      if (req.url === '/boom-after-write') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('partial');
        throw new Error('boom');
      }
      echo(req, res);
    });
    for (const path of ['/boom', '/boom-after-head']) {
      const r = await request(`${url}${path}`);
      expect(r.statusCode).toBe(500);
      expect(r.headers['content-type']).toBe('application/json');
      expect(await r.body.json()).toEqual({ error: { message: 'internal server error', type: 'server_error', code: 'internal_error' } });
    }
    const raw = new Raw(port).send(get('/boom-after-write'));
    await raw.close();
    expect(raw.text).toContain('partial');
    expect(raw.text).not.toContain('0\r\n\r\n');
    const ok = await request(`${url}/fine`);
    expect(((await ok.body.json()) as Echoed).url).toBe('/fine');
  });
});

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
