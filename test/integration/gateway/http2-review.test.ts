// HTTP/2 on the data plane as a hostile client sees it: what each way of holding a stream or a
// connection costs the listener (the connection and stream counts must come back to 0), what the
// handler is told (FrontResponse's contract as over HTTP/1.1), inputs that must not crash the
// process, and the gateway's own answers over HTTP/2 against HTTP/1.1's.
import { constants } from 'node:http2';
import { connect } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { FrontHandler, FrontResponse } from '../../../src/gateway/front.js';
import { ClientLimits } from '../../../src/gateway/limits.js';
import { httpCall, until } from '../../helpers/gateway.js';
import { h2Call, h2Kit, h2Outcome, h2Request } from '../../helpers/h2.js';
import { HEADERS, PREFACE, RST, Raw as H2Raw, SETTINGS, WINDOW_UPDATE, deafSocket as deaf, frame, get, hpack } from '../../helpers/h2-raw.js';

const { cleanup, start, session } = h2Kit();

const noLimits = { maxConnections: 1000, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 };

const request = h2Request;
const call = h2Call;
const outcome = h2Outcome;

const Raw = { open: (port: number, settings?: [number, number][]) => H2Raw.open(cleanup, port, settings) };
const deafSocket = (port: number, first: Buffer) => deaf(cleanup, port, first);

