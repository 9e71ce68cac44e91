// HTTP/1.1 syntax both sides share: token and hex tables, the Connection header's tokens, line-ending checks, parse errors with their status.
import { CATALOGUE } from '../../errors.js';
import type { CodeWithStatus, ErrorCode } from '../../errors.js';

/** RFC 9110 tchar. */
export const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;
export const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

// Connection header tokens
export const C_CLOSE = 1;
export const C_KEEP_ALIVE = 2;

/** A malformed request: the code of the answer (its status from the error catalogue) and a message naming the problem. */
export class ParseError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.status = CATALOGUE[code][0];
  }
}

export function bad(code: CodeWithStatus<400>, message: string): ParseError {
  return new ParseError(code, message);
}

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** A bare LF, or a CR followed by something other than LF, at or after `from`. */
export function badLineEnd(buf: Buffer, from: number): boolean {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) if (i === 0 || buf[i - 1] !== 13) return true;
  const last = buf.length - 1;
  for (let i = buf.indexOf(13, from); i !== -1 && i < last; i = buf.indexOf(13, i + 1)) if (buf[i + 1] !== 10) return true;
  return false;
}

/** C_CLOSE / C_KEEP_ALIVE bits of a Connection field value. */
export function connectionFlags(v: string): number {
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
