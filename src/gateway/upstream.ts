// The data plane's HTTP/1.1 client to workers: keep-alive connection pools over net/tls, one request per connection at a time, a bounded wait for one.
//
// Why not undici here: measured on a 2-core machine, undici's dispatcher costs ~28 µs of CPU per
// request more than this client (bench/results/gateway.md); the gateway's whole budget is 80 µs.
// Workers are trusted, speak HTTP/1.1 with keep-alive, and the gateway needs exactly one request
// shape (POST a JSON body, read a status, a content type and a body framed by Content-Length,
// chunked encoding or the connection's end). Everything else in the project still uses undici.
//
// performance.now() is the global one (not node:perf_hooks'), so fake timers in tests move queue waits too.
import net from 'node:net';
import tls from 'node:tls';
import { frameFor, putLatin1, writeFrame } from './frame.js';

/** Lets the request's owner stop it or apply back-pressure. */
export interface UpstreamController {
  readonly aborted: boolean;
  abort(reason: Error): void;
  pause(): void;
  resume(): void;
}

/**
 * Callbacks for one request, in order: onRequestStart (synchronously from dispatch), onRequestSent
 * (synchronously from dispatch when a connection is free, later when the request waited for one),
 * then onResponseStart → onResponseData* → onResponseEnd; or onResponseError at any point (also
 * synchronously from `abort`, and from dispatch when the request cannot even wait). Exactly one of
 * onResponseEnd / onResponseError ends it. Body bytes that arrive in the same read as the
 * response's end come with onResponseEnd (`tail`), so a proxy can forward them and finish in one write.
 */
export interface UpstreamHandler {
  onRequestStart(c: UpstreamController): void;
  /**
   * The request was written to a connection (one still connecting queues the write): from here on
   * the worker has it. `queuedMs` is how long it waited for the connection (0 when one was free).
   */
  onRequestSent(queuedMs: number): void;
  onResponseStart(c: UpstreamController, status: number, contentType: string | undefined): void;
  /**
   * Body bytes, framing removed; one call per socket read at most. Borrowed: the bytes may live in
   * the pool's shared read buffer and are only valid during the call (copy what you keep).
   */
  onResponseData(c: UpstreamController, chunk: Buffer): void;
  /** The response is complete; `tail` (its last bytes, if they came with the end) is borrowed like onResponseData's chunk. */
  onResponseEnd(tail?: Buffer): void;
  onResponseError(c: UpstreamController, err: Error): void;
}

/** Could not open a connection to the worker (refused, unreachable, timed out): the worker, not the request. */
export class ConnectError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * errno → what ran out, for connect failures that are the gateway's own limits and no sign of the
 * worker's health: descriptors (process, system), kernel buffers, memory, local ports.
 */
const LOCAL_RESOURCES: ReadonlyMap<string, string> = new Map([
  ['EMFILE', "file descriptors (the gateway process's limit, RLIMIT_NOFILE)"],
  ['ENFILE', "file descriptors (the system's open-file table is full)"],
  ['ENOBUFS', 'kernel buffer space'],
  ['ENOMEM', 'memory'],
  ['EADDRNOTAVAIL', 'local ports (the ephemeral port range is used up)'],
]);

/** The gateway could not open a connection for lack of its own resources: not the worker's fault. */
export class LocalResourceError extends Error {
  /** The errno, e.g. EMFILE. */
  readonly code: string;
  /** What ran out, in words ("file descriptors (…)"). */
  readonly resource: string;
  constructor(code: string, resource: string, message: string) {
    super(message);
    this.code = code;
    this.resource = resource;
  }
}

/** A failed connect as the error its handler gets: the gateway's own exhaustion, or the worker's. */
function connectFailure(err: NodeJS.ErrnoException, origin: string): Error {
  const code = err.code ?? 'ECONNECT';
  const resource = LOCAL_RESOURCES.get(code);
  if (resource !== undefined) return new LocalResourceError(code, resource, `could not open a connection to ${origin}: ${err.message}`);
  return new ConnectError(code, `could not connect to ${origin}: ${err.message}`);
}

