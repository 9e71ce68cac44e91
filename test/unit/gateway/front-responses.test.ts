// The data plane's HTTP/1.1 server over real sockets: response framing and backpressure.
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Raw } from '../../helpers/raw.js';
import { closeFronts, echo, get, start, tick } from '../../helpers/front-server.js';
import type { Echoed } from '../../helpers/front-server.js';

afterEach(closeFronts);

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
