// Writing responses on the data plane's client connections: status line and checked header fields (formatted once for frozen header objects), body framing, coalesced writes.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { frameFor, putLatin1, writeFrame } from '../frame.js';
import { chainClose } from './server-options.js';
import type { FrontResponse } from './server-options.js';
import { C_CLOSE, TOKEN, connectionFlags } from './syntax.js';
import { refusalAnswer } from '../limits.js';
import type { ClientLimits, Refusal } from '../limits.js';
import type { ErrorCode } from '../../errors.js';

/** A string piece with an ASCII head up to this size goes out as one string. */
const COALESCE_MAX = 16 * 1024;

// response body framing
const M_RAW = 0;
const M_CHUNKED = 1;
const M_NONE = 2;

/** The connection a response is written to. */
export interface ResponseSink {
  readonly socket: Socket;
  /** `connection: keep-alive` plus the timeout hint. */
  readonly keepAliveLines: string;
  readonly sendTimedOut: boolean;
  /** One write of head, chunk-size line, piece and tail (see writePiece); false when the socket needs draining. */
  send(head: string, size: string, chunk: Buffer | string, len: number, post: string, ascii: boolean): boolean;
  /** A write left bytes the client has not taken. */
  waitSend(): void;
  /** The response was handed to the socket. */
  responseDone(res: Res): void;
}

let dateStr = '';
let dateUntil = 0;
/** The Date header value, formatted at most once a second. */
export function httpDate(): string {
  const now = Date.now();
  if (now >= dateUntil) {
    dateStr = new Date(now).toUTCString();
    dateUntil = now - (now % 1000) + 1000;
  }
  return dateStr;
}

const statusLines = new Map<number, string>();
export function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    statusLines.set(status, line);
  }
  return line;
}

/** Response fields come from our code and from upstreams: refuse what would split the response. True when all ASCII. */
function checkField(name: string, value: string): boolean {
  if (name.length === 0) throw new Error('empty response header name');
  for (let i = 0; i < name.length; i++) if (TOKEN[name.charCodeAt(i)] !== 1) throw new Error(`invalid response header name ${JSON.stringify(name)}`);
  let ascii = true;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 32 && c !== 9) || c === 127 || c > 255) throw new Error(`invalid character in response header ${name}`);
    if (c > 127) ascii = false;
  }
  return ascii;
}

/** Response header fields checked and formatted (`name: value\r\n` lines, framing and connection left out). */
interface Fields {
  lines: string;
  hasLength: boolean;
  hasDate: boolean;
  /** All ASCII. */
  ascii: boolean;
  /** A `connection: close` among them. */
  close: boolean;
  /**
   * The last whole head built from frozen fields, reused while what else goes into it is the same:
   * status, framing, connection lines and the date (a new one each second). One flat string
   * instead of a concatenation per response.
   */
  head: string;
  headStatus: number;
  headMode: number;
  headConn: string;
  headDate: string;
}

/** Frozen header objects (a worker's stream headers, the same for every stream) are checked and formatted once. */
const formatted = new WeakMap<object, Fields>();

function formatFields(headers: Readonly<Record<string, string | number>>): Fields {
  const f: Fields = {
    lines: '',
    hasLength: false,
    hasDate: false,
    ascii: true,
    close: false,
    head: '',
    headStatus: 0,
    headMode: 0,
    headConn: '',
    headDate: '',
  };
  for (const name in headers) {
    const v = headers[name] as string | number;
    const value = typeof v === 'number' ? `${v}` : v;
    const n = name.length;
    if (n === 14 && name.toLowerCase() === 'content-length') f.hasLength = true;
    else if (n === 17 && name.toLowerCase() === 'transfer-encoding')
      continue; // framing is ours
    else if (n === 10 && name.toLowerCase() === 'connection') {
      if ((connectionFlags(value) & C_CLOSE) !== 0) f.close = true;
      continue;
    } else if (n === 4 && name.toLowerCase() === 'date') f.hasDate = true;
    if (!checkField(name, value)) f.ascii = false;
    f.lines += `${name}: ${value}\r\n`;
  }
  return f;
}

