// HTTP/2 with prior knowledge on the data plane's port: the handover from the HTTP/1.1 server, streams
// served as requests, what bounds a client (streams per connection, the descriptor ceiling, body size,
// request and send timeouts), and the gateway in front of the simulator over HTTP/2.
import { constants } from 'node:http2';
import type { ClientHttp2Session, IncomingHttpHeaders } from 'node:http2';
import { connect } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { FrontHandler, FrontOptions, FrontResponse } from '../../../src/gateway/front.js';
import { ClientLimits } from '../../../src/gateway/limits.js';
import { startSim } from '../../../src/sim/index.js';
import { httpCall, startGateway, until } from '../../helpers/gateway.js';
import { h2Call, h2Kit, h2Session, startFront } from '../../helpers/h2.js';

const { cleanup } = h2Kit();

function start(handler: FrontHandler, opts: Partial<FrontOptions> = {}): ReturnType<typeof startFront> {
  return startFront(cleanup, handler, { http2: { maxConcurrentStreams: 8 }, ...opts });
}

const session = (url: string): Promise<ClientHttp2Session> => h2Session(cleanup, url);
const call = h2Call;

const echo: FrontHandler = (req, res) => {
  const body = JSON.stringify({
    method: req.method,
    url: req.url,
    bytes: req.body.length,
    version: req.httpVersion,
    host: req.headers.host,
    x: req.headers['x-a'],
  });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'keep-alive' });
  res.end(body);
};

