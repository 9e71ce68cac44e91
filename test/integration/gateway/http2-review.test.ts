// HTTP/2 on the data plane as a hostile client sees it: what each way of holding a stream or a
// connection costs the listener (the connection and stream counts must come back to 0), what the
// handler is told (FrontResponse's contract as over HTTP/1.1), inputs that must not crash the
// process, and the gateway's own answers over HTTP/2 against HTTP/1.1's.
import { constants } from 'node:http2';
import type { ClientHttp2Session, ClientHttp2Stream, OutgoingHttpHeaders, SecureClientSessionOptions } from 'node:http2';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import type { FrontHandler, FrontOptions, FrontResponse } from '../../../src/gateway/front.js';
import { ClientLimits } from '../../../src/gateway/limits.js';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimFaultSpec } from '../../../src/config/sim-faults.js';
import { httpCall, oneModel, startGateway, until } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';
import { h2Call, h2Session, startFront } from '../../helpers/h2.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

const noLimits = { maxConnections: 1000, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 };

const start = (handler: FrontHandler, opts: Partial<FrontOptions> = {}): ReturnType<typeof startFront> => startFront(cleanup, handler, opts);
const session = (url: string, opts: SecureClientSessionOptions = {}): Promise<ClientHttp2Session> => h2Session(cleanup, url, opts);

function request(s: ClientHttp2Session, headers: OutgoingHttpHeaders, endStream = true): ClientHttp2Stream {
  const st = s.request(headers, { endStream });
  st.on('error', () => undefined);
  return st;
}

const call = h2Call;

function outcome(st: ClientHttp2Stream): Promise<{ ended: boolean; rstCode: number; body: string }> {
  let ended = false;
  let body = '';
  st.on('data', (c: Buffer) => (body += c.toString()));
  st.on('end', () => (ended = true));
  return new Promise((resolve) => st.once('close', () => resolve({ ended, rstCode: st.rstCode ?? 0, body })));
}

// ---- raw frames (what node:http2's client will not send, and a client that does not read) ------

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

function frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1). */
function hpackInt(v: number, prefix: number): number[] {
  const max = (1 << prefix) - 1;
  if (v < max) return [v];
  const out = [max];
  v -= max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** Fields as literals without indexing, new names (RFC 7541 §6.2.2): any name, any value, in the order given. */
function hpack(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [n, v] of fields) {
    const nb = Buffer.from(n, 'latin1');
    const vb = Buffer.from(v, 'latin1');
    out.push(0, ...hpackInt(nb.length, 7), ...nb, ...hpackInt(vb.length, 7), ...vb);
  }
  return Buffer.from(out);
}

const SETTINGS = (pairs: [number, number][] = []): Buffer => {
  const b = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([k, v], i) => {
    b.writeUInt16BE(k, 6 * i);
    b.writeUInt32BE(v, 6 * i + 2);
  });
  return frame(4, 0, 0, b);
};
const HEADERS = (id: number, fields: readonly (readonly [string, string])[], end = true): Buffer => frame(1, 0x4 | (end ? 1 : 0), id, hpack(fields));
const DATA = (id: number, data: string, end = false): Buffer => frame(0, end ? 1 : 0, id, Buffer.from(data));
const RST = (id: number, code: number = constants.NGHTTP2_CANCEL): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(code);
  return frame(3, 0, id, b);
};
const WINDOW_UPDATE = (id: number, inc: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(inc);
  return frame(8, 0, id, b);
};
const get = (path: string, method = 'GET'): [string, string][] => [
  [':method', method],
  [':scheme', 'http'],
  [':path', path],
  [':authority', 'x'],
];

interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A raw HTTP/2 client: writes what it is told, parses what it reads (while it reads). */
class Raw {
  readonly frames: Frame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);

  private constructor(readonly sock: Socket) {
    sock.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        const b = this.buf;
        this.frames.push({ type: b[3] as number, flags: b[4] as number, id: b.readUInt32BE(5) & 0x7fffffff, payload: b.subarray(9, 9 + len) });
        this.buf = b.subarray(9 + len);
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', () => (this.closed = true));
  }

  static async open(port: number, settings: [number, number][] = []): Promise<Raw> {
    const sock = connect(port, '127.0.0.1');
    cleanup.push(() => {
      sock.destroy();
    });
    await once(sock, 'connect');
    const r = new Raw(sock);
    sock.write(Buffer.concat([PREFACE, SETTINGS(settings)]));
    return r;
  }

  send(...b: Buffer[]): void {
    this.sock.write(Buffer.concat(b));
  }

  /** Whether stream `id` got a response head. */
  answered(id: number): boolean {
    return this.frames.some((f) => f.id === id && f.type === 1);
  }

  reset(id: number): number | undefined {
    const f = this.frames.find((x) => x.id === id && x.type === 3);
    return f === undefined ? undefined : f.payload.readUInt32BE(0);
  }
}

