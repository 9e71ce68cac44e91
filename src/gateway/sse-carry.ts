// An SSE event not yet complete, held between reads: each read is copied once and only its own bytes are searched for the blank line that ends the event.

/** The longest event a stream may send: SSE sets no limit, and a worker's garbage must not hold a client's memory. */
export const MAX_EVENT_BYTES = 1 << 20;

const LFLF = Buffer.from('\n\n');

/**
 * Whether `chunk`, following bytes whose last is `last` (a held event's), holds the blank line that
 * ends an event: two line ends in a row, each LF, CR or CRLF (as SSE allows). No held event ever
 * holds one, so only the new bytes are searched. LF only (every engine): two native searches.
 */
function completes(last: number, chunk: Buffer): boolean {
  if (last !== 13 && chunk.indexOf(13) === -1) return (last === 10 && chunk[0] === 10) || chunk.indexOf(LFLF) !== -1;
  let eol = last === 10 || last === 13;
  let cr = last === 13;
  for (let i = 0; i < chunk.length; i++) {
    const c = chunk[i];
    if (c === 10) {
      // the LF of a CRLF ends no second line
      if (cr) cr = false;
      else if (eol) return true;
      else eol = true;
    } else if (c === 13) {
      if (eol) return true;
      eol = cr = true;
    } else eol = cr = false;
  }
  return false;
}

/** The index just past the last blank line of `b` (0: none), line ends as in `completes`. */
export function lastEventEnd(b: Buffer): number {
  if (b.indexOf(13) === -1) {
    const i = b.lastIndexOf(LFLF);
    return i === -1 ? 0 : i + 2;
  }
  let end = 0;
  let eol = false;
  let cr = false;
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c === 10) {
      if (cr) {
        cr = false;
        // a CRLF that ended an event: the event ends after its LF
        if (end === i) end = i + 1;
      } else if (eol) {
        end = i + 1;
        eol = false;
      } else eol = true;
    } else if (c === 13) {
      if (eol) {
        end = i + 1;
        eol = false;
      } else eol = true;
      cr = true;
    } else eol = cr = false;
  }
  return end;
}

export class EventCarry {
  /** The held bytes (ours, never a borrowed read buffer), from 0 to `len`; room to grow past it. */
  private buf: Buffer | null = null;
  private len = 0;

  get held(): boolean {
    return this.buf !== null;
  }

  /** Hold `tail`, an event's beginning (copied when `borrowed`: the read buffer it is in is reused). False past MAX_EVENT_BYTES. */
  hold(tail: Buffer, borrowed: boolean): boolean {
    if (tail.length > MAX_EVENT_BYTES) return false;
    this.buf = borrowed ? Buffer.from(tail) : tail;
    this.len = tail.length;
    return true;
  }

  /**
   * The next read: when it ends the held event, the held bytes and it in one buffer (ours), and the
   * carry is empty; otherwise it is held too ('held'), or the event is too long and dropped ('too_long').
   */
  join(chunk: Buffer): Buffer | 'held' | 'too_long' {
    const buf = this.buf as Buffer;
    const len = this.len;
    if (completes(buf[len - 1] as number, chunk)) {
      const b = Buffer.allocUnsafe(len + chunk.length);
      buf.copy(b, 0, 0, len);
      b.set(chunk, len);
      this.clear();
      return b;
    }
    const n = len + chunk.length;
    if (n > MAX_EVENT_BYTES) {
      this.clear();
      return 'too_long';
    }
    if (n > buf.length) {
      // doubling: a trickle of small reads copies each byte a bounded number of times
      const bigger = Buffer.allocUnsafe(Math.max(buf.length * 2, n));
      buf.copy(bigger, 0, 0, len);
      this.buf = bigger;
    }
    (this.buf as Buffer).set(chunk, len);
    this.len = n;
    return 'held';
  }

  clear(): void {
    this.buf = null;
    this.len = 0;
  }
}