/** The request never reached the worker: its queue was full, or it waited there past the limit. */
export class WorkerQueueError extends Error {
  readonly code: 'EQUEUEFULL' | 'EQUEUETIMEOUT';
  readonly reason: 'full' | 'timeout';
  /** How long it waited (0 when it could not wait at all). */
  readonly queuedMs: number;
  constructor(reason: 'full' | 'timeout', queuedMs: number, message: string) {
    super(message);
    this.reason = reason;
    this.code = reason === 'full' ? 'EQUEUEFULL' : 'EQUEUETIMEOUT';
    this.queuedMs = queuedMs;
  }
}

/** The worker broke HTTP (bad status line, bad framing, head too large). */
export class ProtocolError extends Error {
  readonly code = 'UPSTREAM_PROTOCOL';
}

export interface UpstreamOptions {
  /** Most connections open to this worker at once; further requests wait in FIFO order. */
  connections: number;
  /** Most requests waiting for a connection; past it dispatch fails the request (WorkerQueueError 'full'). */
  queueMax: number;
  /** Longest a request waits for a connection (WorkerQueueError 'timeout'). */
  queueTimeoutMs: number;
  connectTimeoutMs: number;
  /** Idle keep-alive connections are closed after this long (or the worker's own `keep-alive: timeout` less 1 s). */
  keepAliveTimeoutMs: number;
}

const MAX_HEAD_BYTES = 64 * 1024;
/** Where plain-TCP reads from workers land before being copied out (one process, one event loop: one buffer). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');
/** Response heads up to this size are remembered per connection (see parseHead). */
const HEAD_CACHE_BYTES = 1024;
/** A body at most this large is copied into the head's buffer: one write, one system call. */
const COPY_BODY_MAX = 64 * 1024;

/** A response head's bytes (the first `len` of `bytes`) and what parsing them gave. */
interface LastResponseHead {
  bytes: Buffer;
  len: number;
  status: number;
  contentType: string | undefined;
  length: number;
  chunked: boolean;
  keepAlive: boolean;
}

/** Response framing states. */
const enum S {
  Head,
  Length,
  Close,
  ChunkSize,
  ChunkExt,
  ChunkSizeLf,
  ChunkData,
  ChunkDataCr,
  ChunkDataLf,
  Trailer,
  Done,
}

/** One request's controller; also the link between the pool and the connection carrying it. */
class Exchange implements UpstreamController {
  aborted = false;
  conn: Connection | undefined;
  /** True while waiting in the pool's queue. */
  queued = false;
  /** performance.now() when it joined the queue (-1: never waited). */
  queuedAt = -1;
  ended = false;
  /** Sent again once already (a stale keep-alive connection). */
  resent = false;
  readonly handler: UpstreamHandler;
  prefix: Buffer | undefined;
  body: Buffer | undefined;
  private readonly pool: UpstreamPool;

  constructor(pool: UpstreamPool, handler: UpstreamHandler) {
    this.pool = pool;
    this.handler = handler;
  }

  abort(reason: Error): void {
    if (this.aborted || this.ended) return;
    this.aborted = true;
    const c = this.conn;
    this.conn = undefined;
    if (c !== undefined) c.drop();
    else if (this.queued) this.pool.unqueue(this);
    this.ended = true;
    this.handler.onResponseError(this, reason);
  }

  pause(): void {
    this.conn?.socket.pause();
  }

  resume(): void {
    this.conn?.socket.resume();
  }
}

/** One keep-alive connection; carries one exchange at a time. */
class Connection {
  readonly socket: net.Socket;
  private readonly pool: UpstreamPool;
  ex: Exchange | undefined;
  /** Requests this connection has carried (a reused connection may have been closed by the worker). */
  uses = 0;
  connected = false;
  idleSince = 0;
  idleLimitMs: number;
  private connectTimer: NodeJS.Timeout | undefined;
  private state = S.Head;
  private head: Buffer | undefined;
  private remaining = 0;
  private chunkSize = 0;
  private sizeDigits = 0;
  private keepAlive = true;
  private gotBytes = false;
  private trailerLine = 0;
  private dead = false;
  /** The last `keep-alive` header value seen (idleLimitMs follows from it). */
  private keepAliveHint = '';
  /** The last response head that parsed cleanly (up to HEAD_CACHE_BYTES) and what it said. */
  private last: LastResponseHead | undefined;