/** A client that never reads: a plain socket with no 'data' listener stays paused. */
async function deafSocket(port: number, first: Buffer): Promise<Socket> {
  const sock = connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  cleanup.push(() => {
    sock.destroy();
  });
  await once(sock, 'connect');
  sock.write(first);
  return sock;
}

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

describe('FrontResponse over HTTP/2 keeps HTTP/1.1’s contract', () => {
  it('onClose given after the client reset the stream is still called', async () => {
    // Defect (fixed): H2Res only remembered the callback; one registered after 'close' was never
    // called (HTTP/1.1's Res calls it on the next tick), so a handler that registers it after an await
    // kept its work going for a client long gone.
    let closes = 0;
    const seen: [boolean, boolean][] = [];
    const { url } = await start((req, res) => {
      seen.push([res.destroyed, res.headersSent]);
      res.writeHead(200, { 'content-type': 'text/plain' });
      seen.push([res.destroyed, res.headersSent]);
      setTimeout(() => {
        seen.push([res.destroyed, res.headersSent]);
        res.onClose(() => closes++);
        res.onClose(() => closes++); // both, as over HTTP/1.1
      }, 100);
    });
    const s = await session(url);
    const st = request(s, { ':path': '/late' });
    await new Promise((r) => setTimeout(r, 20));
    st.close(constants.NGHTTP2_CANCEL);
    await until(() => closes === 2, 'both callbacks', 3000);
    expect(seen).toEqual([
      [false, false],
      [false, true],
      [true, true],
    ]);
  });

  it('destroy(), or a handler that throws once its head is out, resets the stream: the client never sees a clean end', async () => {
    // Defect (fixed): close(INTERNAL_ERROR) on a stream with nothing left to write ends its writable side
    // first (Node's closeStream calls end()), and nghttp2 flushes that END_STREAM before the
    // RST_STREAM: the client took a truncated answer for a complete one.
    const { url } = await start((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100 });
      res.write('partial');
      if (req.url === '/destroy') setImmediate(() => res.destroy());
      else if (req.url === '/twice') res.writeHead(200, {}); // throws: the head is out
    });
    const s = await session(url);
    for (const p of ['/destroy', '/twice']) {
      const o = await outcome(request(s, { ':path': p }));
      expect(o.ended, p).toBe(false);
      expect(o.rstCode, p).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    }
  });

  it('write() copies what it is given, HEAD gets no body, and write after end is ignored (regression)', async () => {
    const { url } = await start((req, res) => {
      const buf = Buffer.from('original');
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(buf);
      buf.write('CHANGED!'); // the caller reuses its memory once write returns
      res.end(buf.subarray(0, 3));
      buf.fill(0);
      expect(res.write('more')).toBe(true); // ignored, nothing to wait for (as over HTTP/1.1)
      res.end('again');
    });
    const s = await session(url);
    const got = await call(s, { ':path': '/' });
    expect(got.body).toBe('originalCHA');
    const head = await outcome(request(s, { ':method': 'HEAD', ':path': '/' }));
    expect(head).toEqual({ ended: true, rstCode: 0, body: '' });
  });

  it('connection-specific response fields HTTP/2 forbids are dropped, not a 500', async () => {
    // Defect (fixed): `te` and `http2-settings` were passed to respond(), which throws: a handler that
    // sets them got a 500 (or, from a callback, an uncaught exception).
    const { url } = await start((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', te: 'gzip', 'http2-settings': 'AAA', Connection: 'close', 'Keep-Alive': 'timeout=5' });
      res.end('fine');
    });
    const s = await session(url);
    const got = await call(s, { ':path': '/' });
    expect(got.status).toBe(200);
    expect(got.body).toBe('fine');
    expect(got.headers.te).toBeUndefined();
  });
});

// ---- crash safety and the gateway over HTTP/2 ---------------------------------------------------