describe('HTTP/2 with prior knowledge beside HTTP/1.1', () => {
  it('serves streams of one connection as requests, and HTTP/1.1 on the same port', async () => {
    const { url } = await start(echo);
    const s = await session(url);
    expect(s.remoteSettings.maxConcurrentStreams).toBe(8);
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => call(s, { ':method': 'POST', ':path': `/r${i}?q=1`, 'x-a': ['1', '2'] }, 'x'.repeat(1000 * i))),
    );
    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      // the HTTP/1.1 `connection` field the handler set is not sent over HTTP/2 (it would be a protocol error)
      expect(a.headers.connection).toBeUndefined();
      expect(JSON.parse(a.body)).toEqual({ method: 'POST', url: `/r${i}?q=1`, bytes: 1000 * i, version: '2', host: url.slice(7), x: '1, 2' });
    });
    const h1 = await httpCall(url, '/plain');
    expect(h1.status).toBe(200);
    expect(h1.json()).toMatchObject({ version: '1.1', url: '/plain' });
  });

  it('takes the preface in pieces, and a client whose first bytes only look like it is HTTP/1.1', async () => {
    const { url } = await start(echo);
    const port = Number(url.split(':')[2]);
    const sock = connect(port, '127.0.0.1');
    await once(sock, 'connect');
    const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
    const got: Buffer[] = [];
    sock.on('data', (c: Buffer) => got.push(c));
    for (const piece of [preface.subarray(0, 1), preface.subarray(1, 10), preface.subarray(10)]) {
      sock.write(piece);
      await new Promise((r) => setImmediate(r));
    }
    sock.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // an empty SETTINGS frame
    await until(() => Buffer.concat(got).length >= 9, 'the server settings frame');
    expect(Buffer.concat(got)[3]).toBe(4); // the server's first frame is SETTINGS
    sock.destroy();
    // "P" then "OST": HTTP/1.1 after all
    const h1 = connect(port, '127.0.0.1');
    await once(h1, 'connect');
    let text = '';
    h1.on('data', (c: Buffer) => (text += c.toString()));
    h1.write('P');
    await new Promise((r) => setImmediate(r));
    h1.write('OST /x HTTP/1.1\r\nHost: a\r\ncontent-length: 2\r\n\r\nhi');
    await until(() => text.includes('"bytes":2'), 'the HTTP/1.1 answer');
    expect(text.startsWith('HTTP/1.1 200')).toBe(true);
    h1.destroy();
  });

  it('without http2 the preface is an HTTP/1.1 error', async () => {
    const { url } = await start(echo, { http2: undefined });
    const port = Number(url.split(':')[2]);
    const sock = connect(port, '127.0.0.1');
    let text = '';
    sock.on('data', (c: Buffer) => (text += c.toString()));
    sock.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    await once(sock, 'close');
    expect(text).toMatch(/^HTTP\/1\.1 505 /);
    expect(text).toContain('HTTP/2 is turned off on this listener');
  });

  it('refuses a body over the limit (declared or sent) with 413, and a body that does not arrive with 408', async () => {
    const { url } = await start(echo, { maxBodyBytes: 100, headersTimeoutMs: 200 });
    const s = await session(url);
    const declared = await call(s, { ':method': 'POST', ':path': '/a', 'content-length': '101' }, 'x'.repeat(101));
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toMatchObject({ error: { code: 'body_too_large' } });
    const sent = await call(s, { ':method': 'POST', ':path': '/a' }, 'x'.repeat(5000));
    expect(sent.status).toBe(413);
    const req = s.request({ ':method': 'POST', ':path': '/slow' }, { endStream: false });
    req.write('x');
    const [h] = (await once(req, 'response')) as [IncomingHttpHeaders];
    expect(h[':status']).toBe(408);
    req.destroy();
    // the connection is still good
    expect((await call(s, { ':method': 'GET', ':path': '/after' })).status).toBe(200);
  });

  it('counts a stream past its connection’s first as half a connection against the ceiling', async () => {
    const limits = new ClientLimits({ maxConnections: 2, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 });
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        if (req.url === '/hold') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('held');
          held.push(res);
        } else echo(req, res);
      },
      { limits },
    );
    const s = await session(url);
    // the connection (2) + two more streams (1 each): the ceiling of 2 connections, 4 descriptors
    const streams = [0, 1, 2].map(() => s.request({ ':method': 'GET', ':path': '/hold' }));
    await until(() => held.length === 3, 'three held streams');
    expect(limits.extraStreams).toBe(2);
    const refused = await call(s, { ':method': 'GET', ':path': '/x' });
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'server_overloaded' } });
    // nor is another connection admitted
    const h1 = await httpCall(url, '/x');
    expect(h1.status).toBe(503);
    // one stream ends: room for one more stream
    held.shift()!.end();
    await until(() => limits.extraStreams === 1, 'a stream released');
    expect((await call(s, { ':method': 'GET', ':path': '/x' })).status).toBe(200);
    for (const st of streams) st.destroy();
    await until(() => limits.extraStreams === 0, 'all streams released');
    s.close();
    await until(() => limits.open === 0, 'the connection released');
  });

  it('tells the handler when the client resets its stream, and closes one that takes nothing for the send timeout', async () => {
    let closed = 0;
    let timeouts = 0;
    let res: FrontResponse | undefined;
    const chunk = Buffer.alloc(64 * 1024, 'y');
    const { url } = await start(
      (req, r) => {
        res = r;
        r.onClose(() => closed++);
        r.writeHead(200, { 'content-type': 'text/plain' });
        if (req.url === '/flood') {
          const pump = (): void => {
            while (!r.destroyed && r.write(chunk));
            if (!r.destroyed) r.onceDrain(pump);
          };
          pump();
        } else r.write('first');
      },
      { sendTimeoutMs: 200, events: { sendTimeout: () => timeouts++ } },
    );
    const s = await session(url);
    const a = s.request({ ':method': 'GET', ':path': '/one' });
    a.on('error', () => undefined);
    await once(a, 'data');
    a.close(constants.NGHTTP2_CANCEL);
    await until(() => closed === 1, 'onClose after the reset');
    const b = s.request({ ':method': 'GET', ':path': '/flood' });
    b.on('error', () => undefined);
    b.pause(); // takes nothing: its window stays shut
    await until(() => timeouts === 1 && closed === 2, 'the send timeout', 5000);
    expect(res?.sendTimedOut).toBe(true);
  });
});

