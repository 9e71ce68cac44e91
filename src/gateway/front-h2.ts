// The data plane's HTTP/2 side (cleartext, prior knowledge, on the same port as HTTP/1.1): the client connections the HTTP/1.1
// server hands over when they open with the HTTP/2 preface, each stream served as a FrontRequest, and what bounds them: streams
// per connection, the descriptor ceiling (a stream past a connection's first holds one descriptor), body size, request, send and idle timeouts.
import { constants, createServer } from 'node:http2';
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { CATALOGUE } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { refusalAnswer, requestRefusal } from './limits.js';
import type { RefusalAnswer } from './limits.js';
import type { FrontConfig, FrontRequest, FrontResponse, Http2Options } from './http1/server-options.js';

/** What a client sends first on an HTTP/2 connection with prior knowledge (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Whether a connection's first bytes are HTTP/2's: 1 the whole preface is here, 0 not yet decided (a prefix of it), -1 not HTTP/2. */
export function prefaceMatch(buf: Buffer): -1 | 0 | 1 {
  const n = Math.min(buf.length, PREFACE.length);
  for (let i = 0; i < n; i++) if (buf[i] !== PREFACE[i]) return -1;
  return n === PREFACE.length ? 1 : 0;
}

/** Connection-specific fields HTTP/2 forbids in a response (RFC 9113 §8.2.2); HTTP/1.1 framing is the writer's business. */
const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);
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
  readonly addr: string;
  /** Admitted past the ceiling: probe paths only (FrontOptions.probePaths). */
  readonly probeOnly: boolean;
  active: number;
}

/** The response of one stream, as the handler writes it. */
class H2Res implements FrontResponse {
  private closeCb: (() => void) | null = null;
  private ended = false;
  private sendTimer: NodeJS.Timeout | null = null;
  sendTimedOut = false;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly head: boolean,
    private readonly front: H2Front,
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
    if (this.destroyed || this.ended) return false;
    if (!this.stream.headersSent) this.writeHead(200, {});
    if (this.head) return true;
    // FrontResponse's contract: the caller may reuse its memory once write returns
    const ok = this.stream.write(typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    if (!ok) this.waitSend();
    return ok;
  }

  end(chunk?: Buffer | string): void {
    if (this.ended) return;
    this.ended = true;
    this.stopSend();
    if (this.destroyed) return;
    if (!this.stream.headersSent) this.writeHead(200, {});
    if (this.head || this.stream.writableEnded) return;
    if (chunk === undefined) this.stream.end();
    else this.stream.end(typeof chunk === 'string' ? chunk : Buffer.from(chunk));
  }

  onClose(cb: () => void): void {
    this.closeCb = cb;
  }

  onceDrain(cb: () => void): void {
    this.stream.once('drain', cb);
  }

  destroy(): void {
    this.stopSend();
    if (!this.stream.closed) this.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  }

  /** Bytes wait for the client's flow-control window: the stream is reset when they have not gone for the send timeout. */
  private waitSend(): void {
    const ms = this.front.cfg.sendMs;
    if (ms <= 0 || this.sendTimer !== null) return;
    this.stream.once('drain', this.stopSend);
    const t = setTimeout(this.onSendTimeout, ms);
    t.unref();
    this.sendTimer = t;
  }

  private readonly stopSend = (): void => {
    if (this.sendTimer === null) return;
    clearTimeout(this.sendTimer);
    this.sendTimer = null;
    this.stream.removeListener('drain', this.stopSend);
  };

  private readonly onSendTimeout = (): void => {
    this.sendTimer = null;
    this.sendTimedOut = true;
    this.front.cfg.events.sendTimeout?.();
    if (!this.stream.closed) this.stream.close(constants.NGHTTP2_CANCEL);
  };

  private readonly onStreamClose = (): void => {
    this.stopSend();
    // a response ended by the handler was handed over; one that was not is the client leaving (or a reset)
    const cb = this.closeCb;
    this.closeCb = null;
    if (!this.ended && cb !== null) cb();
  };
}