  constructor(pool: UpstreamPool) {
    this.pool = pool;
    this.idleLimitMs = pool.opts.keepAliveTimeoutMs;
    const o = pool.target;
    if (o.tls) {
      this.socket = tls.connect({ host: o.host, port: o.port, servername: net.isIP(o.host) === 0 ? o.host : undefined, ALPNProtocols: ['http/1.1'] });
      } else {
      // reads land in one shared buffer and come straight here, past the stream machinery (a read
      // per token on paced streams); handlers get views of it, valid until the next read (they copy
      // what they keep: the client frame, the SSE meter's text, a buffered answer)
      this.socket = net.connect({
        host: o.host,
        port: o.port,
        onread: {
          buffer: READ_BUFFER,
          callback: (n: number): boolean => {
            this.onData(n === READ_BUFFER.length ? READ_BUFFER : READ_BUFFER.subarray(0, n));
            return true;
          },
        },
      });
    }
    this.socket.setNoDelay(true);
    this.connectTimer = setTimeout(() => this.fail(new ConnectError('ECONNECT_TIMEOUT', `connect to ${pool.origin} timed out after ${pool.opts.connectTimeoutMs} ms`)), pool.opts.connectTimeoutMs);
    this.socket.once(o.tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
      this.connected = true;
    });
    this.socket.on('data', (d: Buffer) => this.onData(d));
    this.socket.on('error', (err: NodeJS.ErrnoException) => {
      this.fail(this.connected ? err : connectFailure(err, pool.origin));
    });
    this.socket.on('close', () => this.onClose());
    this.socket.on('end', () => this.onEnd());
  }

  /** Send a request (the socket may still be connecting: Node queues the write). */
  send(ex: Exchange): void {
    const prefix = ex.prefix as Buffer;
    const body = ex.body as Buffer;
    this.ex = ex;
    ex.conn = this;
    this.uses++;
    this.state = S.Head;
    this.head = undefined;
    this.gotBytes = false;
    this.keepAlive = true;
    const s = this.socket;
    const bl = body.length;
    if (bl <= COPY_BODY_MAX) {
      // head, Content-Length value, blank line and body in one frame, one write
      const len = String(bl);
      const total = prefix.length + len.length + 4 + bl;
      const out = frameFor(total);
      out.set(prefix, 0);
      out.set(body, putLatin1(out, '\r\n\r\n', putLatin1(out, len, prefix.length)));
      writeFrame(s, out, total);
    } else {
      s.cork();
      s.write(prefix);
      s.write(`${bl}\r\n\r\n`, 'latin1');
      s.write(body);
      s.uncork();
    }
    // a resend (see fail) is the same request: its time started with the first send
    if (!ex.resent) {
      const q = ex.queuedAt;
      ex.handler.onRequestSent(q < 0 ? 0 : performance.now() - q);
    }
  }

  /** The exchange gave up on this connection: it cannot be reused. */
  drop(): void {
    this.ex = undefined;
    this.destroy();
  }

  destroy(): void {
    if (this.dead) return;
    this.dead = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.socket.destroy();
    this.pool.forget(this);
  }

  private fail(err: Error): void {
    const ex = this.ex;
    this.ex = undefined;
    const reused = this.uses > 1;
    const early = !this.gotBytes;
    this.destroy();
    if (ex === undefined || ex.ended) return;
    ex.conn = undefined;
    // a keep-alive connection the worker closed while idle: the request never reached it, so it
    // is sent again on a fresh connection (once) instead of failing a healthy worker
    if (reused && early && !ex.resent && !(err instanceof ProtocolError)) {
      this.pool.redispatch(ex);
      return;
    }
    ex.ended = true;
    ex.handler.onResponseError(ex, err);
  }

  private onEnd(): void {
    if (this.state === S.Close) {
      this.finish();
      return;
    }
    if (this.ex !== undefined) {
      const e: NodeJS.ErrnoException = new Error(this.gotBytes ? 'worker closed the connection mid-response' : 'worker closed the connection before answering');
      e.code = 'ECONNRESET';
      this.fail(e);
    } else this.destroy();
  }

  private onClose(): void {
    if (this.ex !== undefined && !this.dead) {
      const e: NodeJS.ErrnoException = new Error('connection to the worker closed');
      e.code = 'ECONNRESET';
      this.fail(e);
      return;
    }
    this.destroy();
  }

  private onData(d: Buffer): void {
    const ex = this.ex;
    if (ex === undefined) {
      // bytes with no request outstanding: the worker is confused; do not reuse the connection
      this.destroy();
      return;
    }
    this.gotBytes = true;
    let pos = 0;
    if (this.state === S.Head) {
      let buf = d;
      if (this.head !== undefined) {
        buf = Buffer.concat([this.head, d]);
        this.head = undefined;
      }
      pos = this.parseHead(buf, ex);
      if (pos < 0) return;
      d = buf;
      if (this.ex !== ex || ex.ended) return;
    }
    switch (this.state) {
      case S.Length: {
        const n = d.length - pos;
        if (n <= 0) return;
        if (n < this.remaining) {
          this.remaining -= n;
          ex.handler.onResponseData(ex, pos === 0 ? d : d.subarray(pos));
          return;
        }
        // the rest of the body (more than that: the worker broke framing)
        if (n > this.remaining) this.keepAlive = false;
        const tail = pos === 0 && n === this.remaining ? d : d.subarray(pos, pos + this.remaining);
        this.remaining = 0;
        this.finish(tail);
        return;
      }
      case S.Close:
        if (pos < d.length) ex.handler.onResponseData(ex, pos === 0 ? d : d.subarray(pos));
        return;
      case S.Done:
        return;
      default:
        this.chunked(d, pos, ex);
    }
  }

  /** Parse the status line and headers; returns the body's offset in `buf`, or -1 (incomplete or failed). */
  private parseHead(buf: Buffer, ex: Exchange): number {
    const end = buf.indexOf(CRLF2);
    if (end === -1) {
      if (buf.length > MAX_HEAD_BYTES) this.fail(new ProtocolError(`response head larger than ${MAX_HEAD_BYTES} bytes`));
      else this.head = Buffer.from(buf); // the read buffer is reused by the next read
      return -1;
    }
    let status: number;
    let contentType: string | undefined;
    let length = -1;
    let chunked = false;
    parse: {
      // the same bytes as the last head that parsed cleanly: the same answer (a worker sends one head
      // for every stream, the Date changing once a second)
      const last = this.last;
      if (last !== undefined && last.len === end && last.bytes.compare(buf, 0, end, 0, end) === 0) {
        ({ status, contentType, length, chunked } = last);
        this.keepAlive = last.keepAlive;
        break parse;
      }
      const h = buf.toString('latin1', 0, end);
      // HTTP/1.x SP 3DIGIT
      if (h.charCodeAt(0) !== 72 || !h.startsWith('HTTP/1.') || h.charCodeAt(8) !== 32) {
        this.fail(new ProtocolError(`bad status line ${JSON.stringify(h.slice(0, 40))}`));
        return -1;
      }
      status = digit(h, 9) * 100 + digit(h, 10) * 10 + digit(h, 11);
      if (!(status >= 100 && status <= 599) || (h.length > 12 && h.charCodeAt(12) !== 32)) {
        this.fail(new ProtocolError(`bad status line ${JSON.stringify(h.slice(0, 40))}`));
        return -1;
      }
      if (status < 200) {
        // 100 Continue and friends: skip and read the real answer
        if (status === 101) {
          this.fail(new ProtocolError('worker switched protocols'));
          return -1;
        }
        const rest = buf.subarray(end + 4);
        if (rest.length === 0) return -1;
        const at = this.parseHead(rest, ex);
        return at < 0 ? at : end + 4 + at;
      }
      if (h.charCodeAt(7) === 48 /* HTTP/1.0 */) this.keepAlive = false;
      let lineStart = h.indexOf('\r\n') + 2;
      while (lineStart > 1 && lineStart < h.length) {
        let lineEnd = h.indexOf('\r\n', lineStart);
        if (lineEnd === -1) lineEnd = h.length;
        const colon = h.indexOf(':', lineStart);
        if (colon !== -1 && colon < lineEnd) {
          const nameLen = colon - lineStart;
          // only the headers the gateway acts on; compared case-insensitively by length first, in place
          const name = nameLen === 12 ? 'content-type' : nameLen === 14 ? 'content-length' : nameLen === 17 ? 'transfer-encoding' : nameLen === 10 ? (h.charCodeAt(lineStart) | 32) === 99 ? 'connection' : 'keep-alive' : '';
          if (name !== '' && nameIs(h, lineStart, name)) {
            // the value without its surrounding whitespace, compared in place where it can be
            let vs = colon + 1;
            let ve = lineEnd;
            while (vs < ve && (h.charCodeAt(vs) === 32 || h.charCodeAt(vs) === 9)) vs++;
            while (ve > vs && (h.charCodeAt(ve - 1) === 32 || h.charCodeAt(ve - 1) === 9)) ve--;
            if (name === 'content-type') {
              const value = h.slice(vs, ve);
              // it is sent on to the client: a control character would split that response's head
              if (hasCtl(value)) {
                this.fail(new ProtocolError(`control character in content-type ${JSON.stringify(value)}`));
                return -1;
              }
              contentType = value;
            } else if (name === 'content-length') {
              const value = h.slice(vs, ve);
              const n = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
              if (n !== n || (length !== -1 && length !== n)) {
                this.fail(new ProtocolError(`bad content-length ${JSON.stringify(value)}`));
                return -1;
              }
              length = n;
            } else if (name === 'transfer-encoding') {
              if (ve - vs !== 7 || !nameIs(h, vs, 'chunked')) {
                this.fail(new ProtocolError(`unsupported transfer-encoding ${JSON.stringify(h.slice(vs, ve))}`));
                return -1;
              }
              chunked = true;
            } else if (name === 'connection') {
              if (ve - vs === 10 && nameIs(h, vs, 'keep-alive')) this.keepAlive = true;
              else {
                const v = h.slice(vs, ve).toLowerCase();
                if (v.includes('close')) this.keepAlive = false;
                else if (v.includes('keep-alive')) this.keepAlive = true;
              }
            } else {
              // keep-alive (the same value every time from a given worker: parsed once)
              const hint = this.keepAliveHint;
              if (ve - vs !== hint.length || !h.startsWith(hint, vs)) {
                const value = h.slice(vs, ve);
                this.keepAliveHint = value;
                const m = /timeout\s*=\s*(\d+)/i.exec(value);
                if (m) this.idleLimitMs = Math.max(0, Math.min(this.pool.opts.keepAliveTimeoutMs, Number(m[1]) * 1000 - 1000));
              }
            }
          }
        }
        lineStart = lineEnd + 2;
      }
      if (chunked && length !== -1) {
        this.fail(new ProtocolError('response has both content-length and chunked encoding'));
        return -1;
      }
      if (end <= HEAD_CACHE_BYTES) {
        const bytes = this.last?.bytes ?? Buffer.allocUnsafe(HEAD_CACHE_BYTES);
        buf.copy(bytes, 0, 0, end);
        this.last = { bytes, len: end, status, contentType, length, chunked, keepAlive: this.keepAlive };
      }
    }
    ex.handler.onResponseStart(ex, status, contentType);
    if (this.ex !== ex || ex.ended) return -1;
    if (status === 204 || status === 304) {
      this.finish();
      return -1;
    }
    if (chunked) {
      this.state = S.ChunkSize;
      this.chunkSize = 0;
      this.sizeDigits = 0;
    } else if (length >= 0) {
      this.state = S.Length;
      this.remaining = length;
      if (length === 0) {
        this.finish();
        return -1;
      }
    } else {
      this.state = S.Close;
      this.keepAlive = false;
    }
    return end + 4;
  }

  /** Decode chunked framing from `d` at `pos`; the read's data goes to the handler in one call. */
  private chunked(d: Buffer, pos: number, ex: Exchange): void {
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    const n = d.length;
    while (pos < n) {
      switch (this.state) {
        case S.ChunkSize: {
          const c = d[pos] as number;
          const v = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (v >= 0) {
            if (++this.sizeDigits > 12) return this.badChunk(ex, 'chunk size too long');
            this.chunkSize = this.chunkSize * 16 + v;
            pos++;
          } else if (this.sizeDigits === 0) {
            return this.badChunk(ex, 'chunk size missing');
          } else if (c === 13) {
            this.state = S.ChunkSizeLf;
            pos++;
          } else if (c === 59 /* ; */ || c === 32 || c === 9) {
            this.state = S.ChunkExt;
            pos++;
          } else return this.badChunk(ex, 'bad character in chunk size');
          break;
        }
        case S.ChunkExt: {
          const cr = d.indexOf(13, pos);
          if (cr === -1) pos = n;
          else {
            pos = cr + 1;
            this.state = S.ChunkSizeLf;
          }
          break;
        }
        case S.ChunkSizeLf:
          if (d[pos] !== 10) return this.badChunk(ex, 'chunk size line not ended by CRLF');
          pos++;
          if (this.chunkSize === 0) {
            this.state = S.Trailer;
            this.trailerLine = 0;
          } else {
            this.state = S.ChunkData;
            this.remaining = this.chunkSize;
          }
          break;
        case S.ChunkData: {
          const take = Math.min(this.remaining, n - pos);
          const part = take === n && pos === 0 ? d : d.subarray(pos, pos + take);
          if (first === undefined) first = part;
          else (more ??= [first]).push(part);
          pos += take;
          this.remaining -= take;
          if (this.remaining === 0) this.state = S.ChunkDataCr;
          break;
        }
        case S.ChunkDataCr:
          if (d[pos] !== 13) return this.badChunk(ex, 'chunk data not followed by CRLF');
          pos++;
          this.state = S.ChunkDataLf;
          break;
        case S.ChunkDataLf:
          if (d[pos] !== 10) return this.badChunk(ex, 'chunk data not followed by CRLF');
          pos++;
          this.state = S.ChunkSize;
          this.chunkSize = 0;
          this.sizeDigits = 0;
          break;
        case S.Trailer: {
          // trailer lines until an empty one; `trailerLine` counts bytes of the current line
          const c = d[pos] as number;
          pos++;
          if (c === 10) {
            if (this.trailerLine <= 1) {
              this.state = S.Done;
              if (pos < n) this.keepAlive = false; // bytes after the response: do not trust the connection
            }
            this.trailerLine = 0;
          } else if (++this.trailerLine > MAX_HEAD_BYTES) return this.badChunk(ex, 'trailers too large');
          break;
        }
        default:
          pos = n;
      }
    }
    const data = first === undefined ? undefined : more === undefined ? first : Buffer.concat(more);
    if (this.state === S.Done) {
      this.finish(data);
      return;
    }
    if (data !== undefined) ex.handler.onResponseData(ex, data);
  }

  private badChunk(ex: Exchange, what: string): void {
    if (this.ex === ex) this.fail(new ProtocolError(`bad chunked encoding from the worker: ${what}`));
  }

  /** The response is complete: hand the connection back (or close it) and tell the handler. */
  private finish(tail?: Buffer): void {
    const ex = this.ex as Exchange;
    this.ex = undefined;
    ex.conn = undefined;
    ex.ended = true;
    this.state = S.Head;
    // a handler that paused for a slow client and never resumed (its response ended meanwhile)
    // must not leave the next request on this connection unread
    if (this.socket.isPaused()) this.socket.resume();
    if (this.keepAlive && !this.dead) this.pool.release(this);
    else this.destroy();
    ex.handler.onResponseEnd(tail);
  }
}

