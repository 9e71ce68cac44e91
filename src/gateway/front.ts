// The data plane's HTTP/1.1 server over node:net: strict request parsing and framing, keep-alive, pipelining, coalesced responses, timeouts,
// and what bounds a client: admission, read-ahead, body memory, the time its unread answers may wait.
import { STATUS_CODES } from 'node:http';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import type { ErrorBody } from '../errors.js';
import { DEFAULTS } from '../defaults.js';
import { frameFor, putLatin1, writeFrame } from './frame.js';
import { isValidHost } from './http1/host.js';
import type { ClientLimits, Refusal } from './limits.js';

export interface FrontRequest {
  /** As sent (a token, e.g. 'POST'). */
  readonly method: string;
  /** Request-target in origin-form, query included, e.g. '/v1/completions?x=1'. */
  readonly url: string;
  /** Names lower-cased; a repeated header's values joined with ', ' (Content-Length: its single value). */
  readonly headers: Readonly<Record<string, string>>;
  /** The complete body (Content-Length or chunked, decoded); empty Buffer when none. */
  readonly body: Buffer;
  readonly httpVersion: '1.0' | '1.1';
  /** The client's address as the socket saw it ('' when unknown). */
  readonly remoteAddress: string;
}

export interface FrontResponse {
  /** The connection is gone (client left, or destroy()). */
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  /** Status line + headers (names given lower-case by callers; values string or number). */
  writeHead(status: number, headers: Readonly<Record<string, string | number>>): void;
  /**
   * Body bytes, copied before write returns (the caller may reuse the memory). Returns false when the
   * socket's write buffer is over its high-water mark (wait for onceDrain).
   */
  write(chunk: Buffer | string): boolean;
  /** Finish the response (optionally with a last piece, copied like write's). */
  end(chunk?: Buffer | string): void;
  /** Called once if the connection closes before this response has been fully handed to the socket (client disconnect). Not called for a response that ended normally. */
  onClose(cb: () => void): void;
  /** Called once the socket's buffer drains after write() returned false. */
  onceDrain(cb: () => void): void;
  /** The connection was closed because the client took nothing of what was written to it for the send timeout. */
  readonly sendTimedOut: boolean;
  /** Drop the connection (e.g. the upstream broke a non-streaming answer). */
  destroy(): void;
}

export type FrontHandler = (req: FrontRequest, res: FrontResponse) => void;

export interface FrontOptions {
  /** Over it: 413 (refused early from Content-Length; for chunked as soon as crossed), then the connection is closed. */
  maxBodyBytes: number;
  /** Default 16 KiB: request line + headers; over it 431. */
  maxHeaderBytes?: number;
  /** Default DEFAULTS.gateway.clientKeepAliveMs (65 s): an idle keep-alive connection is closed after it (0: never). */
  keepAliveTimeoutMs?: number;
  /** Default DEFAULTS.gateway.clientHeadersTimeoutMs (30 s): a request whose head (and body) has not fully arrived in this time gets 408 and close (0: no limit). */
  headersTimeoutMs?: number;
  /** Default DEFAULTS.gateway.sendTimeoutMs (60 s): bytes written to a client that stay undrained this long close the connection (0: no limit). */
  sendTimeoutMs?: number;
  /** Default DEFAULTS.gateway.clientReadAheadBytes: what a client may send ahead (pipelined) while its request is answered, before reading pauses. */
  readAheadBytes?: number;
  /** Admission: the connection ceiling and per-client-address limits (none when absent). */
  limits?: ClientLimits;
  /** Told of refused connections and requests, and of send timeouts (metrics, logs). */
  events?: FrontEvents;
  /**
   * GET/HEAD paths (health, readiness, metrics) still answered at the connection ceiling, on a few
   * connections beyond it (DEFAULTS.limits.probeConnections), one request each: a saturated
   * gateway must not look dead to its liveness probe and must stay visible to Prometheus.
   */
  probePaths?: ReadonlySet<string>;
  /** Body for error answers the server writes itself (400/408/413/417/429/431/500/501/503/505). Default: OpenAI-style JSON. */
  errorBody?: (status: number, code: string, message: string) => string;
}

export interface FrontEvents {
  refused?(reason: Refusal, addr: string): void;
  sendTimeout?(): void;
}

const EMPTY = Buffer.alloc(0);
/**
 * Prototype of request header objects: nothing inherited (no `constructor`, no `__proto__` setter), yet
 * unlike Object.create(null) objects they stay in V8's fast mode (a null-prototype dictionary object
 * kept parseHead from ever being optimised: ~2.5x slower per request).
 */
