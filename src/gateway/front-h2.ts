// The data plane's HTTP/2 side (cleartext, prior knowledge, on the same port as HTTP/1.1): the client connections the listener
// (front.ts) hands over when they open with the HTTP/2 preface, each stream served as a FrontRequest, and what bounds them: streams
// per connection, the descriptor ceiling (a stream past a connection's first holds one descriptor), body size, request, send and idle timeouts.
import { constants, createServer } from 'node:http2';
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { CATALOGUE } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { refusalAnswer, requestRefusal } from './limits.js';
import type { RefusalAnswer } from './limits.js';
import { chainClose } from './http1/server-options.js';
// how long a connection whose session is over may take to go: an HTTP/1.1 connection's linger
import { LINGER_MS } from './front-conn.js';
import type { FrontConfig, FrontRequest, FrontResponse, Http2Options } from './http1/server-options.js';

/** What a client sends first on an HTTP/2 connection with prior knowledge (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Whether a connection's first bytes are HTTP/2's: 1 the whole preface is here, 0 not yet decided (a prefix of it), -1 not HTTP/2. */
export function prefaceMatch(buf: Buffer): -1 | 0 | 1 {
  const n = Math.min(buf.length, PREFACE.length);
  for (let i = 0; i < n; i++) if (buf[i] !== PREFACE[i]) return -1;
  return n === PREFACE.length ? 1 : 0;
}

/** Connection-specific fields HTTP/2 forbids in a response (RFC 9113 §8.2.2, Node's respond() throws on them); HTTP/1.1 framing is the writer's business. */
const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'http2-settings']);
/** How a stream is cut when the handler drops it or throws once its head is out: an error, so that Node resets it without ending it first. */
const ABORTED = new Error('response aborted');
/** Frozen header objects (a worker's stream headers, the same for every stream) are converted once. */
const converted = new WeakMap<object, Record<string, string | number>>();

function responseHeaders(headers: Readonly<Record<string, string | number>>): Record<string, string | number> {
  const frozen = Object.isFrozen(headers);
  if (frozen) {
    const c = converted.get(headers);
    if (c !== undefined) return c;
  }
  const out: Record<string, string | number> = {};
  for (const name in headers) {
    const lower = name.toLowerCase();
    if (!HOP_BY_HOP.has(lower)) out[lower] = headers[name] as string | number;
  }
  if (frozen) converted.set(headers, out);
  return out;
}

/** A request's fields as FrontRequest gives them: pseudo-headers left out, `host` from `:authority`, repeated values joined. */
function requestHeaders(h: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in h) {
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    const v = h[name];
    if (v === undefined) continue;
    out[name] = typeof v === 'string' ? v : v.join(name === 'cookie' ? '; ' : ', ');
  }
  const authority = h[':authority'];
  if (out.host === undefined && typeof authority === 'string') out.host = authority;
  return out;
}

/** One client connection over HTTP/2: who it is, how it was admitted, its streams in flight. */
interface H2Conn {
  readonly socket: Socket;
  readonly addr: string;
  /** Admitted past the ceiling: probe paths only (FrontOptions.probePaths), one stream (as one request over HTTP/1.1). */
  readonly probeOnly: boolean;
  /** Streams admitted and not yet closed. */
  active: number;
  /** Streams taken on a probe-only connection. */
  taken: number;
}

