// Reading a request body that did not arrive with its head: Content-Length or chunked (RFC 9112 §7.1), bounded, gathered into one buffer.
import { HEX, ParseError, TOKEN, bad, badLineEnd } from './syntax.js';

/** A chunk-size line with its extensions. */
const MAX_CHUNK_LINE = 4096;
const MAX_CHUNK_DIGITS = 16;
/** A body that arrives in pieces is gathered into one buffer, which starts at this size and doubles (chunked) up to the limit. */
const MIN_BODY_BUFFER = 16 * 1024;
const EMPTY = Buffer.alloc(0);

// where the reader is
const B_LENGTH = 0;
const B_CHUNK_SIZE = 1;
const B_CHUNK_DATA = 2;
const B_CHUNK_CRLF = 3;
const B_TRAILERS = 4;
const B_DONE = 5;

/**
 * How the body after a head is framed (RFC 9112 §6.3): -1 chunked, else its length (0: none).
 * Throws for conflicting or unsupported framing and for a declared length over `maxBody` (refused
 * before the body is sent).
 */
export function bodyLength(v11: boolean, te: string | null, cl: string | null, maxBody: number): number {
  if (te !== null) {
    if (cl !== null) throw bad('conflicting_framing', 'both Transfer-Encoding and Content-Length are present');
    if (!v11) throw bad('invalid_transfer_encoding', 'Transfer-Encoding is not allowed in an HTTP/1.0 request');
    if (te.length !== 7 || te.toLowerCase() !== 'chunked') {
      throw new ParseError('unsupported_transfer_encoding', `501 Not Implemented: transfer-encoding ${JSON.stringify(te)} (only "chunked" is supported)`);
    }
    return -1;
  }
  if (cl === null) return 0;
  const n = cl.length > 15 ? Infinity : Number(cl);
  if (n > maxBody) throw new ParseError('body_too_large', `the request body (${cl} bytes) exceeds the limit of ${maxBody} bytes`);
  return n;
}

/**
 * One connection's body reader, reused for each of its requests. feed() takes bytes as they come
 * and says how far it consumed them; the bytes of a line it has not seen the end of (a chunk-size
 * line) are left for the next call. Malformed framing or a body over the limit throws ParseError.
 */
export class BodyReader {
  private state = B_DONE;
  /** Bytes still expected: of the body (Content-Length) or of the current chunk. */
  private remaining = 0;
  /** Body bytes so far (chunked: checked against the limit per chunk). */
  private bodyLen = 0;
  private trailerBytes = 0;
  /** The body so far: its first piece as it came (no copy when it is the only one)… */
  private first: Buffer | null = null;
  /** …or every piece copied into one buffer (never a list of pieces: a body in one-byte chunks would cost a Buffer each). */
  private acc: Buffer | null = null;
  private accLen = 0;
  /** Content-Length's value, while reading one. */
  private total = 0;

  constructor(
    private readonly maxBody: number,
    /** Chunked trailers' limit (the head's). */
    private readonly maxTrailer: number,
  ) {}

  get done(): boolean {
    return this.state === B_DONE;
  }

  /** Expect `n` bytes (Content-Length, already checked against the limit). */
  fixed(n: number): void {
    this.state = B_LENGTH;
    this.remaining = n;
    this.total = n;
  }

  /** Expect a chunked body. */
  chunked(): void {
    this.state = B_CHUNK_SIZE;
    this.bodyLen = 0;
  }

  /** Read from buf[off..]; returns the offset up to which the bytes were consumed (the body's end when done). */
  feed(buf: Buffer, off: number): number {
    for (;;) {
      let next: number;
      switch (this.state) {
        case B_LENGTH:
          return this.readLength(buf, off);
        case B_CHUNK_SIZE:
          next = this.readChunkSize(buf, off);
          break;
        case B_CHUNK_DATA:
          next = this.readChunkData(buf, off);
          break;
        case B_CHUNK_CRLF:
          next = this.readChunkEnd(buf, off);
          break;
        case B_TRAILERS:
          next = this.readTrailers(buf, off);
          break;
        default:
          return off;
      }
      if (next < 0) return off;
      if (this.done) return next;
      off = next;
      if (off >= buf.length) return off;
    }
  }