const ok: FrontHandler = (req, res) => {
  const body = `ok ${req.url}`;
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

// ---- accounting and bounds ------------------------------------------------------------------------

describe('what an HTTP/2 client can hold, and for how long', () => {
  it('a client that opens no flow-control window: streams whose answers cannot go out are reset after the send timeout, their descriptors given back', async () => {
    // Defect (fixed): an answer ended by the handler (or the front's own 413/408) that waited for the
    // client's window was never timed: H2Res.end() stopped the send timer and answer() closed with
    // NO_ERROR, which Node holds until the data is out. A client with SETTINGS_INITIAL_WINDOW_SIZE 0
    // kept every such stream (and its share of the ceiling) for as long as it kept the connection.
    const limits = new ClientLimits(noLimits);
    let timeouts = 0;
    const { url } = await start(ok, {
      limits,
      maxBodyBytes: 100,
      sendTimeoutMs: 200,
      headersTimeoutMs: 300,
      events: { sendTimeout: () => timeouts++ },
    });
    const s = await session(url, { settings: { initialWindowSize: 0 } });
    const answered = ['/a', '/b', '/c'].map((p) => outcome(request(s, { ':path': p })));
    const declared = outcome(request(s, { ':method': 'POST', ':path': '/big', 'content-length': '1000' }, false));
    const slow = request(s, { ':method': 'POST', ':path': '/slow' }, false);
    slow.write('x');
    const late = outcome(slow);
    for (const o of await Promise.all([...answered, declared, late])) expect(o).toMatchObject({ rstCode: constants.NGHTTP2_CANCEL, body: '' });
    expect(timeouts).toBe(5);
    await until(() => limits.extraStreams === 0, 'the streams’ descriptors back');
    // the connection itself is fine: once the client opens its windows it is answered on it
    expect(limits.open).toBe(1);
    s.settings({ initialWindowSize: 65_535 });
    await once(s, 'localSettings');
    expect((await call(s, { ':path': '/after' })).body).toBe('ok /after');
    s.destroy();
    await until(() => limits.open === 0, 'the connection released');
  });

  it('a client that never opens its connection’s window: the streams stuck behind it are reset after the send timeout', async () => {
    const limits = new ClientLimits(noLimits);
    let timeouts = 0;
    const big = 'z'.repeat(100_000);
    const { port } = await start(
      (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        if (req.url === '/stream')
          res.write(big); // still writing: the wait for 'drain'
        else res.end(big); // handed over: the wait for all of it to go
      },
      { limits, sendTimeoutMs: 200, events: { sendTimeout: () => timeouts++ } },
    );
    // stream windows wide open, the connection's left at 65,535 bytes and never updated
    const r = await Raw.open(port, [[4, 0x7fffffff]]);
    r.send(HEADERS(1, get('/end')), HEADERS(3, get('/stream')), HEADERS(5, get('/end')));
    await until(() => [1, 3, 5].every((id) => r.reset(id) === constants.NGHTTP2_CANCEL), 'the three streams reset');
    const sent = r.frames.filter((f) => f.type === 0).reduce((n, f) => n + f.payload.length, 0);
    expect(sent).toBe(65_535);
    expect(timeouts).toBe(3);
    await until(() => limits.extraStreams === 0, 'their descriptors back');
    expect(limits.open).toBe(1);
  });

  it('a client that stops reading its connection: streams past the send timeout are released (onClose, the ceiling) even though their resets cannot go out', async () => {
    // Defect (fixed): the send timeout closed the stream with CANCEL, but an RST_STREAM cannot leave a
    // connection whose client reads nothing, and Node keeps the stream until it has: no 'close', so
    // onClose never ran (the gateway's worker stayed held, paused, with its idle timer stopped) and the
    // connection and its streams stayed counted for as long as the client kept the socket. Now a stream
    // still open a send timeout after its reset drops the connection, as HTTP/1.1's send timeout does.
    const limits = new ClientLimits(noLimits);
    let closes = 0;
    let timeouts = 0;
    const chunk = Buffer.alloc(256 * 1024, 'y');
    const { port } = await start(
      (req, res) => {
        res.onClose(() => closes++);
        res.writeHead(200, { 'content-type': 'text/plain' });
        const pump = (): void => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.onceDrain(pump);
        };
        pump();
      },
      { limits, sendTimeoutMs: 200, events: { sendTimeout: () => timeouts++ } },
    );
    // windows wide open, then the socket is not read: the server's writes pile up in the kernel
    const r = await Raw.open(port, [[4, 0x7fffffff]]);
    r.send(WINDOW_UPDATE(0, 0x7fffffff - 65535));
    for (let i = 0; i < 6; i++) r.send(HEADERS(1 + 2 * i, get('/big')));
    await until(() => limits.extraStreams === 5, 'six streams');
    r.sock.pause();
    await until(() => timeouts === 6, 'the send timeouts');
    await until(() => closes === 6 && limits.extraStreams === 0 && limits.open === 0, 'the streams and the connection released', 5000);
  });

  it('a connection whose stream outlived the idle timeout is still closed once it is idle', async () => {
    // Defect (fixed): the session's timeout fired once, found a stream open and did nothing; Node does
    // not arm it again, so once that stream ended the connection was never closed for idleness.
    const limits = new ClientLimits(noLimits);
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        if (req.url === '/hold') held.push(res);
        else ok(req, res);
      },
      { limits, keepAliveTimeoutMs: 150 },
    );
    for (const how of ['the handler ends it', 'the client resets it'] as const) {
      const s = await session(url);
      const st = request(s, { ':path': '/hold' });
      st.resume();
      await until(() => held.length === 1, 'the held stream');
      // longer than the idle timeout, silent both ways
      await new Promise((r) => setTimeout(r, 400));
      expect(s.closed).toBe(false);
      if (how === 'the handler ends it') {
        held[0]!.writeHead(200, {});
        held[0]!.end('done');
      } else st.close(constants.NGHTTP2_CANCEL);
      held.length = 0;
      const [code] = (await once(s, 'goaway')) as [number];
      expect(code).toBe(constants.NGHTTP2_NO_ERROR);
      await until(() => limits.open === 0, `the idle connection closed (${how})`);
    }
  });

  it('a connection that sends the preface and then reads nothing is closed, not kept half-closed', async () => {
    // Defect (fixed): the idle GOAWAY ends the session, and Node then ends the socket and waits for the
    // client's FIN with no time limit: a client that never reads (or never closes) kept its connection
    // counted forever, so a few thousand such sockets filled the ceiling. HTTP/1.1 lingers 5 s; so now
    // does a socket whose HTTP/2 session has ended.
    const limits = new ClientLimits(noLimits);
    const { port } = await start(ok, { limits, keepAliveTimeoutMs: 100 });
    await deafSocket(port, PREFACE); // not even SETTINGS
    await deafSocket(port, Buffer.concat([PREFACE, SETTINGS()]));
    await until(() => limits.open === 2, 'both admitted');
    // (a socket that is not read never learns that it was closed: the server's count tells)
    await until(() => limits.open === 0, 'both closed', 9000);
  }, 20_000);

  it('a client that sends GOAWAY gets its streams in flight answered, then its connection is released', async () => {
    const limits = new ClientLimits(noLimits);
    const held: FrontResponse[] = [];
    const { port } = await start(
      (req, res) => {
        if (req.url === '/hold') held.push(res);
        else ok(req, res);
      },
      { limits },
    );
    const r = await Raw.open(port);
    r.send(HEADERS(1, get('/x')), HEADERS(3, get('/hold')));
    await until(() => r.answered(1) && held.length === 1, 'the answer and the held stream');
    const goaway = Buffer.alloc(8); // last stream 0, NO_ERROR
    r.send(frame(7, 0, 0, goaway));
    await new Promise((res) => setTimeout(res, 50));
    // a graceful goodbye: the stream in flight still goes to the end
    held[0]!.writeHead(200, { 'content-type': 'text/plain' });
    held[0]!.end('late answer');
    await until(() => r.frames.some((f) => f.id === 3 && f.type === 0 && f.payload.toString() === 'late answer'), 'the held answer');
    r.sock.pause(); // and reads nothing more: its FIN never comes
    await until(() => limits.open === 0, 'the connection released', 9000);
  }, 20_000);

  it('floods nghttp2 bounds (pings unread, SETTINGS, CONTINUATION, header pairs) end that connection only, and it is let go (regression)', async () => {
    const limits = new ClientLimits(noLimits);
    const { port, url } = await start(ok, { limits });
    const pings = await Raw.open(port);
    pings.sock.pause();
    pings.sock.write(Buffer.concat(Array.from({ length: 100_000 }, () => frame(6, 0, 0, Buffer.alloc(8)))));
    const settings = await Raw.open(port);
    settings.sock.write(Buffer.concat(Array.from({ length: 20_000 }, () => SETTINGS([[3, 100]]))));
    const continuation = await Raw.open(port);
    const head = frame(1, 0, 1, Buffer.from([0x82, 0x86, 0x84])); // GET, http, / without END_HEADERS
    continuation.sock.write(Buffer.concat([head, ...Array.from({ length: 20_000 }, () => frame(9, 0, 1, hpack([['a', 'b']])))]));
    const pairs = await Raw.open(port);
    pairs.send(HEADERS(1, [...get('/x'), ...Array.from({ length: 300 }, (_, i): [string, string] => [`x-${i}`, 'v'])]));
    await until(() => pairs.reset(1) === constants.NGHTTP2_ENHANCE_YOUR_CALM, 'the header list refused');
    await until(() => settings.closed && continuation.closed, 'the flooding connections closed');
    await until(() => limits.open === 1, 'the unread one closed too'); // (it never reads its close: only the header-list one is left)
    const s = await session(url);
    expect((await call(s, { ':path': '/still' })).body).toBe('ok /still');
    pairs.sock.destroy();
    s.destroy();
    await until(() => limits.open === 0 && limits.extraStreams === 0, 'all released');
  });

  it('a preface that never completes is cut off by the request timeout (regression)', async () => {
    const limits = new ClientLimits(noLimits);
    const { port } = await start(ok, { limits, headersTimeoutMs: 300, keepAliveTimeoutMs: 60_000 });
    const sock = connect(port, '127.0.0.1');
    cleanup.push(() => {
      sock.destroy();
    });
    sock.on('error', () => undefined);
    await once(sock, 'connect');
    let closed = false;
    sock.on('close', () => (closed = true));
    const started = Date.now();
    // a byte at a time, each in time for an idle timer that a byte would refresh
    for (let i = 0; i < PREFACE.length - 1 && !closed; i++) {
      sock.write(PREFACE.subarray(i, i + 1));
      await new Promise((r) => setTimeout(r, 40));
    }
    await until(() => closed && limits.open === 0, 'the connection cut off');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('counts come back to 0 after every way a stream can end (regression)', async () => {
    const limits = new ClientLimits({ ...noLimits, maxConnections: 50 });
    let handled = 0;
    let closes = 0;
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        handled++;
        res.onClose(() => closes++);
        if (req.url === '/throw') throw new Error('boom');
        if (req.url === '/throw-late') {
          res.writeHead(200, {});
          res.write('x');
          throw new Error('boom');
        }
        if (req.url === '/hold') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('held');
          held.push(res);
          return;
        }
        ok(req, res);
      },
      { limits, maxBodyBytes: 100, headersTimeoutMs: 200, http2: { maxConcurrentStreams: 256 } },
    );
    const s = await session(url);
    const ends: Promise<unknown>[] = [];
    for (const p of ['/throw', '/throw-late', '/ok']) ends.push(outcome(request(s, { ':path': p })));
    ends.push(outcome(request(s, { ':method': 'POST', ':path': '/big', 'content-length': '500' }, false))); // 413 declared
    const big = request(s, { ':method': 'POST', ':path': '/big2' }, false); // 413 as it crosses
    big.write('x'.repeat(300));
    ends.push(outcome(big));
    const slow = request(s, { ':method': 'POST', ':path': '/slow' }, false); // 408
    slow.write('x');
    ends.push(outcome(slow));
    const before = request(s, { ':method': 'POST', ':path': '/reset-before' }, false); // reset before its body ends
    before.write('x');
    ends.push(outcome(before));
    before.close(constants.NGHTTP2_CANCEL);
    const after = request(s, { ':path': '/hold' }); // reset after dispatch
    ends.push(outcome(after));
    await until(() => held.length === 1, 'the held stream');
    after.close(constants.NGHTTP2_CANCEL);
    await Promise.all(ends);
    await until(() => closes === 2 && limits.extraStreams === 0, 'onClose for /throw-late and the reset /hold');
    // streams in flight when the connection goes
    const inflight = Array.from({ length: 20 }, () => outcome(request(s, { ':path': '/hold' })));
    await until(() => held.length === 21 && limits.extraStreams === 19, 'twenty held streams');
    s.destroy();
    await Promise.all(inflight);
    await until(() => closes === 22 && limits.open === 0 && limits.extraStreams === 0, 'all released');
    // (22 held or answered, /throw and /throw-late; /reset-before too when its END_STREAM won: node:http2's client
    // close() ends a stream before it resets it, the very race the front avoids for its own resets)
    expect(handled).toBeGreaterThanOrEqual(24);
    expect(handled).toBeLessThanOrEqual(25);
  });

  it('rapid reset: nghttp2 ends the session, and its connection is let go within the keep-alive timeout (regression)', async () => {
    // nghttp2 answers a flood of HEADERS + RST_STREAM (CVE-2023-44487) with GOAWAY and stops reading
    // the connection, without Node's session knowing: nothing closes it but the idle timeout, not even
    // the client closing its side (its FIN is never read)
    const limits = new ClientLimits(noLimits);
    let handled = 0;
    const { port } = await start(
      (req, res) => {
        handled++;
        ok(req, res);
      },
      { limits, keepAliveTimeoutMs: 300, http2: { maxConcurrentStreams: 256 } },
    );
    const r = await Raw.open(port);
    const frames: Buffer[] = [];
    for (let i = 0; i < 3000; i++) frames.push(HEADERS(1 + 2 * i, get('/ok')), RST(1 + 2 * i));
    r.send(...frames);
    await until(() => r.frames.some((f) => f.type === 7), 'its GOAWAY');
    r.sock.destroy();
    await until(() => limits.open === 0 && limits.extraStreams === 0, 'the connection and its streams released');
    expect(handled).toBeLessThan(3000);
  });

  it('a connection admitted past the ceiling for probes serves one stream, as over HTTP/1.1', async () => {
    // Defect (fixed): a probe-only connection (DEFAULTS.limits.probeConnections of them past the ceiling)
    // served any number of probe streams for as long as the client kept it busy, so a client at the
    // ceiling could take every probe slot and keep it, and the orchestrator's liveness probe got 503.
    const limits = new ClientLimits({ ...noLimits, maxConnections: 1 });
    const { url } = await start(ok, { limits, probePaths: new Set(['/health']) });
    const first = await session(url);
    expect((await call(first, { ':path': '/x' })).status).toBe(200);
    const probe = await session(url);
    const [a, b] = await Promise.all([outcome(request(probe, { ':path': '/health' })), outcome(request(probe, { ':path': '/health' }))]);
    expect(a.body).toBe('ok /health');
    expect(b.rstCode).toBe(constants.NGHTTP2_REFUSED_STREAM);
    await once(probe, 'close');
  });

  it('per_client_connections bounds an HTTP/2 client’s streams too (two past a connection’s first weigh one connection)', async () => {
    // Defect (fixed): per-client limits counted connections only, so one HTTP/2 connection held up to
    // max_concurrent_streams worker connections whatever per_client_connections said.
    const limits = new ClientLimits({ maxConnections: 0, perClientConnections: 2, perClientRps: 0, perClientBurst: 0 });
    const held: FrontResponse[] = [];
    const { url } = await start(
      (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('held');
        held.push(res);
      },
      { limits },
    );
    const s = await session(url);
    // the connection (1 of 2) and two more streams (half a connection each): 2 of 2
    const streams = [0, 1, 2].map(() => request(s, { ':path': '/hold' }));
    await until(() => held.length === 3, 'three streams');
    const refused = await call(s, { ':path': '/more' });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'too_many_connections' } });
    expect((await httpCall(url, '/h1')).status).toBe(429);
    held.shift()!.end();
    await until(() => limits.extraStreams === 1, 'one stream back');
    const more = request(s, { ':path': '/more' });
    await until(() => held.length === 3, 'admitted again');
    for (const st of [...streams, more]) st.close(constants.NGHTTP2_CANCEL);
    await until(() => limits.extraStreams === 0, 'the streams back');
    s.destroy();
    await until(() => limits.open === 0 && limits.tracked === 0, 'the client forgotten');
  });
});

// ---- FrontResponse's contract -------------------------------------------------------------------
