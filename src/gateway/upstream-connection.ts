// One keep-alive connection to a worker and the request it carries: the request written in one frame, the response head read (cached when it repeats), the body deframed (Content-Length, chunked or close) into the handler.
import net from 'node:net';
import tls from 'node:tls';
import { frameFor, putLatin1, writeFrame } from './frame.js';
import { ProtocolError, parseResponseHead } from './http1/response-head.js';
import type { ResponseHead } from './http1/response-head.js';
import { ConnectError, connectFailure } from './upstream-types.js';
import type { PoolOf } from './upstream-types.js';
import type { Exchange } from './upstream-exchange.js';
import { withoutStack } from '../errors.js';

/** What a connection and an exchange need of their pool (upstream-types.ts). */
export type ConnectionPool = PoolOf<Connection, Exchange>;

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

/** One keep-alive connection; carries one exchange at a time. */
export class Connection {
  readonly socket: net.Socket;
  /** The pool whose request it carries, or carried last (idle connections are shared by an origin's pools). */
  pool: ConnectionPool;
  ex: Exchange | undefined;
  /** Requests this connection has carried (a reused connection may have been closed by the worker). */
  uses = 0;
  connected = false;
  /** When it last went idle (0: it never waited in an idle list: opened for the request it carries). */
  idleSince = 0;
  /** Closed by its origin's sweep, idle at its keep-alive limit (not lost). */
  swept = false;
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
  /** The last `keep-alive` header value seen (its timeout is told to the pool). */
  private keepAliveHint = '';
  /** The last response head that parsed cleanly (up to HEAD_CACHE_BYTES) and what it said. */
  private last: LastResponseHead | undefined;

  constructor(pool: ConnectionPool) {
    this.pool = pool;
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
    this.armConnectTimer();
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

  /** The connect must complete within connectTimeoutMs (from now). */
  private armConnectTimer(): void {
    if (this.connectTimer !== undefined) clearTimeout(this.connectTimer);
    const { origin, opts } = this.pool;
    this.connectTimer = setTimeout(
      () => this.fail(new ConnectError('ECONNECT_TIMEOUT', `connect to ${origin} timed out after ${opts.connectTimeoutMs} ms`)),
      opts.connectTimeoutMs,
    );
  }

  /** Send a request (the socket may still be connecting: Node queues the write). */
  send(ex: Exchange): void {
    const prefix = ex.prefix as Buffer;
    const body = ex.body as Buffer;
    this.ex = ex;
    ex.conn = this;
    this.uses++;
    // taken from the idle list still connecting (a spare): the request gets the whole connect time
    if (!this.connected && this.idleSince > 0) this.armConnectTimer();
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
    // it waited idle, connected (a spare too): the worker may have closed it before the request came
    const reused = this.connected && this.idleSince > 0;
    const early = !this.gotBytes;
    if (ex === undefined || ex.ended) {
      this.destroy();
      return;
    }
    ex.conn = undefined;
    // a keep-alive connection the worker closed while idle: the request never reached it, so it
    // is sent again on a fresh connection (once) instead of failing a healthy worker — before this
    // one is forgotten, so that its request slot is not handed to a waiting request meanwhile
    if (reused && early && !ex.resent && !(err instanceof ProtocolError)) {
      this.pool.redispatch(ex);
      this.destroy();
      return;
    }
    this.destroy();
    ex.ended = true;
    ex.handler.onResponseError(ex, err);
  }

  private onEnd(): void {
    if (this.state === S.Close) {
      this.finish();
      return;
    }
    if (this.ex !== undefined) {
      const msg = this.gotBytes ? 'worker closed the connection mid-response' : 'worker closed the connection before answering';
      this.fail(resetError(msg));
    } else this.destroy();
  }

  private onClose(): void {
    if (this.ex !== undefined && !this.dead) {
      this.fail(resetError('connection to the worker closed'));
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
      let r: ResponseHead;
      try {
        r = parseResponseHead(buf.toString('latin1', 0, end));
      } catch (err) {
        this.fail(err as ProtocolError);
        return -1;
      }
      status = r.status;
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
      ({ contentType, length, chunked } = r);
      this.keepAlive = r.keepAlive;
      // a worker sends the same keep-alive hint every time: its timeout is parsed once
      if (r.keepAliveHint !== undefined && r.keepAliveHint !== this.keepAliveHint) {
        this.keepAliveHint = r.keepAliveHint;
        const m = /timeout\s*=\s*(\d+)/i.exec(r.keepAliveHint);
        if (m) this.pool.keepAliveHeard(Math.max(0, Math.min(this.pool.opts.keepAliveTimeoutMs, Number(m[1]) * 1000 - 1000)));
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

/** The worker closed the connection under a request: ECONNRESET, without a stack (withoutStack). */
function resetError(message: string): NodeJS.ErrnoException {
  const e: NodeJS.ErrnoException = withoutStack(() => new Error(message));
  e.code = 'ECONNRESET';
  return e;
}