/** A control character (other than tab) or DEL in a header value. */
function hasCtl(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if ((c < 32 && c !== 9) || c === 127) return true;
  }
  return false;
}

/** The decimal digit at `i`, or NaN. */
function digit(h: string, i: number): number {
  const d = h.charCodeAt(i) - 48;
  return d >= 0 && d <= 9 ? d : NaN;
}

/** The header name at `start` in `h` is `lower` (given in lower case; ASCII letters and '-' compared without case). */
function nameIs(h: string, start: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const c = h.charCodeAt(start + i);
    const l = lower.charCodeAt(i);
    if (c !== l && !(l >= 97 && l <= 122 && c === l - 32)) return false;
  }
  return true;
}

/** Requests to one worker over at most `connections` keep-alive connections. */
export class UpstreamPool {
  readonly origin: string;
  readonly opts: UpstreamOptions;
  readonly target: { host: string; port: number; tls: boolean; hostHeader: string };
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private queue: Exchange[] = [];
  private qHead = 0;
  /** path → the request heads (JSON, event stream) up to the Content-Length value. */
  private readonly prefixes = new Map<string, [Buffer, Buffer]>();
  /** The worker URL's path, put before every request path (e.g. a router's /model-a). */
  readonly pathPrefix: string;
  private sweeper: NodeJS.Timeout | undefined;
  /** Set while requests wait: fires when the oldest one's wait reaches queueTimeoutMs (one timer per pool). */
  private queueTimer: NodeJS.Timeout | undefined;
  private closing: (() => void) | undefined;
  private closed = false;

