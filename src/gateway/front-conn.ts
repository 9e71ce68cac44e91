// One client connection of the data plane's HTTP/1.1 server: its states (head, body, handling, flushing), keep-alive, pipelining, its one
// timer (idle, request, send, linger), and what bounds it: read-ahead, the time its unread answers may wait, probe-only requests past the
// ceiling. Parsing and writing live in http1/; the listener (front.ts) admits it and hands it its first bytes.
import type { Socket } from 'node:net';
import { CATALOGUE } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { BodyReader, bodyLength } from './http1/request-body.js';
import { HeadReader, NO_HEAD } from './http1/request-head.js';
import type { RequestHead } from './http1/request-head.js';
import { Res, closingResponse, writePiece } from './http1/response-writer.js';
import type { ResponseSink } from './http1/response-writer.js';
import type { FrontConfig } from './http1/server-options.js';
import type { FrontRequest } from './http1/server-options.js';
import { ParseError } from './http1/syntax.js';
import { requestRefusal } from './limits.js';

const EMPTY = Buffer.alloc(0);
const CONTINUE = Buffer.from('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
/** How long a connection we are closing may wait for the client's FIN once our side is written. */
export const LINGER_MS = 5000;
/**
 * Pipelined requests answered for one connection per turn of the event loop: past it the next one
 * waits for setImmediate, so a burst of thousands of pipelined requests on one connection cannot
 * keep every other client waiting (answers that resolve in promises would otherwise chain on
 * nextTick forever).
 */
const PIPELINE_TURN = 16;

// connection states: reading a request (head, body), handling one, its answer waiting for the client, gone
const S_HEAD = 0;
const S_BODY = 1;
const S_BUSY = 2;
/** The answer is complete but the client has not taken it yet: nothing more is parsed until it drains. */
const S_FLUSH = 3;
const S_DEAD = 4;

// what the connection's one timer is counting
const T_NONE = 0;
/** Between requests (or before the first): close quietly. */
const T_IDLE = 1;
/** A request has started arriving: 408 when it has not finished. */
const T_REQUEST = 2;
/** Our side is closed and written: destroy if the client does not close its side. */
const T_LINGER = 3;
/** Written bytes wait for the client to read them: destroy when it does not (send timeout). */
const T_SEND = 4;

/** One client connection: its parser state, the response in progress and its one timer. */
export class Conn implements ResponseSink {
  readonly socket: Socket;
  readonly cfg: FrontConfig;
  readonly addr: string;
  private state = S_HEAD;
  /** Received and not yet consumed: `buf` from `off` on. */
  private buf: Buffer | null = null;
  /** Consumed bytes at the start of `buf` (the chunked decoder moves it instead of slicing per chunk). */
  private off = 0;
  /** What arrived while a request was being handled. */
  private pend: Buffer[] | null = null;
  private pendLen = 0;
  private paused = false;
  private parsing = false;
  private tickQueued = false;
  /** Requests dispatched since the connection last got a turn of its own (I/O or setImmediate). */
  private served = 0;
  // the request being read
  private head: RequestHead = NO_HEAD;
  private readonly heads: HeadReader;
  private readonly body: BodyReader;
  private res: Res | null = null;
  private timer: NodeJS.Timeout | null = null;
  private timerKind = T_NONE;
  private timerMs = 0;
  /** The send timeout closed this connection. */
  sendTimedOut = false;
  /** Admitted past the ceiling: one request, to a probe path only. */
  private readonly probeOnly: boolean;

  readonly keepAliveLines: string;

  /** `lead`: the connection's first bytes, read by the listener to tell its protocol (null: none read yet). */
  constructor(socket: Socket, cfg: FrontConfig, addr: string, probeOnly: boolean, lead: Buffer | null) {
    this.socket = socket;
    this.cfg = cfg;
    this.keepAliveLines = cfg.keepAliveLines;
    this.heads = new HeadReader(cfg.maxHeader);
    this.body = new BodyReader(cfg.maxBody, cfg.maxHeader);
    this.addr = addr;
    this.probeOnly = probeOnly;
    socket.setNoDelay(true);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onSocketClose);
    socket.on('drain', this.onDrain);
    socket.on('finish', this.onFinish);
    if (lead !== null) this.onData(lead);
    // a connection that never sends anything gets the request timeout, closed quietly
    else this.arm(T_IDLE, cfg.requestMs > 0 ? cfg.requestMs : cfg.keepAliveMs);
  }

  // ---- socket events ---------------------------------------------------------------------------

  private readonly onData = (chunk: Buffer): void => {
    const st = this.state;
    if (st === S_DEAD) return;
    if (st === S_BUSY || st === S_FLUSH) {
      (this.pend ??= []).push(chunk);
      this.pendLen += chunk.length;
      if (!this.paused && this.pendLen > this.cfg.maxBuffered) {
        this.paused = true;
        this.socket.pause();
      }
      return;
    }
    this.served = 0;
    const buf = this.buf;
    if (buf === null) this.buf = chunk;
    else {
      const off = this.off;
      this.buf = Buffer.concat([off === 0 ? buf : buf.subarray(off), chunk], buf.length - off + chunk.length);
      this.off = 0;
    }
    this.parse();
  };

  /** The client shut down its sending side: like node:http, that is the client leaving (an answer in progress is abandoned: onClose tells the handler). */
  private readonly onEnd = (): void => {
    const st = this.state;
    if (st === S_BUSY) this.socket.destroy();
    else if (st !== S_DEAD) this.closeQuietly(); // nothing complete is left to answer (a finished one still flushes)
  };

  private readonly onError = (): void => {
    // ECONNRESET, EPIPE…: 'close' follows
  };

  private readonly onSocketClose = (): void => {
    this.state = S_DEAD;
    this.buf = null;
    this.pend = null;
    this.body.drop();
    this.timerKind = T_NONE;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const res = this.res;
    if (res !== null) {
      this.res = null;
      res.connClosed();
    }
  };

  private readonly onDrain = (): void => {
    if (this.timerKind === T_SEND) this.timerKind = T_NONE;
    if (this.state === S_FLUSH) {
      this.next();
      return;
    }
    const res = this.res;
    if (res !== null) res.drained();
  };

  private readonly onFinish = (): void => {
    if (!this.socket.destroyed) this.arm(T_LINGER, LINGER_MS);
  };

  private readonly onTimer = (): void => {
    const kind = this.timerKind;
    this.timerKind = T_NONE;
    if (kind === T_IDLE || kind === T_LINGER) this.socket.destroy();
    else if (kind === T_REQUEST && this.state < S_BUSY) this.fail('request_timeout', `the request did not arrive completely within ${this.cfg.requestMs} ms`);
    else if (kind === T_SEND) {
      this.sendTimedOut = true;
      this.cfg.events.sendTimeout?.();
      this.socket.destroy();
    }
  };

  private readonly onTick = (): void => {
    this.tickQueued = false;
    if (this.state < S_BUSY && this.buf !== null) this.parse();
  };

  /** A turn of its own after PIPELINE_TURN requests: reading resumes and parsing goes on. */
  private readonly onTurn = (): void => {
    this.tickQueued = false;
    this.served = 0;
    if (this.state >= S_BUSY) return;
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    if (this.buf !== null) this.parse();
  };

  /** This connection had its share of the turn: go on in a later one (reading paused past the read-ahead). */
  private yieldTurn(): void {
    const buf = this.buf as Buffer;
    if (!this.paused && buf.length - this.off > this.cfg.maxBuffered) {
      this.paused = true;
      this.socket.pause();
    }
    if (this.tickQueued) return;
    this.tickQueued = true;
    setImmediate(this.onTurn);
  }

  // ---- timer -----------------------------------------------------------------------------------

  /** Point the connection's one timer at `kind`, `ms` from now (refreshed, re-created only when the duration changes). */
  private arm(kind: number, ms: number): void {
    if (ms <= 0) {
      this.timerKind = T_NONE;
      return;
    }
    this.timerKind = kind;
    const t = this.timer;
    if (t !== null && this.timerMs === ms) {
      t.refresh();
      return;
    }
    if (t !== null) clearTimeout(t);
    this.timerMs = ms;
    const nt = setTimeout(this.onTimer, ms);
    nt.unref();
    this.timer = nt;
  }

  /** A write left bytes the client has not taken: the send timeout runs until they drain ('drain' stops it). */
  waitSend(): void {
    if (this.timerKind !== T_SEND) this.arm(T_SEND, this.cfg.sendMs);
  }

  // ---- parsing ---------------------------------------------------------------------------------

  /** Move past `to` in `buf`: what is left stays where it is (no slice per chunk). */
  private consume(buf: Buffer, to: number): void {
    if (to >= buf.length) {
      this.buf = null;
      this.off = 0;
    } else this.off = to;
  }

  private parse(): void {
    this.parsing = true;
    try {
      for (;;) {
        const st = this.state;
        let buf = this.buf;
        if (st >= S_BUSY || buf === null) break;
        let progressed: boolean;
        switch (st) {
          case S_HEAD:
            if (this.served >= PIPELINE_TURN) {
              this.yieldTurn();
              progressed = false;
              break;
            }
            if (this.off !== 0) {
              buf = buf.subarray(this.off);
              this.buf = buf;
              this.off = 0;
            }
            progressed = this.parseHead(buf);
            break;
          case S_BODY: {
            const body = this.body;
            this.consume(buf, body.feed(buf, this.off));
            progressed = body.done;
            if (progressed) this.dispatch(body.take());
            break;
          }
          default:
            progressed = false;
        }
        if (!progressed) break;
      }
    } catch (err) {
      if (err instanceof ParseError) this.fail(err.code, err.message);
      else this.socket.destroy();
    } finally {
      this.parsing = false;
    }
    const st = this.state;
    if (st >= S_BUSY) return;
    if (st === S_HEAD && this.buf === null) {
      this.arm(T_IDLE, this.cfg.keepAliveMs);
    } else if (this.timerKind !== T_REQUEST) {
      // the request has started: its time counts from here, not refreshed by later bytes
      this.arm(T_REQUEST, this.cfg.requestMs);
    }
  }

  /** Parse a request head if it has all arrived; false when more bytes are needed. */
  private parseHead(buf: Buffer): boolean {
    const r = this.heads;
    const end = r.read(buf);
    if (end < 0) return false;
    this.head = r.head;
    return this.startBody(buf, end, r.te, r.cl, r.expectContinue);
  }

  /** The head ended just before `bodyStart`: frame the body (RFC 9112 §6.3) and dispatch the request once it is all here. */
  private startBody(buf: Buffer, bodyStart: number, te: string | null, cl: string | null, expectContinue: boolean): boolean {
    const n = bodyLength(this.head.v11, te, cl, this.cfg.maxBody);
    const len = buf.length;
    const have = len - bodyStart;
    this.off = 0;
    if (n === 0 || (n > 0 && have >= n)) {
      const end = bodyStart + n;
      this.buf = end < len ? buf.subarray(end) : null;
      this.dispatch(n === 0 ? EMPTY : buf.subarray(bodyStart, end));
      return true;
    }
    if (n < 0) this.body.chunked();
    else this.body.fixed(n);
    this.state = S_BODY;
    this.buf = have > 0 ? buf.subarray(bodyStart) : null;
    if (expectContinue && have === 0) this.socket.write(CONTINUE);
    return true;
  }

  // ---- handling and responding ------------------------------------------------------------------

  private dispatch(body: Buffer): void {
    this.state = S_BUSY;
    this.served++;
    this.timerKind = T_NONE; // no timeout while the handler has the request
    const h = this.head;
    const req: FrontRequest = { method: h.method, url: h.url, headers: h.headers, body, httpVersion: h.v11 ? '1.1' : '1.0', remoteAddress: this.addr };
    const res = new Res(this, h.method === 'HEAD', h.v11, h.keepAlive && !this.probeOnly);
    this.res = res;
    const limits = this.cfg.limits;
    if (limits !== null && (this.probeOnly || limits.rateLimited)) {
      const a = requestRefusal(limits, this.cfg.probePaths, this.probeOnly, this.addr, h.method, h.url);
      if (a !== undefined) {
        this.cfg.events.refused?.(a.why, this.addr);
        const text = this.cfg.errorBody(a.status, a.code, a.message);
        res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after': a.retryAfterS });
        res.end(text);
        return;
      }
    }
    try {
      this.cfg.handler(req, res);
    } catch {
      if (res.finished || this.socket.destroyed) return;
      if (res.untouched) {
        res.finished = true;
        this.res = null;
        this.fail('internal_error', 'internal server error');
      } else this.socket.destroy();
    }
  }

  /** One write of a response piece (see writePiece); the send timeout starts when the client does not take it. */
  send(head: string, size: string, chunk: Buffer | string, len: number, post: string, ascii: boolean): boolean {
    const ok = writePiece(this.socket, head, size, chunk, len, post, ascii);
    if (!ok) this.waitSend();
    return ok;
  }

  /** The response was handed to the socket: close, or go on with the next request once the client has taken it. */
  responseDone(res: Res): void {
    if (this.res !== res) return;
    this.res = null;
    if (this.state !== S_BUSY) return;
    if (res.closeAfter) {
      this.closeQuietly();
      return;
    }
    if (this.socket.writableLength > this.cfg.maxBuffered) {
      // no further request is read or answered while this much of the answers waits for the client
      // (one that pipelines and never reads would otherwise fill memory with answers); node:http
      // stops at 16 KiB, which makes a pipelining client that does read wait for every drain
      this.state = S_FLUSH;
      this.waitSend();
      return;
    }
    this.next();
  }

  /** Ready for the next request: parse what the client sent meanwhile, or wait for it. */
  private next(): void {
    this.state = S_HEAD;
    const pend = this.pend;
    if (pend !== null) {
      this.pend = null;
      this.pendLen = 0;
      const lead = this.buf;
      if (lead !== null) pend.unshift(this.off === 0 ? lead : lead.subarray(this.off));
      this.buf = pend.length === 1 ? (pend[0] as Buffer) : Buffer.concat(pend);
      this.off = 0;
      if (this.paused) {
        this.paused = false;
        this.socket.resume();
      }
    }
    if (this.buf === null) {
      this.arm(T_IDLE, this.cfg.keepAliveMs);
      return;
    }
    // pipelined bytes: parse them, but not from inside the handler's end() (unless the parsing loop is
    // what called the handler: it carries on by itself)
    if (this.parsing || this.tickQueued) return;
    this.tickQueued = true;
    if (this.served >= PIPELINE_TURN) setImmediate(this.onTurn);
    else process.nextTick(this.onTick);
  }

  /** Our side is done: send FIN once everything written has gone (the timer then waits for theirs). */
  private closeQuietly(): void {
    this.state = S_DEAD;
    this.buf = null;
    this.pend = null;
    this.timerKind = T_NONE;
    const socket = this.socket;
    if (this.paused) {
      this.paused = false;
      socket.resume();
    }
    if (socket.destroyed) return;
    socket.end();
    this.lingerUnsent();
  }

  /** After end(): what the client has not taken yet gets the send timeout ('finish' replaces it by the linger once it has). */
  private lingerUnsent(): void {
    if (this.socket.writableLength > 0) this.arm(T_SEND, this.cfg.sendMs);
  }

  /** An answer of our own (bad request, timeout, handler crash…), then close. */
  private fail(code: ErrorCode, message: string): void {
    const status = CATALOGUE[code][0];
    const socket = this.socket;
    this.state = S_DEAD;
    this.buf = null;
    this.pend = null;
    this.body.drop();
    this.timerKind = T_NONE;
    if (socket.destroyed) return;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    if (this.paused) {
      this.paused = false;
      socket.resume(); // read (and drop) the rest so their FIN, and our linger timer, can end it
    }
    // the answer to a HEAD request has no body, even a refusal (RFC 9110 §9.3.2)
    const head = errorResponse(this.cfg, status, code, message, '');
    socket.end(this.heads.method === 'HEAD' ? head.slice(0, head.indexOf('\r\n\r\n') + 4) : head);
    this.lingerUnsent();
  }
}

/** A complete `connection: close` answer of the server's own. */
export function errorResponse(cfg: FrontConfig, status: number, code: ErrorCode, message: string, extra: string): string {
  return closingResponse(status, cfg.errorBody(status, code, message), extra);
}