  /** The complete body; the reader is ready for the next one. */
  take(): Buffer {
    const acc = this.acc;
    const body = acc !== null ? acc.subarray(0, this.accLen) : (this.first ?? EMPTY);
    this.drop();
    return body;
  }

  /** Forget what was read (the connection is gone or the request refused). */
  drop(): void {
    this.first = null;
    this.acc = null;
    this.accLen = 0;
    this.state = B_DONE;
  }

  private readLength(buf: Buffer, off: number): number {
    const need = this.remaining;
    const have = buf.length - off;
    const take = have < need ? have : need;
    this.keep(buf, off, off + take, this.total, true);
    this.remaining = need - take;
    if (this.remaining === 0) this.state = B_DONE;
    return off + take;
  }

  /** -1 when the line has not all arrived. */
  private readChunkSize(buf: Buffer, off: number): number {
    const lf = buf.indexOf(10, off);
    if (lf === -1) {
      if (buf.length - off > MAX_CHUNK_LINE) throw bad('invalid_chunk', 'chunk size line too long');
      const cr = buf.indexOf(13, off);
      if (cr !== -1 && cr < buf.length - 1) throw bad('invalid_chunk', 'chunk size line must end with CRLF');
      return -1;
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
    if (size === 0) {
      this.state = B_TRAILERS;
      this.trailerBytes = 0;
    } else {
      if (this.bodyLen + size > this.maxBody) throw new ParseError('body_too_large', `the request body exceeds the limit of ${this.maxBody} bytes`);
      this.remaining = size;
      this.state = B_CHUNK_DATA;
    }
    return lf + 1;
  }

  private readChunkData(buf: Buffer, off: number): number {
    const need = this.remaining;
    const have = buf.length - off;
    const take = have < need ? have : need;
    this.keep(buf, off, off + take, this.maxBody, false);
    this.bodyLen += take;
    this.remaining = need - take;
    if (this.remaining === 0) this.state = B_CHUNK_CRLF;
    return off + take;
  }

  private readChunkEnd(buf: Buffer, off: number): number {
    if (buf[off] !== 13 || (buf.length > off + 1 && buf[off + 1] !== 10)) throw bad('invalid_chunk', 'chunk data must be followed by CRLF');
    if (buf.length < off + 2) return -1;
    this.state = B_CHUNK_SIZE;
    return off + 2;
  }

  /** Trailer fields after the last chunk: checked for shape, bounded, ignored. */
  private readTrailers(buf: Buffer, off: number): number {
    const max = this.maxTrailer;
    const lf = buf.indexOf(10, off);
    if (lf === -1) {
      if (this.trailerBytes + buf.length - off > max) throw new ParseError('headers_too_large', `the chunked trailers exceed ${max} bytes`);
      if (badLineEnd(buf, off)) throw bad('invalid_chunk', 'trailer lines must end with CRLF');
      return -1;
    }
    if (lf === off || buf[lf - 1] !== 13) throw bad('invalid_chunk', 'trailer lines must end with CRLF');
    this.trailerBytes += lf + 1 - off;
    if (this.trailerBytes > max) throw new ParseError('headers_too_large', `the chunked trailers exceed ${max} bytes`);
    if (lf === off + 1) {
      this.state = B_DONE;
      return lf + 1;
    }
    const lineEnd = lf - 1;
    let i = off;
    while (i < lineEnd && TOKEN[buf[i] as number] === 1) i++;
    if (i === off || buf[i] !== 58) throw bad('invalid_chunk', 'malformed trailer field');
    for (i++; i < lineEnd; i++) {
      const c = buf[i] as number;
      if ((c < 32 && c !== 9) || c === 127) throw bad('invalid_chunk', 'invalid character in a trailer field');
    }
    return lf + 1;
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
}
