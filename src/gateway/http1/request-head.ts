// Parsing a request head (RFC 9112): the request line, header fields with the framing and Host rules, and the cache that lets a connection's repeated head skip all of it.
import { isValidHost } from './host.js';
import { C_CLOSE, C_KEEP_ALIVE, ParseError, TOKEN, bad, badLineEnd, connectionFlags, isDigit } from './syntax.js';

/**
 * Prototype of request header objects: nothing inherited (no `constructor`, no `__proto__` setter), yet
 * unlike Object.create(null) objects they stay in V8's fast mode (a null-prototype dictionary object
 * kept the head parser from ever being optimised: ~2.5x slower per request).
 */
const HEADERS_PROTO = Object.create(null) as object;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
/** A connection keeps its last request head for reuse (LastRequestHead) only up to this size: an idle connection holds it. */
const MAX_KEPT_HEAD = 4096;

/**
 * Header names clients commonly send, by length. parseHead matches them in place: no slice, no
 * lower-cased copy, and the property key is an internalised constant (a fresh string key costs a
 * string-table lookup on every store and load).
 */
const KNOWN_NAMES: (string[] | undefined)[] = [];
for (const n of [
  'host',
  'accept',
  'expect',
  'connection',
  'user-agent',
  'keep-alive',
  'content-type',
  'content-length',
  'transfer-encoding',
  'authorization',
  'accept-encoding',
  'accept-language',
  'traceparent',
  'x-request-id',
  'x-session-id',
  'x-glidepath-version',
  'x-glidepath-category',
  'openai-organization',
  'openai-project',
  'x-stainless-os',
  'x-stainless-lang',
  'x-stainless-arch',
  'x-stainless-runtime',
  'x-stainless-runtime-version',
  'x-stainless-package-version',
  'x-stainless-retry-count',
  'x-stainless-timeout',
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

/** What a request head says. Never changed once made: requests on a connection may share one (see LastRequestHead). */
export interface RequestHead {
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
export class LastRequestHead {
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

/** What a head says, with what framing the body needs. */
export interface ParsedRequestHead {
  readonly head: RequestHead;
  /** Transfer-Encoding's values joined (null: none). */
  readonly te: string | null;
  /** Content-Length's single value (null: none). */
  readonly cl: string | null;
  /** `Expect: 100-continue` on an HTTP/1.1 request. */
  readonly expectContinue: boolean;
  /** The head to keep for reuse, when it qualifies (see LastRequestHead). */
  readonly keep: LastRequestHead | null;
}

/**
 * Parse the head `s` (latin1, from the request line to the CRLF before the blank line). Throws
 * ParseError naming the problem: 400 for malformed syntax, framing or Host, 417 for an
 * unsupported expectation, 505 for another HTTP version.
 */
export function parseRequestHead(s: string): ParsedRequestHead {
  // request line: method SP origin-form SP HTTP/1.x
  const le = s.indexOf('\r\n');
  const sp1 = s.indexOf(' ');
  if (sp1 <= 0 || sp1 > le) throw bad('invalid_request_line', 'malformed request line');
  for (let i = 0; i < sp1; i++) if (TOKEN[s.charCodeAt(i)] !== 1) throw bad('invalid_method', 'the request method is not a valid token');
  const sp2 = s.indexOf(' ', sp1 + 1);
  if (sp2 === -1 || sp2 > le) throw bad('invalid_request_line', 'malformed request line');
  if (s.charCodeAt(sp1 + 1) !== 47) {
    // HTTP/2's preface reaches this parser only where HTTP/2 is turned off (front.ts hands it over otherwise)
    if (s.startsWith('PRI * HTTP/2.0\r\n'))
      throw new ParseError('http_version_not_supported', 'HTTP/2 is turned off on this listener (gateway.http2.enabled: false): speak HTTP/1.1');
    throw bad('invalid_request_target', 'the request target must be in origin-form (start with "/")');
  }
  for (let i = sp1 + 2; i < sp2; i++) {
    const c = s.charCodeAt(i);
    if (c <= 32 || c >= 127) throw bad('invalid_request_target', 'the request target contains an invalid character');
  }
  const minor = s.charCodeAt(sp2 + 8);
  let v11: boolean;
  if (le - sp2 === 9 && s.startsWith('HTTP/1.', sp2 + 1) && (minor === 49 || minor === 48)) v11 = minor === 49;
  else if (le - sp2 === 9 && s.startsWith('HTTP/', sp2 + 1) && isDigit(s.charCodeAt(sp2 + 6)) && s.charCodeAt(sp2 + 7) === 46 && isDigit(minor)) {
    throw new ParseError('http_version_not_supported', `${s.slice(sp2 + 1, le)} is not supported (HTTP/1.0 and HTTP/1.1 are)`);
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
      if (TOKEN[c] !== 1)
        throw bad('invalid_header', c === 32 || c === 9 ? 'whitespace before the colon in a header field' : 'invalid character in a header field name');
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
        if (d === null || (cl !== null && d !== cl))
          throw bad('invalid_content_length', 'Content-Length must be one non-negative integer (repeated values must be identical)');
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
    // a list: empty elements are ignored (RFC 9110 §5.6.1.2), any expectation but 100-continue is refused
    const items =
      expect.toLowerCase() === '100-continue'
        ? ['100-continue']
        : expect
            .split(',')
            .map((x) => x.trim())
            .filter((x) => x !== '');
    if (items.some((x) => x.toLowerCase() !== '100-continue'))
      throw new ParseError('expectation_failed', `unsupported expectation ${JSON.stringify(expect)} (only 100-continue is)`);
    expectContinue = v11 && items.length > 0; // RFC 9110 §10.1.1: ignored in an HTTP/1.0 request
  }

  const head: RequestHead = {
    method: s.slice(0, sp1),
    url: s.slice(sp1 + 1, sp2),
    v11,
    keepAlive: (conn & C_CLOSE) === 0 && (v11 || (conn & C_KEEP_ALIVE) !== 0),
    headers,
  };
  const keep = te === null && expect === null && clFrom !== -2 && s.length <= MAX_KEPT_HEAD ? new LastRequestHead(s, clFrom, clTo, cl, head) : null;
  return { head, te, cl, expectContinue, keep };
}

/** A connection's head before its first request. */
export const NO_HEAD: RequestHead = { method: '', url: '', v11: true, keepAlive: true, headers: {} };

/**
 * One connection's head reader: finds the end of a head as its bytes arrive, bounds it, and parses
 * it — or takes the last one's parse when the head repeats (LastRequestHead). What it read is left
 * in its fields, so that a request costs no result object.
 */
export class HeadReader {
  /** 'HEAD' as soon as the head's first bytes say so ('' otherwise): even the refusal of a broken one carries no body. */
  method = '';
  head: RequestHead = NO_HEAD;
  te: string | null = null;
  cl: string | null = null;
  expectContinue = false;
  /** Where to resume looking for the end of an incomplete head. */
  private scan = 0;
  private last: LastRequestHead | null = null;

  constructor(private readonly maxHeader: number) {}

  /** Read the head at the start of `buf`: the offset just after it, or -1 when it has not all arrived. Throws ParseError. */
  read(buf: Buffer): number {
    const max = this.maxHeader;
    const len = buf.length;
    let start = 0;
    // RFC 9112 §2.2: empty lines before a request line are ignored (they count towards the limit)
    while (start + 1 < len && buf[start] === 13 && buf[start + 1] === 10) start += 2;
    this.method = buf[start] === 72 && buf[start + 1] === 69 && buf[start + 2] === 65 && buf[start + 3] === 68 && buf[start + 4] === 32 ? 'HEAD' : '';
    const e = buf.indexOf(CRLFCRLF, this.scan > start ? this.scan : start);
    if (e === -1) {
      if (len > max) throw new ParseError('headers_too_large', `the request line and headers exceed ${max} bytes`);
      if (badLineEnd(buf, this.scan > 0 ? this.scan - 1 : 0)) throw bad('invalid_line_ending', 'request head lines must end with CRLF (bare LF or CR)');
      this.scan = len > 3 ? len - 3 : 0;
      return -1;
    }
    if (e + 4 > max) throw new ParseError('headers_too_large', `the request line and headers exceed ${max} bytes`);
    this.scan = 0;
    const s = buf.toString('latin1', start, e + 2);
    const last = this.last;
    const d = last === null ? undefined : last.match(s);
    if (d !== undefined) {
      this.head = (last as LastRequestHead).headOf(s, d);
      this.te = null;
      this.cl = d;
      this.expectContinue = false;
    } else {
      const p = parseRequestHead(s);
      this.head = p.head;
      this.te = p.te;
      this.cl = p.cl;
      this.expectContinue = p.expectContinue;
      if (p.keep !== null) this.last = p.keep;
    }
    return e + 4;
  }
}