/** The HTTP/2 server behind the data plane's HTTP/1.1 one: it never listens, it adopts the connections that speak HTTP/2. */
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
    // the HTTP/1.1 server keeps a client's FIN for itself to handle; here it ends the connection
    socket.allowHalfOpen = false;
    socket.pause();
    socket.unshift(lead);
    this.adopting = { addr, probeOnly, active: 0 };
    try {
      this.server.emit('connection', socket);
    } finally {
      this.adopting = null;
    }
  }

  private readonly onSession = (session: ServerHttp2Session): void => {
    const c = this.adopting ?? { addr: '', probeOnly: false, active: 0 };
    this.sessions.set(session, c);
    session.on('error', noop);
    const idleMs = this.cfg.keepAliveMs;
    // idle means no frame either way for this long: with no stream open, the connection is closed gracefully (GOAWAY)
    if (idleMs > 0)
      session.setTimeout(idleMs, () => {
        if (c.active === 0) session.close();
      });
  };

  private readonly onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void => {
    stream.on('error', noop); // a reset by the client: 'close' tells the response
    const c = this.sessions.get(stream.session as ServerHttp2Session);
    if (c === undefined) {
      stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    const limits = this.cfg.limits;
    // a stream past the connection's first needs a descriptor of its own (its worker's connection)
    if (c.active >= 1 && limits !== null && !c.probeOnly && !limits.admitStream()) {
      const a = refusalAnswer('capacity', limits.settings, c.addr);
      this.cfg.events.refused?.('capacity', c.addr);
      this.refuse(stream, headers, {
        ...a,
        message: `the server is at its limit of ${limits.settings.maxConnections} client connections (two HTTP/2 streams past a connection's first count as one); retry shortly`,
      });
      return;
    }
    c.active++;
    stream.once('close', () => {
      c.active--;
      if (c.active >= 1 && limits !== null && !c.probeOnly) limits.releaseStream();
    });
    this.readRequest(stream, headers, c);
  };

  /** The body in full (bounded by maxBody and the request timeout), then the handler. */
  private readRequest(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, c: H2Conn): void {
    const cfg = this.cfg;
    const max = cfg.maxBody;
    const declared = headers['content-length'];
    if (declared !== undefined && Number(declared) > max) {
      this.fail(stream, headers, 'body_too_large', `the request body (${declared} bytes) exceeds the limit of ${max} bytes`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const timer =
      cfg.requestMs > 0
        ? setTimeout(() => {
            done = true;
            this.fail(stream, headers, 'request_timeout', `the request did not arrive completely within ${cfg.requestMs} ms`);
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
        this.fail(stream, headers, 'body_too_large', `the request body exceeds the limit of ${max} bytes`);
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
        this.refuse(stream, headers, a);
        return;
      }
    }
    const req: FrontRequest = { method, url, headers: requestHeaders(headers), body, httpVersion: '2', remoteAddress: c.addr };
    const res = new H2Res(stream, method === 'HEAD', this);
    try {
      cfg.handler(req, res);
    } catch {
      if (stream.closed) return;
      if (!stream.headersSent) this.fail(stream, headers, 'internal_error', 'internal server error');
      else stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    }
  }

  private refuse(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, a: RefusalAnswer): void {
    this.answer(stream, headers, a.status, this.cfg.errorBody(a.status, a.code, a.message), a.retryAfterS);
  }

  /** An answer of our own (too large, timeout, handler crash): the stream is then closed, whatever the client still sends. */
  private fail(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, code: ErrorCode, message: string): void {
    const status = CATALOGUE[code][0];
    this.answer(stream, headers, status, this.cfg.errorBody(status, code, message), undefined);
  }

  private answer(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, status: number, text: string, retryAfterS: number | undefined): void {
    if (stream.closed || stream.destroyed) return;
    if (stream.headersSent) {
      stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    const head = headers[':method'] === 'HEAD';
    const fields: Record<string, string | number> = { ':status': status, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
    if (retryAfterS !== undefined) fields['retry-after'] = retryAfterS;
    stream.respond(fields, head ? { endStream: true } : undefined);
    if (!head) stream.end(text);
    // the client may still be sending a body: NO_ERROR tells it to stop once the answer is out (RFC 9113 §8.1)
    if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR);
  }
}

function noop(): void {}