const HEADERS_PROTO = Object.create(null) as object;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
/** A connection's head before its first request. */
const NO_HEAD: RequestHead = { method: '', url: '', v11: true, keepAlive: true, headers: {} };
const CONTINUE = Buffer.from('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
/** A string piece with an ASCII head up to this size goes out as one string. */
const COALESCE_MAX = 16 * 1024;
/** A chunk-size line with its extensions. */
const MAX_CHUNK_LINE = 4096;
const MAX_CHUNK_DIGITS = 16;
/** A connection keeps its last request head for reuse (LastRequestHead) only up to this size: an idle connection holds it. */
const MAX_KEPT_HEAD = 4096;
/** How long a connection we are closing may wait for the client's FIN once our side is written. */
const LINGER_MS = 5000;
/** A refused connection (429/503 at accept) waits at most this long for the client's FIN: it holds a descriptor meanwhile. */
const REFUSED_LINGER_MS = 1000;
/**
 * Pipelined requests answered for one connection per turn of the event loop: past it the next one
 * waits for setImmediate, so a burst of thousands of pipelined requests on one connection cannot
 * keep every other client waiting (answers that resolve in promises would otherwise chain on
 * nextTick forever).
 */
const PIPELINE_TURN = 16;
/** A body that arrives in pieces is gathered into one buffer, which starts at this size and doubles (chunked) up to the limit. */
const MIN_BODY_BUFFER = 16 * 1024;

/** RFC 9110 tchar. */
const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

// connection states: reading a request (head, body, chunked body pieces), handling one, gone
const S_HEAD = 0;
const S_BODY = 1;
const S_CHUNK_SIZE = 2;
const S_CHUNK_DATA = 3;
const S_CHUNK_CRLF = 4;
const S_TRAILERS = 5;
const S_BUSY = 6;
/** The answer is complete but the client has not taken it yet: nothing more is parsed until it drains. */
const S_FLUSH = 7;
const S_DEAD = 8;

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

// response body framing
const M_RAW = 0;
const M_CHUNKED = 1;
const M_NONE = 2;

// Connection header tokens
const C_CLOSE = 1;
const C_KEEP_ALIVE = 2;

class ParseError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function bad(code: string, message: string): ParseError {
  return new ParseError(400, code, message);
}

function defaultErrorBody(status: number, code: string, message: string): string {
  const type = status === 500 ? 'server_error' : status === 503 ? 'unavailable_error' : status === 429 ? 'rate_limit_error' : 'invalid_request_error';
  const body: ErrorBody = { error: { message, type, code } };
  return JSON.stringify(body);
}

let dateStr = '';
let dateUntil = 0;
/** The Date header value, formatted at most once a second. */
function httpDate(): string {
  const now = Date.now();
  if (now >= dateUntil) {
    dateStr = new Date(now).toUTCString();
    dateUntil = now - (now % 1000) + 1000;
  }
  return dateStr;
}

const statusLines = new Map<number, string>();
function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    statusLines.set(status, line);
  }
  return line;
}

/**
 * Header names clients commonly send, by length. parseHead matches them in place: no slice, no
 * lower-cased copy, and the property key is an internalised constant (a fresh string key costs a
 * string-table lookup on every store and load).
 */
const KNOWN_NAMES: (string[] | undefined)[] = [];
for (const n of [
  'host', 'accept', 'expect', 'connection', 'user-agent', 'keep-alive', 'content-type', 'content-length', 'transfer-encoding',
  'authorization', 'accept-encoding', 'accept-language', 'traceparent', 'x-request-id', 'x-session-id',
  'x-glidepath-version', 'x-glidepath-category', 'openai-organization', 'openai-project',
  'x-stainless-os', 'x-stainless-lang', 'x-stainless-arch', 'x-stainless-runtime', 'x-stainless-runtime-version',
  'x-stainless-package-version', 'x-stainless-retry-count', 'x-stainless-timeout',
]) {
  (KNOWN_NAMES[n.length] ??= []).push(n);
}

/**
 * The known name at s[from, to), case-insensitively, else undefined. The caller has checked that
 * every character is a token character: known names are [a-z0-9-], and among token characters
 * only a letter's upper case gives the same value with 0x20 set.
 */
function knownName(s: string, from: number, to: number): string | undefined {
  const list = KNOWN_NAMES[to - from];
  if (list === undefined) return undefined;
  next: for (let j = 0; j < list.length; j++) {
    const k = list[j] as string;
    for (let i = 0; i < k.length; i++) if ((s.charCodeAt(from + i) | 32) !== k.charCodeAt(i)) continue next;
    return k;
  }
  return undefined;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** A bare LF, or a CR followed by something other than LF, at or after `from`. */
function badLineEnd(buf: Buffer, from: number): boolean {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) if (i === 0 || buf[i - 1] !== 13) return true;
  const last = buf.length - 1;
  for (let i = buf.indexOf(13, from); i !== -1 && i < last; i = buf.indexOf(13, i + 1)) if (buf[i + 1] !== 10) return true;
  return false;
}

/** The single value of a Content-Length field ("5", or "5, 5"), or null when malformed or inconsistent. */
function contentLength(v: string): string | null {
  const n = v.length;
  let first: string | null = null;
  let i = 0;
  for (;;) {
    while (i < n && (v.charCodeAt(i) === 32 || v.charCodeAt(i) === 9)) i++;
    const s = i;
    while (i < n && isDigit(v.charCodeAt(i))) i++;
    if (i === s) return null;
    const d = v.slice(s, i);
    if (first === null) first = d;
    else if (d !== first) return null;
    while (i < n && (v.charCodeAt(i) === 32 || v.charCodeAt(i) === 9)) i++;
    if (i === n) return first;
    if (v.charCodeAt(i) !== 44) return null;
    i++;
  }
}