  constructor(url: string, opts: UpstreamOptions) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`worker URL must be http(s), got ${url}`);
    const isTls = u.protocol === 'https:';
    this.origin = u.origin;
    this.pathPrefix = u.pathname.replace(/\/$/, '');
    this.opts = opts;
    this.target = {
      host: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port === '' ? (isTls ? 443 : 80) : Number(u.port),
      tls: isTls,
      hostHeader: u.host,
    };
  }

  private head(path: string, accept: string): Buffer {
    const target = this.pathPrefix + path;
    if (!/^\/[\x21-\x7e]*$/.test(target)) throw new Error(`bad request path ${JSON.stringify(target)}`);
    return Buffer.from(`POST ${target} HTTP/1.1\r\nhost: ${this.target.hostHeader}\r\ncontent-type: application/json\r\naccept: ${accept}\r\ncontent-length: `, 'latin1');
  }

  /** Connections open now (busy or idle). */
  get size(): number {
    return this.all.size;
  }

  /** Requests waiting for a connection now. */
  get queued(): number {
    return this.queue.length - this.qHead;
  }

  /**
   * POST `body` (JSON) to the worker's path prefix + `path`, accepting an event stream or JSON.
   * Never throws: failures reach the handler.
   */
  dispatch(path: string, stream: boolean, body: Buffer, handler: UpstreamHandler): UpstreamController {
    const ex = new Exchange(this, handler);
    handler.onRequestStart(ex);
    if (ex.aborted) return ex;
    if (this.closed) {
      ex.ended = true;
      handler.onResponseError(ex, new ConnectError('ECLOSED', `the pool for ${this.origin} is closed`));
      return ex;
    }
    let shapes = this.prefixes.get(path);
    if (shapes === undefined) {
      shapes = [this.head(path, 'application/json'), this.head(path, 'text/event-stream')];
      if (this.prefixes.size < 64) this.prefixes.set(path, shapes);
    }
    const prefix = shapes[stream ? 1 : 0];
    ex.prefix = prefix;
    ex.body = body;
    this.run(ex);
    return ex;
  }

  private run(ex: Exchange): void {
    const c = this.idle.pop();
    if (c !== undefined) {
      c.send(ex);
      return;
    }
    if (this.all.size < this.opts.connections) {
      this.open(ex)?.send(ex);
      return;
    }
    if (this.queue.length - this.qHead >= this.opts.queueMax) {
      ex.ended = true;
      ex.handler.onResponseError(ex, new WorkerQueueError('full', 0, `all ${this.opts.connections} connections to ${this.origin} are busy and ${this.opts.queueMax} requests wait for one`));
      return;
    }
    ex.queued = true;
    ex.queuedAt = performance.now();
    this.queue.push(ex);
    if (this.queueTimer === undefined) this.armQueueTimer(this.opts.queueTimeoutMs);
  }

  /** A new connection for `ex`; undefined (and `ex` failed) when even creating the socket threw. */
  private open(ex: Exchange): Connection | undefined {
    let c: Connection;
    try {
      c = new Connection(this);
    } catch (err) {
      // net.connect may throw instead of emitting 'error' (out of descriptors or memory): the handler
      // hears of it either way, and dispatch never throws
      ex.ended = true;
      ex.handler.onResponseError(ex, connectFailure(err as NodeJS.ErrnoException, this.origin));
      return undefined;
    }
    this.all.add(c);
    this.ensureSweeper();
    return c;
  }

  /** A request whose reused connection turned out closed by the worker: once more, on a fresh connection. */
  redispatch(ex: Exchange): void {
    ex.resent = true;
    this.open(ex)?.send(ex);
  }

  private armQueueTimer(ms: number): void {
    this.queueTimer = setTimeout(this.expireQueue, ms);
    // the waiting requests' own sockets keep the process alive, not this
    this.queueTimer.unref();
  }

  /** Fail the requests that waited queueTimeoutMs (the oldest are first: one limit, FIFO), then wait for the next. */
  private readonly expireQueue = (): void => {
    this.queueTimer = undefined;
    const limit = this.opts.queueTimeoutMs;
    const now = performance.now();
    while (this.qHead < this.queue.length) {
      const ex = this.queue[this.qHead] as Exchange;
      const waited = now - ex.queuedAt;
      // timers run on the loop's millisecond clock: less than a millisecond early is on time
      if (limit - waited >= 1) {
        // a handler below may have queued a request (and armed the timer for its later limit)
        if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
        this.armQueueTimer(Math.ceil(limit - waited));
        return;
      }
      this.dequeue();
      ex.ended = true;
      ex.handler.onResponseError(ex, new WorkerQueueError('timeout', waited, `waited ${Math.round(waited)} ms for one of the ${this.opts.connections} connections to ${this.origin}`));
    }
  };

  /** The next waiting request, if any. */
  private dequeue(): Exchange | undefined {
    if (this.qHead >= this.queue.length) return undefined;
    const ex = this.queue[this.qHead] as Exchange;
    this.queue[this.qHead] = undefined as unknown as Exchange;
    this.qHead++;
    if (this.qHead === this.queue.length) {
      this.queue = [];
      this.qHead = 0;
    } else if (this.qHead > 1024 && this.qHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qHead);
      this.qHead = 0;
    }
    ex.queued = false;
    return ex;
  }

  unqueue(ex: Exchange): void {
    ex.queued = false;
    for (let i = this.qHead; i < this.queue.length; i++) {
      if (this.queue[i] === ex) {
        this.queue.splice(i, 1);
        return;
      }
    }
  }

  /** A connection finished a response and can carry another. */
  release(c: Connection): void {
    const next = this.dequeue();
    if (next !== undefined) {
      c.send(next);
      return;
    }
    if (this.closed) {
      c.destroy();
      return;
    }
    c.idleSince = performance.now();
    this.idle.push(c);
  }

  forget(c: Connection): void {
    this.all.delete(c);
    const i = this.idle.indexOf(c);
    if (i !== -1) this.idle.splice(i, 1);
    // a waiting request can use the freed slot
    if (!this.closed && this.all.size < this.opts.connections) {
      const next = this.dequeue();
      if (next !== undefined) this.run(next);
    }
    if (this.closing !== undefined && this.all.size === 0) this.closing();
  }

  /** Close idle connections past their limit; one timer per pool, never per request. */
  private ensureSweeper(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (let i = this.idle.length - 1; i >= 0; i--) {
        const c = this.idle[i] as Connection;
        if (now - c.idleSince >= c.idleLimitMs) c.destroy();
      }
      if (this.all.size === 0 && this.sweeper !== undefined) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, 250);
    this.sweeper.unref();
  }

  /** Stop taking requests; resolves when in-flight ones have finished and every connection is closed. */
  close(): Promise<void> {
    this.closed = true;
    for (const c of [...this.idle]) c.destroy();
    if (this.all.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.closing = resolve;
    });
  }

  /** Close everything now; requests in flight fail. */
  destroy(): void {
    this.closed = true;
    const waiting = this.queue.slice(this.qHead);
    this.queue = [];
    this.qHead = 0;
    for (const ex of waiting) {
      ex.queued = false;
      ex.abort(new ConnectError('ECLOSED', `the pool for ${this.origin} was closed`));
    }
    for (const c of [...this.all]) {
      const ex = c.ex;
      if (ex !== undefined) ex.abort(new ConnectError('ECLOSED', `the pool for ${this.origin} was closed`));
      else c.destroy();
    }
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    if (this.queueTimer !== undefined) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
  }
}
