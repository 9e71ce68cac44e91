// Parsing a worker's response head (RFC 9112): the status line and the fields the gateway acts on (content type, framing, keep-alive), compared in place.

/** The worker broke HTTP (bad status line, bad framing, head too large). */
export class ProtocolError extends Error {
  readonly code = 'UPSTREAM_PROTOCOL';
}

/** What a response head says. */
export interface ResponseHead {
  status: number;
  contentType: string | undefined;
  /** Content-Length (-1: none). */
  length: number;
  chunked: boolean;
  /** HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`. */
  keepAlive: boolean;
  /** The `Keep-Alive` field's value, when there is one. */
  keepAliveHint: string | undefined;
}

/**
 * Parse head `h` (latin1, from the status line to the CRLF before the blank line). Throws
 * ProtocolError naming what is wrong. For a 1xx status only `status` is meaningful.
 */
export function parseResponseHead(h: string): ResponseHead {
  // HTTP/1.x SP 3DIGIT
  if (h.charCodeAt(0) !== 72 || !h.startsWith('HTTP/1.') || h.charCodeAt(8) !== 32)
    throw new ProtocolError(`bad status line ${JSON.stringify(h.slice(0, 40))}`);
  const status = digit(h, 9) * 100 + digit(h, 10) * 10 + digit(h, 11);
  if (!(status >= 100 && status <= 599) || (h.length > 12 && h.charCodeAt(12) !== 32))
    throw new ProtocolError(`bad status line ${JSON.stringify(h.slice(0, 40))}`);
  const r: ResponseHead = {
    status,
    contentType: undefined,
    length: -1,
    chunked: false,
    keepAlive: h.charCodeAt(7) !== 48 /* HTTP/1.0 */,
    keepAliveHint: undefined,
  };
  if (status < 200) return r;
  let lineStart = h.indexOf('\r\n') + 2;
  while (lineStart > 1 && lineStart < h.length) {
    let lineEnd = h.indexOf('\r\n', lineStart);
    if (lineEnd === -1) lineEnd = h.length;
    const colon = h.indexOf(':', lineStart);
    if (colon !== -1 && colon < lineEnd) {
      const nameLen = colon - lineStart;
      // only the headers the gateway acts on; compared case-insensitively by length first, in place
      const name =
        nameLen === 12
          ? 'content-type'
          : nameLen === 14
            ? 'content-length'
            : nameLen === 17
              ? 'transfer-encoding'
              : nameLen === 10
                ? (h.charCodeAt(lineStart) | 32) === 99
                  ? 'connection'
                  : 'keep-alive'
                : '';
      if (name !== '' && nameIs(h, lineStart, name)) field(r, h, name, colon + 1, lineEnd);
    }
    lineStart = lineEnd + 2;
  }
  if (r.chunked && r.length !== -1) throw new ProtocolError('response has both content-length and chunked encoding');
  return r;
}

/** One field the gateway acts on, its value at h[vs, ve) before trimming. */
function field(r: ResponseHead, h: string, name: string, vs: number, ve: number): void {
  // the value without its surrounding whitespace, compared in place where it can be
  while (vs < ve && (h.charCodeAt(vs) === 32 || h.charCodeAt(vs) === 9)) vs++;
  while (ve > vs && (h.charCodeAt(ve - 1) === 32 || h.charCodeAt(ve - 1) === 9)) ve--;
  if (name === 'content-type') {
    const value = h.slice(vs, ve);
    // it is sent on to the client: a control character would split that response's head
    if (hasCtl(value)) throw new ProtocolError(`control character in content-type ${JSON.stringify(value)}`);
    r.contentType = value;
  } else if (name === 'content-length') {
    const value = h.slice(vs, ve);
    const n = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
    if (n !== n || (r.length !== -1 && r.length !== n)) throw new ProtocolError(`bad content-length ${JSON.stringify(value)}`);
    r.length = n;
  } else if (name === 'transfer-encoding') {
    if (ve - vs !== 7 || !nameIs(h, vs, 'chunked')) throw new ProtocolError(`unsupported transfer-encoding ${JSON.stringify(h.slice(vs, ve))}`);
    r.chunked = true;
  } else if (name === 'connection') {
    if (ve - vs === 10 && nameIs(h, vs, 'keep-alive')) r.keepAlive = true;
    else {
      const v = h.slice(vs, ve).toLowerCase();
      if (v.includes('close')) r.keepAlive = false;
      else if (v.includes('keep-alive')) r.keepAlive = true;
    }
  } else r.keepAliveHint = h.slice(vs, ve);
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