function connectionFlags(v: string): number {
  const l = v.toLowerCase();
  if (l === 'keep-alive') return C_KEEP_ALIVE;
  if (l === 'close') return C_CLOSE;
  let f = 0;
  for (const t of l.split(',')) {
    const x = t.trim();
    if (x === 'close') f |= C_CLOSE;
    else if (x === 'keep-alive') f |= C_KEEP_ALIVE;
  }
  return f;
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
  const f: Fields = { lines: '', hasLength: false, hasDate: false, ascii: true, close: false, head: '', headStatus: 0, headMode: 0, headConn: '', headDate: '' };
  for (const name in headers) {
    const v = headers[name] as string | number;
    const value = typeof v === 'number' ? `${v}` : v;
    const n = name.length;
    if (n === 14 && name.toLowerCase() === 'content-length') f.hasLength = true;
    else if (n === 17 && name.toLowerCase() === 'transfer-encoding') continue; // framing is ours
    else if (n === 10 && name.toLowerCase() === 'connection') {
      if ((connectionFlags(value) & C_CLOSE) !== 0) f.close = true;
      continue;
    } else if (n === 4 && name.toLowerCase() === 'date') f.hasDate = true;
    if (!checkField(name, value)) f.ascii = false;
    f.lines += `${name}: ${value}\r\n`;
  }
  return f;
}

class FrontConfig {
  readonly handler: FrontHandler;
  readonly maxBody: number;
  readonly maxHeader: number;
  readonly keepAliveMs: number;
  readonly requestMs: number;
  readonly sendMs: number;
  /** While a response is in progress, read at most this much of what follows before pausing the socket. */
  readonly maxBuffered: number;
  readonly limits: ClientLimits | null;
  readonly events: FrontEvents;
  readonly probePaths: ReadonlySet<string> | null;
  /** Connections admitted past the ceiling for probe paths only. */
  probeOpen = 0;
  readonly errorBody: (status: number, code: string, message: string) => string;
  /** `connection: keep-alive` plus the timeout hint node:http sends (clients stop reusing a socket before we close it). */
  readonly keepAliveLines: string;

  constructor(handler: FrontHandler, opts: FrontOptions) {
    if (!(opts.maxBodyBytes >= 0)) throw new Error(`maxBodyBytes must be >= 0, got ${opts.maxBodyBytes}`);
    this.handler = handler;
    this.maxBody = opts.maxBodyBytes;
    this.maxHeader = opts.maxHeaderBytes ?? 16 * 1024;
    this.keepAliveMs = opts.keepAliveTimeoutMs ?? DEFAULTS.gateway.clientKeepAliveMs;
    this.requestMs = opts.headersTimeoutMs ?? DEFAULTS.gateway.clientHeadersTimeoutMs;
    this.sendMs = opts.sendTimeoutMs ?? DEFAULTS.gateway.sendTimeoutMs;
    this.maxBuffered = opts.readAheadBytes ?? DEFAULTS.gateway.clientReadAheadBytes;
    this.limits = opts.limits ?? null;
    this.events = opts.events ?? {};
    this.probePaths = opts.probePaths ?? null;
    this.errorBody = opts.errorBody ?? defaultErrorBody;
    const hint = Math.floor(this.keepAliveMs / 1000);
    this.keepAliveLines = hint >= 1 ? `connection: keep-alive\r\nkeep-alive: timeout=${hint}\r\n` : 'connection: keep-alive\r\n';
  }
}

class Res implements FrontResponse {
  headersSent = false;
  /** end() was called: the response is the socket's now. */
  finished = false;
  /** Some of it reached the socket. */
  flushed = false;
  closeAfter: boolean;
  private readonly conn: Conn;
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