describe('HTTP/2 clients held to the listener’s limits', () => {
  it('closes a connection with no stream open after the keep-alive timeout (GOAWAY), not one with a stream in flight', async () => {
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        if (req.url === '/hold') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          held.push(res);
        } else echo(req, res);
      },
      { keepAliveTimeoutMs: 150 },
    );
    const idle = await session(url);
    const busy = await session(url);
    const st = busy.request({ ':method': 'GET', ':path': '/hold' });
    st.on('error', () => undefined);
    await until(() => held.length === 1, 'the held stream');
    const [code] = (await once(idle, 'goaway')) as [number];
    expect(code).toBe(constants.NGHTTP2_NO_ERROR);
    await once(idle, 'close');
    // the busy connection saw no frame for as long, but has a stream in flight
    expect(busy.closed).toBe(false);
    held[0]!.end('done');
    let text = '';
    for await (const c of st) text += (c as Buffer).toString();
    expect(text).toBe('done');
  });

  it('refuses streams over max_concurrent_streams, and rate-limits a client per stream', async () => {
    const limits = new ClientLimits({ maxConnections: 0, perClientConnections: 0, perClientRps: 1, perClientBurst: 2 });
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        held.push(res);
      },
      { limits, http2: { maxConcurrentStreams: 2 } },
    );
    const s = await session(url);
    expect(s.remoteSettings.maxConcurrentStreams).toBe(2);
    const a = s.request({ ':method': 'GET', ':path': '/a' });
    const b = s.request({ ':method': 'GET', ':path': '/b' });
    await until(() => held.length === 2, 'two streams');
    // a third waits in the client until one ends (the protocol's limit); then it is over the client's burst of 2
    const c = s.request({ ':method': 'GET', ':path': '/c' });
    held[0]!.end();
    const [h] = (await once(c, 'response')) as [IncomingHttpHeaders];
    expect(held.length).toBe(2);
    expect(h[':status']).toBe(429);
    expect(Number(h['retry-after'])).toBeGreaterThanOrEqual(1);
    for (const x of [a, b, c]) x.destroy();
  });

  it('admits a connection past the ceiling for probe paths only', async () => {
    const limits = new ClientLimits({ maxConnections: 1, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 });
    const { url } = await start(echo, { limits, probePaths: new Set(['/health']) });
    const first = await session(url);
    expect((await call(first, { ':method': 'GET', ':path': '/x' })).status).toBe(200);
    const probe = await session(url); // past the ceiling of 1
    expect((await call(probe, { ':method': 'GET', ':path': '/health' })).status).toBe(200);
    // one stream per such connection, as one request over HTTP/1.1 (http2-review.test.ts)
    await once(probe, 'close');
    const refused = await call(await session(url), { ':method': 'POST', ':path': '/v1/completions' }, '{}');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'server_overloaded' } });
  });
});

describe('the gateway over HTTP/2', () => {
  it('streams the simulator’s answer as over HTTP/1.1, many streams on one connection', async () => {
    const sim = await startSim({ model: 'm', version: 'v1', seed: 7, interTokenMs: 0, jitter: 0 });
    cleanup.push(() => sim.close());
    const gw = await startGateway([{ name: 'm', versions: [{ id: 'v1', workers: [sim.url] }], route: { weights: { v1: 1 } } }]);
    cleanup.push(() => gw.close());
    const body = JSON.stringify({
      model: 'm',
      prompt: 'The quick brown fox',
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const norm = (t: string): string => t.replace(/"id":"cmpl-[0-9a-f]+"/g, '"id":"ID"').replace(/"created":\d+/g, '"created":0');
    const h1 = await httpCall(gw.url, '/v1/completions', undefined, { rawBody: body });
    expect(h1.status).toBe(200);
    const s = await session(gw.url);
    const all = await Promise.all(
      Array.from({ length: 40 }, () => call(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, body)),
    );
    for (const a of all) {
      expect(a.status).toBe(200);
      expect(a.headers['content-type']).toBe(h1.headers['content-type']);
      expect(norm(a.body)).toBe(norm(h1.body));
    }
    const bad = await call(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, '{"model":');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ error: { type: 'invalid_request_error' } });
  });
});