/**
 * Write `head` (latin1; '' once sent), `size` (the chunk-size line or ''), the piece, then `post`
 * (ASCII), in one socket write. `ascii`: `head` is ASCII, so with a string piece it can all go as
 * one UTF-8 string. Head and size line are copied one after the other, not joined first: a head
 * reused for many responses stays one flat string.
 */
export function writePiece(socket: Socket, head: string, size: string, chunk: Buffer | string, len: number, post: string, ascii: boolean): boolean {
  const total = head.length + size.length + len + post.length;
  if (typeof chunk === 'string' && ascii && total <= COALESCE_MAX) return socket.write(`${head}${size}${chunk}${post}`);
  // the piece is always copied (callers may pass borrowed bytes: the upstream pool's read buffer)
  const out = frameFor(total);
  let o = putLatin1(out, size, putLatin1(out, head, 0));
  o += typeof chunk === 'string' ? out.utf8Write(chunk, o) : chunk.copy(out, o);
  putLatin1(out, post, o);
  return writeFrame(socket, out, total);
}

/** A complete `connection: close` answer with a JSON body; a caller that must send no body cuts it after the head's blank line. */
export function closingResponse(status: number, body: string, extra: string): string {
  return `${statusLine(status)}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\ndate: ${httpDate()}\r\n\r\n${body}`;
}

export class Res implements FrontResponse {
  headersSent = false;
  /** end() was called: the response is the socket's now. */
  finished = false;
  /** Some of it reached the socket. */
  flushed = false;
  closeAfter: boolean;
  private readonly conn: ResponseSink;
  private readonly isHead: boolean;
  private readonly v11: boolean;
  /** The head, held back to go out with the first body bytes. */
  private head: string | null = null;
  private mode = M_RAW;
  /** The head is pure ASCII (so it may travel in one UTF-8 string with a string body). */
  private asciiHead = true;
  /** The connection closed while this response was unfinished. */
  private closed = false;
  private closeCb: (() => void) | null = null;
  private drainCb: (() => void) | null = null;

  constructor(conn: ResponseSink, isHead: boolean, v11: boolean, keepAlive: boolean) {
    this.conn = conn;
    this.isHead = isHead;
    this.v11 = v11;
    this.closeAfter = !keepAlive;
  }

  get destroyed(): boolean {
    return this.conn.socket.destroyed;
  }

  get sendTimedOut(): boolean {
    return this.conn.sendTimedOut;
  }

  writeHead(status: number, headers: Readonly<Record<string, string | number>>): void {
    if (this.headersSent) throw new Error('writeHead() called twice');
    if (!Number.isInteger(status) || status < 100 || status > 999) throw new Error(`invalid status code ${status}`);
    const frozen = Object.isFrozen(headers);
    let f = frozen ? formatted.get(headers) : undefined;
    if (f === undefined) {
      f = formatFields(headers);
      if (frozen) formatted.set(headers, f);
    }
    let close = this.closeAfter || f.close;
    let mode: number;
    if (this.isHead || status === 204 || status === 304 || status < 200) mode = M_NONE;
    else if (f.hasLength) mode = M_RAW;
    else if (this.v11) mode = M_CHUNKED;
    else {
      mode = M_RAW;
      close = true; // HTTP/1.0 without a length: the end of the body is the end of the connection
    }
    this.mode = mode;
    this.headersSent = true;
    this.asciiHead = f.ascii;
    this.closeAfter = close;
    const conn = close ? 'connection: close\r\n' : this.conn.keepAliveLines;
    const date = f.hasDate ? '' : httpDate();
    if (f.head !== '' && f.headStatus === status && f.headMode === mode && f.headConn === conn && f.headDate === date) {
      this.head = f.head;
      return;
    }
    let h = statusLine(status) + f.lines;
    if (mode === M_CHUNKED) h += 'transfer-encoding: chunked\r\n';
    h += conn;
    if (date !== '') h += `date: ${date}\r\n`;
    h += '\r\n';
    this.head = h;
    if (frozen) {
      f.head = h;
      f.headStatus = status;
      f.headMode = mode;
      f.headConn = conn;
      f.headDate = date;
    }
  }