describe('the gateway over HTTP/2 against hostile and broken input', () => {
  const sims: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const x of sims.splice(0)) await x.close();
  });

  async function gatewayWith(faults: SimFaultSpec[] = [{}], interTokenMs = 0): Promise<Gateway> {
    const urls: string[] = [];
    for (const f of faults) {
      const sim = await startSim({ model: 'm', version: 'v1', seed: 11, interTokenMs, jitter: 0, faults: f });
      sims.push(sim);
      urls.push(sim.url);
    }
    const gw = await startGateway(oneModel(urls), {}, { picker: new RoundRobinPicker() });
    cleanup.push(() => gw.close());
    return gw;
  }

  it('odd pseudo-headers, methods, paths and trailers get an answer or a reset, and the process keeps serving (regression)', async () => {
    const gw = await gatewayWith();
    const r = await Raw.open(Number(gw.url.split(':')[2]));
    const body = JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 3, stream: true });
    const json = ['content-type', 'application/json'] as const;
    const cases: Buffer[][] = [
      [
        HEADERS(
          1,
          [
            [':method', 'CONNECT'],
            [':authority', 'x:1'],
          ],
          false,
        ),
        RST(1),
      ],
      [
        HEADERS(3, [
          [':method', 'GET'],
          [':scheme', 'foo'],
          [':path', 'relative'],
          [':authority', 'x'],
        ]),
      ],
      [HEADERS(5, get('*', 'OPTIONS'))],
      [HEADERS(7, get('http://x/health'))],
      [
        HEADERS(9, [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':authority', 'x'],
        ]),
      ], // no :path
      [HEADERS(11, get('/' + 'a'.repeat(15_000)))],
      [HEADERS(13, get('/health', 'HEAD'))],
      [HEADERS(15, get('/v1/completions', 'HEAD'))],
      [HEADERS(17, [...get('/v1/completions', 'POST'), json], false), DATA(17, body), HEADERS(17, [['x-trailer', '1']])],
      [HEADERS(19, [...get('/v1/completions', 'POST'), json], false), DATA(19, body, true), RST(19)],
      [HEADERS(21, [...get('/health'), ['te', 'gzip']])],
      [HEADERS(23, [...get('/health'), ['X-Upper', 'y']])],
      [HEADERS(25, [...get('/v1/completions', 'POST'), ['content-length', '5']], false), DATA(25, 'abc', true)],
      [HEADERS(27, get('/he alth'))],
      [HEADERS(29, get('/health', ''))],
      [HEADERS(31, [...get('/health'), ['cookie', 'a=1'], ['cookie', 'b=2'], ['host', 'other']])],
      [HEADERS(33, [...get('/v1/completions', 'POST'), json, ['content-length', '-1']], false), DATA(33, '{}', true)],
    ];
    for (const c of cases) r.send(...c);
    const ids = [3, 5, 7, 9, 11, 13, 15, 17, 21, 23, 25, 27, 29, 31, 33];
    await until(() => ids.every((id) => r.answered(id) || r.reset(id) !== undefined), 'an answer or a reset for each');
    expect(r.closed).toBe(false);
    // the same connection and a new one still work
    r.send(HEADERS(35, get('/health')));
    await until(() => r.answered(35), 'the health answer');
    const s = await session(gw.url);
    expect((await call(s, { ':path': '/health' })).status).toBe(200);
  });

  it('a worker that breaks mid-stream: the HTTP/2 client gets the same resumed stream as an HTTP/1.1 one', async () => {
    const gw = await gatewayWith([{ crashAfterTokens: 5 }, {}, { crashAfterTokens: 5 }, {}]);
    const body = JSON.stringify({ model: 'm', prompt: 'Once upon a time', stream: true, temperature: 0, max_tokens: 30 });
    const norm = (t: string): string => t.replace(/"id":"[^"]+"/g, '"id":"ID"').replace(/"created":\d+/g, '"created":0');
    const h1 = await httpCall(gw.url, '/v1/completions', undefined, { rawBody: body });
    expect(h1.status).toBe(200);
    const s = await session(gw.url);
    const h2 = await call(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, body);
    expect(h2.status).toBe(200);
    expect(norm(h2.body)).toBe(norm(h1.body));
    expect(h2.body).toContain('[DONE]');
    const metrics = await gw.telemetry.metrics.registry.metrics();
    // both streams were broken and resumed (a continuation may land on the other crashing worker too)
    const resumed = /glidepath_stream_migrations_total\{[^}]*outcome="resumed"[^}]*\} (\d+)/.exec(metrics);
    expect(Number(resumed?.[1])).toBeGreaterThanOrEqual(2);
  });

  it('a client that resets its stream mid-answer frees the worker at once; errors are answered as over HTTP/1.1', async () => {
    const gw = await gatewayWith([{}], 20);
    const pool = gw.dp.models.get('m')!.pools.get('v1')!;
    const s = await session(gw.url);
    const long = JSON.stringify({ model: 'm', prompt: 'Once upon a time', stream: true, max_tokens: 200 });
    const st = request(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, false);
    st.end(long);
    await once(st, 'data');
    expect(pool.inflight.size).toBe(1);
    st.close(constants.NGHTTP2_CANCEL);
    await until(() => pool.inflight.size === 0, 'the worker released');
    for (const [path, method, payload] of [
      ['/v1/completions', 'POST', '{"model":'],
      ['/v1/completions', 'GET', undefined],
      ['/nope', 'GET', undefined],
      ['/v1/completions', 'POST', JSON.stringify({ model: 'other', prompt: 'x' })],
    ] as const) {
      const h1 = await httpCall(gw.url, path, undefined, { method, ...(payload === undefined ? {} : { rawBody: payload }) });
      const h2 = await call(s, { ':method': method, ':path': path, 'content-type': 'application/json' }, payload);
      expect(h2.status, `${method} ${path}`).toBe(h1.status);
      expect(JSON.parse(h2.body), `${method} ${path}`).toEqual(JSON.parse(h1.body));
    }
  });
});