/** The response of one stream, as the handler writes it. */
class H2Res implements FrontResponse {
  private closeCb: (() => void) | null = null;
  /** Handed over: ended by the handler (or answered by the front for it); onClose is not for it. */
  private ended = false;
  /** The stream closed before the response was handed over. */
  private closed = false;
  private sendTimer: NodeJS.Timeout | null = null;
  /** What the send timer waits for: 'drain' while the handler writes, 'finish' (all of it taken) once it has ended. */
  private sendUntil: 'drain' | 'finish' = 'drain';
  sendTimedOut = false;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly head: boolean,
    private readonly front: H2Front,
    private readonly conn: H2Conn,
  ) {
    stream.once('close', this.onStreamClose);
  }

  get destroyed(): boolean {
    return this.stream.destroyed || this.stream.closed;
  }

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  writeHead(status: number, headers: Readonly<Record<string, string | number>>): void {
    if (this.destroyed) return;
    this.stream.respond({ ...responseHeaders(headers), ':status': status }, this.head ? { endStream: true } : undefined);
  }

  write(chunk: Buffer | string): boolean {
    // as over HTTP/1.1: nothing to wait for on a response that is over (onClose tells a handler whose client left)
    if (this.destroyed || this.ended) return true;
    if (!this.stream.headersSent) this.writeHead(200, {});
    if (this.head) return true;
    // FrontResponse's contract: the caller may reuse its memory once write returns
    const ok = this.stream.write(typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    if (!ok) this.waitSend('drain');
    return ok;
  }

  end(chunk?: Buffer | string): void {
    if (this.ended) return;
    this.ended = true;
    const stream = this.stream;
    if (this.destroyed) {
      this.stopSend();
      return;
    }
    if (!stream.headersSent) this.writeHead(200, {});
    if (!this.head && !stream.writableEnded) {
      if (chunk === undefined) stream.end();
      else stream.end(typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    }
    // handed over, but what is not yet taken still has the send timeout (a wait for 'drain' goes on as one for all of it):
    // a client that opens no window would otherwise hold the stream for as long as it keeps the connection
    if (stream.writableFinished) this.stopSend();
    else this.waitSend('finish');
  }

  /** The front answered for the handler (it threw before its head went out): as over HTTP/1.1, onClose is not for this. */
  answeredByFront(): void {
    this.ended = true;
    this.closeCb = null;
    this.stopSend();
  }

  onClose(cb: () => void): void {
    if (this.closed) {
      process.nextTick(cb);
      return;
    }
    if (this.ended) return;
    this.closeCb = chainClose(this.closeCb, cb);
  }

  onceDrain(cb: () => void): void {
    if (this.destroyed) return; // onClose tells them instead
    if (!this.stream.writableNeedDrain) {
      process.nextTick(cb);
      return;
    }
    this.stream.once('drain', cb);
  }

  destroy(): void {
    this.stopSend();
    this.front.abort(this.stream);
  }

  /** Bytes wait for the client's flow-control window: the stream is reset when they have not gone for the send timeout. */
  private waitSend(until: 'drain' | 'finish'): void {
    const ms = this.front.cfg.sendMs;
    if (ms <= 0) return;
    const stream = this.stream;
    if (this.sendTimer === null) {
      const t = setTimeout(this.onSendTimeout, ms);
      t.unref();
      this.sendTimer = t;
    } else if (this.sendUntil === until) return;
    else stream.removeListener(this.sendUntil, this.stopSend);
    this.sendUntil = until;
    stream.once(until, this.stopSend);
  }

  private readonly stopSend = (): void => {
    if (this.sendTimer === null) return;
    clearTimeout(this.sendTimer);
    this.sendTimer = null;
    this.stream.removeListener(this.sendUntil, this.stopSend);
  };

  private readonly onSendTimeout = (): void => {
    this.sendTimer = null;
    this.stream.removeListener(this.sendUntil, this.stopSend);
    this.sendTimedOut = true;
    this.front.cfg.events.sendTimeout?.();
    this.front.reset(this.stream, this.conn);
  };

  private readonly onStreamClose = (): void => {
    this.stopSend();
    // a response ended by the handler was handed over; one that was not is the client leaving (or a reset)
    if (this.ended) return;
    this.closed = true;
    const cb = this.closeCb;
    this.closeCb = null;
    if (cb !== null) cb();
  };
}

/** The HTTP/2 server behind the data plane's listener: it never listens itself, it adopts the connections that speak HTTP/2. */
export class H2Front {
  private readonly server: Http2Server;
  /** The connection being adopted: the server announces its session synchronously from emit('connection'). */
  private adopting: H2Conn | null = null;
  private readonly sessions = new WeakMap<ServerHttp2Session, H2Conn>();

  constructor(
    readonly cfg: FrontConfig,
    opts: Http2Options,
  ) {
    this.server = createServer({
      settings: { maxConcurrentStreams: opts.maxConcurrentStreams, maxHeaderListSize: cfg.maxHeader, enablePush: false },
      maxHeaderListPairs: 256,
      // what nghttp2 may hold for one connection (its header tables, frames not yet written) before it refuses more: Node's default
      maxSessionMemory: 10,
    });
    this.server.on('session', this.onSession);
    this.server.on('stream', this.onStream);
    // a protocol error of one client's connection: its session is torn down (and its streams told), the server goes on
    this.server.on('sessionError', noop);
  }

  /** A connection that opened with the HTTP/2 preface (`lead`, the bytes read so far, are given back to it), already admitted as one connection. */
  adopt(socket: Socket, lead: Buffer, addr: string, probeOnly: boolean): void {
    // the listener keeps a client's FIN for the HTTP/1.1 connection to handle; here it ends the connection
    socket.allowHalfOpen = false;
    // Node ends the socket once the session is over (our GOAWAY, the client's, a protocol error) and then waits with no
    // limit for what it wrote to go and for the client's FIN: a client that reads nothing, or never closes, would keep
    // its connection (and its place under the ceiling) for ever. From that moment it has LINGER_MS, as over HTTP/1.1.
    const end = socket.end.bind(socket) as (...a: unknown[]) => Socket;
    socket.end = (...args: unknown[]): Socket => {
      linger(socket, LINGER_MS);
      return end(...args);
    };
    socket.pause();
    socket.unshift(lead);
    this.adopting = { socket, addr, probeOnly, active: 0, taken: 0 };
    try {
      this.server.emit('connection', socket);
    } finally {
      this.adopting = null;
    }
  }

  private readonly onSession = (session: ServerHttp2Session): void => {
    const c = this.adopting;
    if (c === null) {
      session.destroy(); // not one of ours: only adopt() hands connections over
      return;
    }
    this.sessions.set(session, c);
    session.on('error', noop);
    const idleMs = this.cfg.keepAliveMs;
    if (idleMs <= 0) return;
    // idle means no stream frame either way for this long: with no stream open, the connection is closed gracefully (GOAWAY)
    session.on('timeout', () => {
      if (c.active > 0) {
        // Node's timer fires once: armed again, for when the streams are done
        session.setTimeout(idleMs);
        return;
      }
      session.close();
      // a session whose GOAWAY cannot go out (a client that reads nothing) is never over by itself
      linger(c.socket, LINGER_MS);
    });
    session.setTimeout(idleMs);
  };

  private readonly onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void => {
    stream.on('error', noop); // a reset by the client: 'close' tells the response
    const c = this.sessions.get(stream.session as ServerHttp2Session);
    if (c === undefined) {
      stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (c.probeOnly) {
      // past the ceiling: one stream, as one request over HTTP/1.1 (a client must not keep a probe's place)
      if (c.taken++ > 0) {
        stream.close(constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      (stream.session as ServerHttp2Session).close();
    }
    const limits = this.cfg.limits;
    // a stream past the connection's first needs a descriptor of its own (its worker's connection)
    if (c.active >= 1 && limits !== null && !c.probeOnly) {
      const why = limits.admitStream(c.addr);
      if (why !== undefined) {
        const a = refusalAnswer(why, limits.settings, c.addr);
        const note = "two HTTP/2 streams past a connection's first count as one";
        this.cfg.events.refused?.(why, c.addr);
        this.refuse(stream, headers, c, {
          ...a,
          message:
            why === 'capacity'
              ? `the server is at its limit of ${limits.settings.maxConnections} client connections (${note}); retry shortly`
              : `${a.message} (${note})`,
        });
        return;
      }
    }
    c.active++;
    stream.once('close', () => {
      c.active--;
      if (c.active >= 1 && limits !== null && !c.probeOnly) limits.releaseStream(c.addr);
    });
    this.readRequest(stream, headers, c);
  };

  /** The body in full (bounded by maxBody and the request timeout), then the handler. */
  private readRequest(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn): void {
    const cfg = this.cfg;
    const max = cfg.maxBody;
    const declared = headers['content-length'];
    if (declared !== undefined && Number(declared) > max) {
      this.fail(stream, headers, c, 'body_too_large', `the request body (${declared} bytes) exceeds the limit of ${max} bytes`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const timer =
      cfg.requestMs > 0
        ? setTimeout(() => {
            done = true;
            this.fail(stream, headers, c, 'request_timeout', `the request did not arrive completely within ${cfg.requestMs} ms`);
          }, cfg.requestMs)
        : null;
    timer?.unref();
    const finish = (): void => {
      done = true;
      if (timer !== null) clearTimeout(timer);
    };
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > max) {
        finish();
        this.fail(stream, headers, c, 'body_too_large', `the request body exceeds the limit of ${max} bytes`);
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => {
      if (done) return;
      finish();
      this.dispatch(stream, headers, c, chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
    stream.once('close', finish);
  }

  private dispatch(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn, body: Buffer): void {
    if (stream.closed) return;
    const method = headers[':method'] ?? '';
    const url = headers[':path'] ?? '';
    const cfg = this.cfg;
    const limits = cfg.limits;
    if (limits !== null && (c.probeOnly || limits.rateLimited)) {
      const a = requestRefusal(limits, cfg.probePaths, c.probeOnly, c.addr, method, url);
      if (a !== undefined) {
        cfg.events.refused?.(a.why, c.addr);
        this.refuse(stream, headers, c, a);
        return;
      }
    }
    const req: FrontRequest = { method, url, headers: requestHeaders(headers), body, httpVersion: '2', remoteAddress: c.addr };
    const res = new H2Res(stream, method === 'HEAD', this, c);
    try {
      cfg.handler(req, res);
    } catch {
      if (stream.closed) return;
      if (stream.headersSent) this.abort(stream);
      else {
        res.answeredByFront();
        this.fail(stream, headers, c, 'internal_error', 'internal server error');
      }
    }
  }

  /**
   * Cut a stream whose answer is incomplete: RST_STREAM, never END_STREAM first. (close(code) ends the writable side before
   * it resets, and with nothing left to write nghttp2 sends that END_STREAM first: the client would take the truncated
   * answer for a complete one.) A stream destroyed with an error is reset without being ended.
   */
  abort(stream: ServerHttp2Stream): void {
    if (!stream.destroyed) stream.destroy(ABORTED);
  }

  /**
   * Reset a stream the client takes nothing of (CANCEL). An RST_STREAM is not flow-controlled: a stream still open a send
   * timeout later means the client reads nothing of its connection, and Node keeps the stream until the reset has gone out.
   * The connection is then dropped, as HTTP/1.1's send timeout drops it, so its streams close and their workers go free.
   */
  reset(stream: ServerHttp2Stream, c: H2Conn): void {
    if (stream.destroyed) return; // closed already ('close' told, or about to)
    if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
    const socket = c.socket;
    const t = setTimeout(() => socket.destroy(), this.cfg.sendMs);
    t.unref();
    stream.once('close', () => clearTimeout(t));
  }

  private refuse(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn, a: RefusalAnswer): void {
    this.answer(stream, headers, c, a.status, this.cfg.errorBody(a.status, a.code, a.message), a.retryAfterS);
  }

  /** An answer of our own (too large, timeout, handler crash): the stream is then closed, whatever the client still sends. */
  private fail(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn, code: ErrorCode, message: string): void {
    const status = CATALOGUE[code][0];
    this.answer(stream, headers, c, status, this.cfg.errorBody(status, code, message), undefined);
  }

  private answer(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn, status: number, text: string, retryAfterS: number | undefined): void {
    if (stream.closed || stream.destroyed) return;
    if (stream.headersSent) {
      this.abort(stream);
      return;
    }
    const head = headers[':method'] === 'HEAD';
    const fields: Record<string, string | number> = { ':status': status, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
    if (retryAfterS !== undefined) fields['retry-after'] = retryAfterS;
    stream.respond(fields, head ? { endStream: true } : undefined);
    if (!head) stream.end(text);
    // the client may still be sending a body: NO_ERROR tells it to stop once the answer is out (RFC 9113 §8.1). Only then:
    // Node holds a stream closed with NO_ERROR until its answer has gone, with no time limit
    if (!stream.readableEnded) {
      if (stream.writableFinished) stream.close(constants.NGHTTP2_NO_ERROR);
      else stream.once('finish', () => stream.close(constants.NGHTTP2_NO_ERROR));
    }
    // and the answer has the send timeout to go out, as over HTTP/1.1
    const ms = this.cfg.sendMs;
    if (ms <= 0) return;
    const t = setTimeout(() => {
      this.cfg.events.sendTimeout?.();
      this.reset(stream, c);
    }, ms);
    t.unref();
    stream.once('close', () => clearTimeout(t));
  }
}

/** Destroy `socket` if it is still open `ms` from now. */
function linger(socket: Socket, ms: number): void {
  if (socket.destroyed) return;
  const t = setTimeout(() => socket.destroy(), ms);
  t.unref();
  socket.once('close', () => clearTimeout(t));
}

function noop(): void {}