  write(chunk: Buffer | string): boolean {
    if (!this.headersSent) throw new Error('write() before writeHead()');
    const socket = this.conn.socket;
    if (this.finished || socket.destroyed) return true;
    const len = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (len === 0 || this.mode === M_NONE) {
      this.flushHead();
      return !socket.writableNeedDrain;
    }
    const head = this.head;
    this.head = null;
    this.flushed = true;
    const ascii = head === null || this.asciiHead;
    if (this.mode === M_CHUNKED) return this.conn.send(head ?? '', `${len.toString(16)}\r\n`, chunk, len, '\r\n', ascii);
    return this.conn.send(head ?? '', '', chunk, len, '', ascii);
  }

  end(chunk?: Buffer | string): void {
    if (this.finished) return;
    if (!this.headersSent) throw new Error('end() before writeHead()');
    this.finished = true;
    const conn = this.conn;
    const socket = conn.socket;
    if (socket.destroyed) return;
    const pre = this.head ?? '';
    this.head = null;
    this.flushed = true;
    const mode = this.mode;
    const len = chunk === undefined || mode === M_NONE ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (chunk === undefined || len === 0) {
      const out = mode === M_CHUNKED ? `${pre}0\r\n\r\n` : pre;
      if (out.length !== 0 && !socket.write(out, 'latin1')) conn.waitSend();
    } else if (mode === M_CHUNKED) conn.send(pre, `${len.toString(16)}\r\n`, chunk, len, '\r\n0\r\n\r\n', this.asciiHead);
    else conn.send(pre, '', chunk, len, '', this.asciiHead);
    conn.responseDone(this);
  }

  onClose(cb: () => void): void {
    if (this.closed) {
      process.nextTick(cb);
      return;
    }
    if (this.finished) return;
    this.closeCb = chainClose(this.closeCb, cb);
  }

  onceDrain(cb: () => void): void {
    const socket = this.conn.socket;
    if (this.closed || socket.destroyed) return; // onClose tells them instead
    if (!socket.writableNeedDrain) {
      process.nextTick(cb);
      return;
    }
    const prev = this.drainCb;
    this.drainCb =
      prev === null
        ? cb
        : () => {
            prev();
            cb();
          };
  }

  destroy(): void {
    this.conn.socket.destroy();
  }

  /** Nothing has gone out yet (a handler that throws can still get a clean 500). */
  get untouched(): boolean {
    return !this.flushed;
  }

  private flushHead(): void {
    const head = this.head;
    if (head === null) return;
    this.head = null;
    this.flushed = true;
    if (!this.conn.socket.write(head, 'latin1')) this.conn.waitSend();
  }

  drained(): void {
    const cb = this.drainCb;
    if (cb === null) return;
    this.drainCb = null;
    cb();
  }

  connClosed(): void {
    if (this.finished) return;
    this.closed = true;
    this.drainCb = null;
    const cb = this.closeCb;
    this.closeCb = null;
    if (cb !== null) cb();
  }
}

/** A refused connection waits at most this long for the client's FIN: it holds a descriptor meanwhile. */
const REFUSED_LINGER_MS = 1000;

/**
 * Answer a connection that was not admitted and close it. What the client sent is read and dropped
 * until its FIN or a short limit: the descriptor is what a full listener is short of. Both
 * listeners use it.
 */
export function refuseConnection(
  socket: Socket,
  why: Refusal,
  limits: ClientLimits,
  errorBody: (status: number, code: ErrorCode, message: string) => string,
): void {
  const a = refusalAnswer(why, limits.settings, socket.remoteAddress ?? '');
  socket.on('error', () => undefined);
  socket.on('end', () => socket.destroy());
  socket.end(closingResponse(a.status, errorBody(a.status, a.code, a.message), `retry-after: ${a.retryAfterS}\r\n`));
  socket.resume();
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
}