  constructor(conn: Conn, isHead: boolean, v11: boolean, keepAlive: boolean) {
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
    const conn = close ? 'connection: close\r\n' : this.conn.cfg.keepAliveLines;
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
    const prev = this.closeCb;
    this.closeCb =
      prev === null
        ? cb
        : () => {
            prev();
            cb();
          };
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

/** What a request head says. Never changed once made: requests on a connection may share one (see LastRequestHead). */
interface RequestHead {
  readonly method: string;
  readonly url: string;
  readonly v11: boolean;
  readonly keepAlive: boolean;
  /** Read-only too (FrontRequest.headers). */
  readonly headers: Record<string, string>;
}

/**
 * A connection's last request head, kept so that the next one, when it is the same, is not parsed
 * again: a client on a keep-alive connection sends the same head every time (the OpenAI SDKs,
 * undici, a load balancer's pooled connection), except for Content-Length's digits. Only heads
 * without Transfer-Encoding or Expect, with at most one plain Content-Length, up to MAX_KEPT_HEAD
 * bytes, are kept.
 */
class LastRequestHead {
  constructor(
    private whole: string,
    /** Where Content-Length's value starts and ends in `whole` (-1, -1: no Content-Length). */
    private readonly from: number,
    private to: number,
    /** Content-Length's digits in `whole` and `head.headers` (null: none). */
    private length: string | null,
    private head: RequestHead,
  ) {}

  /** `s` is this head with Content-Length's digits (or none) changed at most: those digits (null: no Content-Length); else undefined. */
  match(s: string): string | null | undefined {
    const w = this.whole;
    // flat strings compare like memcmp; String#startsWith is several times slower
    if (s === w) return this.length;
    const from = this.from;
    if (from < 0) return undefined;
    const to = s.length - (w.length - this.to);
    if (to <= from || to - from > 15) return undefined;
    for (let i = from; i < to; i++) if (!isDigit(s.charCodeAt(i))) return undefined;
    if (s.slice(0, from) !== w.slice(0, from) || s.slice(to) !== w.slice(this.to)) return undefined;
    return s.slice(from, to);
  }

  /**
   * What head `s`, which match() gave Content-Length `d`, says: the last one, or a copy with the new
   * length (the last one may still be in use), which `s` and the copy then replace.
   */
  headOf(s: string, d: string | null): RequestHead {
    if (d === this.length) return this.head;
    const last = this.head.headers;
    const headers = Object.create(HEADERS_PROTO) as Record<string, string>;
    for (const k in last) headers[k] = last[k] as string;
    headers['content-length'] = d as string; // match() gives another length only for a head that has one
    this.whole = s;
    this.to = this.from + (d as string).length;
    this.length = d;
    this.head = { ...this.head, headers };
    return this.head;
  }
}

/** One client connection: its parser state, the response in progress and its one timer. */
class Conn {
  readonly socket: Socket;
  readonly cfg: FrontConfig;
  readonly addr: string;
  private readonly conns: Set<Conn>;
  private state = S_HEAD;
  /** Received and not yet consumed: `buf` from `off` on. */
  private buf: Buffer | null = null;
  /** Consumed bytes at the start of `buf` (the chunked decoder moves it instead of slicing per chunk). */
  private off = 0;
  /** Where to resume looking for the end of an incomplete head. */
  private scan = 0;
  private lastHead: LastRequestHead | null = null;
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
  private remaining = 0;
  /** The body so far: its first piece as it came (no copy when it is the only one)… */
  private first: Buffer | null = null;
  /** …or every piece copied into one buffer (never a list of pieces: a body in one-byte chunks would cost a Buffer each). */
  private acc: Buffer | null = null;
  private bodyLen = 0;
  private trailerBytes = 0;
  private res: Res | null = null;
  private timer: NodeJS.Timeout | null = null;
  private timerKind = T_NONE;
  private timerMs = 0;
  /** The send timeout closed this connection. */
  sendTimedOut = false;
  /** 'HEAD' once the request line being parsed says so ('' otherwise): its refusals carry no body. */
  private method = '';
  /** Admitted past the ceiling: one request, to a probe path only. */
  private readonly probeOnly: boolean;

  constructor(socket: Socket, cfg: FrontConfig, conns: Set<Conn>, addr: string, probeOnly: boolean) {
    this.socket = socket;
    this.cfg = cfg;
    this.conns = conns;
    this.addr = addr;
    this.probeOnly = probeOnly;
    socket.setNoDelay(true);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onSocketClose);
    socket.on('drain', this.onDrain);
    socket.on('finish', this.onFinish);
    // a connection that never sends anything gets the request timeout, closed quietly
    this.arm(T_IDLE, cfg.requestMs > 0 ? cfg.requestMs : cfg.keepAliveMs);
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
    this.dropBody();
    this.timerKind = T_NONE;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.conns.delete(this)) {
      if (this.probeOnly) this.cfg.probeOpen--;
      else this.cfg.limits?.close(this.addr);
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
    else if (kind === T_REQUEST && this.state < S_BUSY) this.fail(408, 'request_timeout', `the request did not arrive completely within ${this.cfg.requestMs} ms`);
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
          case S_BODY:
            progressed = this.readBody(buf, this.off);
            break;
          case S_CHUNK_SIZE:
            progressed = this.readChunkSize(buf, this.off);
            break;
          case S_CHUNK_DATA:
            progressed = this.readChunkData(buf, this.off);
            break;
          case S_CHUNK_CRLF:
            progressed = this.readChunkEnd(buf, this.off);
            break;
          default:
            progressed = this.readTrailers(buf, this.off);
        }
        if (!progressed) break;
      }
    } catch (err) {
      if (err instanceof ParseError) this.fail(err.status, err.code, err.message);
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
    const cfg = this.cfg;
    const len = buf.length;
    let start = 0;
    // RFC 9112 §2.2: empty lines before a request line are ignored (they count towards the limit)
    while (start + 1 < len && buf[start] === 13 && buf[start + 1] === 10) start += 2;
    // known before the head is complete, so that even a refusal of a broken head gets no body
    this.method = buf[start] === 72 && buf[start + 1] === 69 && buf[start + 2] === 65 && buf[start + 3] === 68 && buf[start + 4] === 32 ? 'HEAD' : '';
    const e = buf.indexOf(CRLFCRLF, this.scan > start ? this.scan : start);
    if (e === -1) {
      if (len > cfg.maxHeader) throw new ParseError(431, 'headers_too_large', `the request line and headers exceed ${cfg.maxHeader} bytes`);
      if (badLineEnd(buf, this.scan > 0 ? this.scan - 1 : 0)) throw bad('invalid_line_ending', 'request head lines must end with CRLF (bare LF or CR)');
      this.scan = len > 3 ? len - 3 : 0;
      return false;
    }
    if (e + 4 > cfg.maxHeader) throw new ParseError(431, 'headers_too_large', `the request line and headers exceed ${cfg.maxHeader} bytes`);
    this.scan = 0;
    const s = buf.toString('latin1', start, e + 2);
    const last = this.lastHead;
    const d = last === null ? undefined : last.match(s);
    if (d !== undefined) {
      this.head = (last as LastRequestHead).headOf(s, d);
      return this.startBody(buf, e + 4, null, d, false);
    }

    // request line: method SP origin-form SP HTTP/1.x
    const le = s.indexOf('\r\n');
    const sp1 = s.indexOf(' ');
    if (sp1 <= 0 || sp1 > le) throw bad('invalid_request_line', 'malformed request line');
    for (let i = 0; i < sp1; i++) if (TOKEN[s.charCodeAt(i)] !== 1) throw bad('invalid_method', 'the request method is not a valid token');
    const sp2 = s.indexOf(' ', sp1 + 1);
    if (sp2 === -1 || sp2 > le) throw bad('invalid_request_line', 'malformed request line');
    if (s.charCodeAt(sp1 + 1) !== 47) throw bad('invalid_request_target', 'the request target must be in origin-form (start with "/")');
    for (let i = sp1 + 2; i < sp2; i++) {
      const c = s.charCodeAt(i);
      if (c <= 32 || c >= 127) throw bad('invalid_request_target', 'the request target contains an invalid character');
    }
    const minor = s.charCodeAt(sp2 + 8);
    let v11: boolean;
    if (le - sp2 === 9 && s.startsWith('HTTP/1.', sp2 + 1) && (minor === 49 || minor === 48)) v11 = minor === 49;
    else if (le - sp2 === 9 && s.startsWith('HTTP/', sp2 + 1) && isDigit(s.charCodeAt(sp2 + 6)) && s.charCodeAt(sp2 + 7) === 46 && isDigit(minor)) {
      throw new ParseError(505, 'http_version_not_supported', `${s.slice(sp2 + 1, le)} is not supported (HTTP/1.0 and HTTP/1.1 are)`);
    } else throw bad('invalid_http_version', 'malformed HTTP version in the request line');

    // header fields
    const headers = Object.create(HEADERS_PROTO) as Record<string, string>;
    let cl: string | null = null;
    let te: string | null = null;
    let conn = 0;
    let expect: string | null = null;
    let hosts = 0;
    // where a single plain Content-Length value sits in `s` (-2: not a head to keep, see LastRequestHead)
    let clFrom = -1;
    let clTo = -1;
    const end = s.length;
    let pos = le + 2;
    while (pos < end) {
      const lineEnd = s.indexOf('\r\n', pos);
      const c0 = s.charCodeAt(pos);
      if (c0 === 32 || c0 === 9) throw bad('invalid_header', 'obsolete line folding in request headers');
      let i = pos;
      let upper = false;
      for (; i < lineEnd; i++) {
        const c = s.charCodeAt(i);
        if (c === 58) break;
        if (TOKEN[c] !== 1) throw bad('invalid_header', c === 32 || c === 9 ? 'whitespace before the colon in a header field' : 'invalid character in a header field name');
        if (c >= 65 && c <= 90) upper = true;
      }
      if (i === lineEnd) throw bad('invalid_header', 'header field without a colon');
      if (i === pos) throw bad('invalid_header', 'empty header field name');
      let name = knownName(s, pos, i);
      if (name === undefined) name = upper ? s.slice(pos, i).toLowerCase() : s.slice(pos, i);
      let vs = i + 1;
      let ve = lineEnd;
      while (vs < ve && (s.charCodeAt(vs) === 32 || s.charCodeAt(vs) === 9)) vs++;
      while (ve > vs && (s.charCodeAt(ve - 1) === 32 || s.charCodeAt(ve - 1) === 9)) ve--;
      for (let k = vs; k < ve; k++) {
        const c = s.charCodeAt(k);
        if ((c < 32 && c !== 9) || c === 127) throw bad('invalid_header', `invalid character in the value of header ${name}`);
      }
      const value = s.slice(vs, ve);
      pos = lineEnd + 2;
      switch (name) {
        case 'content-length': {
          const d = contentLength(value);
          if (d === null || (cl !== null && d !== cl)) throw bad('invalid_content_length', 'Content-Length must be one non-negative integer (repeated values must be identical)');
          if (cl === null && d === value) {
            clFrom = vs;
            clTo = ve;
          } else clFrom = -2;
          cl = d;
          headers[name] = d;
          continue;
        }
        case 'transfer-encoding':
          te = te === null ? value : `${te}, ${value}`;
          break;
        case 'connection':
          conn |= connectionFlags(value);
          break;
        case 'expect':
          expect = expect === null ? value : `${expect}, ${value}`;
          break;
        case 'host':
          if (++hosts > 1) throw bad('invalid_host', 'more than one Host header');
          // RFC 9112 §3.2: a Host that is not `host[:port]` is a 400
          if (!isValidHost(value)) throw bad('invalid_host', `invalid Host header value ${JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value)}`);
          break;
      }
      const prev = headers[name];
      headers[name] = prev === undefined ? value : `${prev}, ${value}`;
    }
    if (v11 && hosts === 0) throw bad('invalid_host', 'HTTP/1.1 requests must have a Host header');

    let expectContinue = false;
    if (expect !== null) {
      if (expect.toLowerCase() !== '100-continue') throw new ParseError(417, 'expectation_failed', `unsupported expectation ${JSON.stringify(expect)} (only 100-continue is)`);
      expectContinue = v11; // RFC 9110 §10.1.1: ignored in an HTTP/1.0 request
    }

    const head: RequestHead = { method: s.slice(0, sp1), url: s.slice(sp1 + 1, sp2), v11, keepAlive: (conn & C_CLOSE) === 0 && (v11 || (conn & C_KEEP_ALIVE) !== 0), headers };
    this.head = head;
    if (te === null && expect === null && clFrom !== -2 && s.length <= MAX_KEPT_HEAD) this.lastHead = new LastRequestHead(s, clFrom, clTo, cl, head);
    return this.startBody(buf, e + 4, te, cl, expectContinue);
  }

  /** The head ended just before `bodyStart`: frame the body (RFC 9112 §6.3) and dispatch the request once it is all here. */
  private startBody(buf: Buffer, bodyStart: number, te: string | null, cl: string | null, expectContinue: boolean): boolean {
    const cfg = this.cfg;
    const len = buf.length;
    this.off = 0;
    if (te !== null) {
      if (cl !== null) throw bad('conflicting_framing', 'both Transfer-Encoding and Content-Length are present');
      if (!this.head.v11) throw bad('invalid_transfer_encoding', 'Transfer-Encoding is not allowed in an HTTP/1.0 request');
      if (te.length !== 7 || te.toLowerCase() !== 'chunked') {
        throw new ParseError(501, 'unsupported_transfer_encoding', `501 Not Implemented: transfer-encoding ${JSON.stringify(te)} (only "chunked" is supported)`);
      }
      this.bodyLen = 0;
      this.state = S_CHUNK_SIZE;
      this.buf = bodyStart < len ? buf.subarray(bodyStart) : null;
      if (expectContinue && this.buf === null) this.socket.write(CONTINUE);
      return true;
    }
    if (cl !== null) {
      const n = cl.length > 15 ? Infinity : Number(cl);
      if (n > cfg.maxBody) throw new ParseError(413, 'body_too_large', `the request body (${cl} bytes) exceeds the limit of ${cfg.maxBody} bytes`);
      if (n > 0) {
        const have = len - bodyStart;
        if (have >= n) {
          const bodyEnd = bodyStart + n;
          this.buf = bodyEnd < len ? buf.subarray(bodyEnd) : null;
          this.dispatch(buf.subarray(bodyStart, bodyEnd));
          return true;
        }
        this.remaining = n;
        this.bodyLen = n;
        this.state = S_BODY;
        this.buf = have > 0 ? buf.subarray(bodyStart) : null;
        if (expectContinue && have === 0) this.socket.write(CONTINUE);
        return true;
      }
    }
    this.buf = bodyStart < len ? buf.subarray(bodyStart) : null;
    this.dispatch(EMPTY);
    return true;
  }

  /** A Content-Length body (`bodyLen` bytes in all): keep what is here. */
  private readBody(buf: Buffer, off: number): boolean {
    const need = this.remaining;
    const have = buf.length - off;
    const take = have < need ? have : need;
    this.keep(buf, off, off + take, this.bodyLen, true);
    this.consume(buf, off + take);
    if (take < need) {
      this.remaining = need - take;
      return false;
    }
    this.finishBody();
    return true;
  }

  private readChunkSize(buf: Buffer, off: number): boolean {
    const lf = buf.indexOf(10, off);
    if (lf === -1) {
      if (buf.length - off > MAX_CHUNK_LINE) throw bad('invalid_chunk', 'chunk size line too long');
      const cr = buf.indexOf(13, off);
      if (cr !== -1 && cr < buf.length - 1) throw bad('invalid_chunk', 'chunk size line must end with CRLF');
      return false;
    }
    if (lf === off || buf[lf - 1] !== 13) throw bad('invalid_chunk', 'chunk size line must end with CRLF');
    const lineEnd = lf - 1;
    if (lineEnd - off > MAX_CHUNK_LINE) throw bad('invalid_chunk', 'chunk size line too long');
    let i = off;
    let size = 0;
    for (; i < lineEnd; i++) {
      const h = HEX[buf[i] as number] as number;
      if (h < 0) break;
      size = size * 16 + h;
    }
    if (i === off) throw bad('invalid_chunk', 'invalid chunk size (hexadecimal digits expected)');
    if (i - off > MAX_CHUNK_DIGITS) throw bad('invalid_chunk', 'chunk size has too many digits');
    if (i < lineEnd) {
      // chunk extensions: BWS ";" …, ignored
      let j = i;
      while (j < lineEnd && (buf[j] === 32 || buf[j] === 9)) j++;
      if (j === lineEnd || buf[j] !== 59) throw bad('invalid_chunk', 'invalid chunk size (hexadecimal digits expected)');
      for (j++; j < lineEnd; j++) {
        const c = buf[j] as number;
        if ((c < 32 && c !== 9) || c === 127) throw bad('invalid_chunk', 'invalid character in a chunk extension');
      }
    }
    this.consume(buf, lf + 1);
    if (size === 0) {
      this.state = S_TRAILERS;
      this.trailerBytes = 0;
      return true;
    }
    if (this.bodyLen + size > this.cfg.maxBody) throw new ParseError(413, 'body_too_large', `the request body exceeds the limit of ${this.cfg.maxBody} bytes`);
    this.remaining = size;
    this.state = S_CHUNK_DATA;
    return true;
  }

  private readChunkData(buf: Buffer, off: number): boolean {
    const need = this.remaining;
    const have = buf.length - off;
    const take = have < need ? have : need;
    this.keep(buf, off, off + take, this.cfg.maxBody, false);
    this.bodyLen += take;
    this.consume(buf, off + take);
    if (take < need) {
      this.remaining = need - take;
      return false;
    }
    this.state = S_CHUNK_CRLF;
    return true;
  }

  private readChunkEnd(buf: Buffer, off: number): boolean {
    if (buf[off] !== 13 || (buf.length > off + 1 && buf[off + 1] !== 10)) throw bad('invalid_chunk', 'chunk data must be followed by CRLF');
    if (buf.length < off + 2) return false;
    this.consume(buf, off + 2);
    this.state = S_CHUNK_SIZE;
    return true;
  }

  /** Trailer fields after the last chunk: checked for shape, bounded, ignored. */
  private readTrailers(buf: Buffer, off: number): boolean {
    const max = this.cfg.maxHeader;
    const lf = buf.indexOf(10, off);
    if (lf === -1) {
      if (this.trailerBytes + buf.length - off > max) throw new ParseError(431, 'headers_too_large', `the chunked trailers exceed ${max} bytes`);
      if (badLineEnd(buf, off)) throw bad('invalid_chunk', 'trailer lines must end with CRLF');
      return false;
    }
    if (lf === off || buf[lf - 1] !== 13) throw bad('invalid_chunk', 'trailer lines must end with CRLF');
    this.trailerBytes += lf + 1 - off;
    if (this.trailerBytes > max) throw new ParseError(431, 'headers_too_large', `the chunked trailers exceed ${max} bytes`);
    this.consume(buf, lf + 1);
    if (lf === off + 1) {
      this.finishBody();
      return true;
    }
    const lineEnd = lf - 1;
    let i = off;
    while (i < lineEnd && TOKEN[buf[i] as number] === 1) i++;
    if (i === off || buf[i] !== 58) throw bad('invalid_chunk', 'malformed trailer field');
    for (i++; i < lineEnd; i++) {
      const c = buf[i] as number;
      if ((c < 32 && c !== 9) || c === 127) throw bad('invalid_chunk', 'invalid character in a trailer field');
    }
    return true;
  }

  /**
   * Keep body bytes buf[from, to). The first piece is kept as it came; from the second on, pieces are
   * copied into one buffer: `exact` (Content-Length) allocates `cap`, the known size, at once;
   * otherwise (chunked) it starts at MIN_BODY_BUFFER and doubles, never past `cap` (the body limit).
   * So a body costs its size and at most one spare buffer while it grows, however it is cut up.
   */
  private keep(buf: Buffer, from: number, to: number, cap: number, exact: boolean): void {
    const n = to - from;
    if (n === 0) return;
    const acc = this.acc;
    const first = this.first;
    if (acc === null && first === null) {
      this.first = buf.subarray(from, to);
      return;
    }
    const fill = acc === null ? (first as Buffer).length : this.accLen;
    const need = fill + n;
    let out = acc;
    if (out === null || out.length < need) {
      const grown = exact ? cap : Math.min(cap, Math.max(need, MIN_BODY_BUFFER, out === null ? 0 : out.length * 2));
      out = Buffer.allocUnsafe(grown);
      if (acc === null) (first as Buffer).copy(out, 0);
      else acc.copy(out, 0, 0, fill);
      this.first = null;
      this.acc = out;
    }
    buf.copy(out, fill, from, to);
    this.accLen = need;
  }

  /** Bytes used in `acc`. */
  private accLen = 0;

  private dropBody(): void {
    this.first = null;
    this.acc = null;
    this.accLen = 0;
  }

  private finishBody(): void {
    const acc = this.acc;
    const body = acc !== null ? acc.subarray(0, this.accLen) : (this.first ?? EMPTY);
    this.dropBody();
    this.dispatch(body);
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
    if (this.probeOnly && !this.isProbe(h)) {
      this.cfg.events.refused?.('capacity', this.addr);
      const l = this.cfg.limits as ClientLimits;
      const text = this.cfg.errorBody(503, 'server_overloaded', `the server is at its limit of ${l.settings.maxConnections} client connections; retry shortly`);
      res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after': DEFAULTS.limits.retryAfterS });
      res.end(text);
      return;
    }
    const limits = this.cfg.limits;
    if (limits !== null && limits.rateLimited) {
      const wait = limits.take(this.addr);
      if (wait > 0) {
        this.cfg.events.refused?.('client_rate', this.addr);
        const text = this.cfg.errorBody(429, 'rate_limited', `too many requests from ${this.addr}: at most ${limits.settings.perClientRps} per second (burst ${limits.settings.perClientBurst})`);
        res.writeHead(429, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after': wait });
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
        this.fail(500, 'internal_error', 'internal server error');
      } else this.socket.destroy();
    }
  }

  private isProbe(h: RequestHead): boolean {
    if (h.method !== 'GET' && h.method !== 'HEAD') return false;
    const q = h.url.indexOf('?');
    return (this.cfg.probePaths as ReadonlySet<string>).has(q === -1 ? h.url : h.url.slice(0, q));
  }

  /**
   * Write `head` (latin1; '' once sent), `size` (the chunk-size line or ''), the piece, then `post`
   * (ASCII), in one socket write. `ascii`: `head` is ASCII, so with a string piece it can all go as
   * one UTF-8 string. Head and size line are copied one after the other, not joined first: a head
   * reused for many responses stays one flat string.
   */
  send(head: string, size: string, chunk: Buffer | string, len: number, post: string, ascii: boolean): boolean {
    const socket = this.socket;
    const total = head.length + size.length + len + post.length;
    let ok: boolean;
    if (typeof chunk === 'string' && ascii && total <= COALESCE_MAX) ok = socket.write(`${head}${size}${chunk}${post}`);
    else {
      // the piece is always copied (callers may pass borrowed bytes: the upstream pool's read buffer)
      const out = frameFor(total);
      let o = putLatin1(out, size, putLatin1(out, head, 0));
      o += typeof chunk === 'string' ? out.utf8Write(chunk, o) : chunk.copy(out, o);
      putLatin1(out, post, o);
      ok = writeFrame(socket, out, total);
    }
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
  private fail(status: number, code: string, message: string): void {
    const socket = this.socket;
    this.state = S_DEAD;
    this.buf = null;
    this.pend = null;
    this.dropBody();
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
    socket.end(this.method === 'HEAD' ? head.slice(0, head.indexOf('\r\n\r\n') + 4) : head);
    this.lingerUnsent();
  }
}

/** A complete `connection: close` answer of the server's own. */
function errorResponse(cfg: FrontConfig, status: number, code: string, message: string, extra: string): string {
  return closingResponse(status, cfg.errorBody(status, code, message), extra);
}

/** The whole answer; a caller that must send no body cuts it after the head's blank line. */
function closingResponse(status: number, body: string, extra: string): string {
  return `${statusLine(status)}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\ndate: ${httpDate()}\r\n\r\n${body}`;
}

/**
 * Answer a connection that was not admitted (503 when the listener is full, 429 when its client has
 * too many) and close it. What the client sent is read and dropped until its FIN or a short limit:
 * the descriptor is what a full listener is short of. Used by the admin API's listener too.
 */
export function refuseConnection(socket: Socket, why: Refusal, limits: ClientLimits, errorBody: (status: number, code: string, message: string) => string = defaultErrorBody): void {
  const retry = `retry-after: ${DEFAULTS.limits.retryAfterS}\r\n`;
  const out =
    why === 'capacity'
      ? closingResponse(503, errorBody(503, 'server_overloaded', `the server is at its limit of ${limits.settings.maxConnections} client connections; retry shortly`), retry)
      : closingResponse(429, errorBody(429, 'too_many_connections', `too many connections from ${socket.remoteAddress ?? 'this address'}: at most ${limits.settings.perClientConnections} at once`), retry);
  socket.on('error', () => undefined);
  socket.on('end', () => socket.destroy());
  socket.end(out);
  socket.resume();
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
}

/** A net.Server serving HTTP/1.1 with `handler`; closeAllConnections() destroys every open socket. */
export function createFrontServer(handler: FrontHandler, opts: FrontOptions): Server & { closeAllConnections(): void } {
  const cfg = new FrontConfig(handler, opts);
  const conns = new Set<Conn>();
  // half-open so that a client's FIN is ours to handle (see Conn.onEnd)
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    const addr = socket.remoteAddress ?? '';
    const limits = cfg.limits;
    if (limits !== null) {
      const why = limits.admit(addr);
      if (why === 'capacity' && cfg.probePaths !== null && cfg.probeOpen < DEFAULTS.limits.probeConnections) {
        cfg.probeOpen++;
        conns.add(new Conn(socket, cfg, conns, addr, true));
        return;
      }
      if (why !== undefined) {
        cfg.events.refused?.(why, addr);
        refuseConnection(socket, why, limits, cfg.errorBody);
        return;
      }
    }
    conns.add(new Conn(socket, cfg, conns, addr, false));
  });
  return Object.assign(server, {
    closeAllConnections(): void {
      for (const c of conns) c.socket.destroy();
    },
  });
}
