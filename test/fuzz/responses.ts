// Reading the server's answers off a raw socket: HTTP/1.1 responses framed by Content-Length,
// chunked, or the end of the connection; interim 1xx answers told apart; anything that cannot be
// a response reported as malformed (a server that writes broken framing is a failure too).

export interface Response {
  status: number;
  /** Lower-cased names; repeated fields joined with ', '. */
  headers: Record<string, string>;
  body: Buffer;
}

const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: [^\r\n]*)?$/;

/** Incrementally parses the responses on one connection. */
export class ResponseReader {
  readonly finals: Response[] = [];
  interim = 0;
  malformed: string | undefined;
  /** Bytes received in all. */
  received = 0;
  private buf: Buffer = Buffer.alloc(0);
  private closed = false;

  /** Bytes after the `expected` responses that do not parse as one (not malformed: the exchange was complete). */
  trailing = 0;

  /** `expected`: the final responses the exchange should have; `isHead(i)`: the i-th answers a HEAD request. */
  constructor(
    private readonly expected: number,
    private readonly isHead: (i: number) => boolean,
  ) {}

  private bad(why: string): void {
    if (this.finals.length >= this.expected && this.expected > 0) this.trailing = this.buf.length;
    else this.malformed = why;
  }

  push(chunk: Buffer): void {
    this.received += chunk.length;
    if (this.malformed !== undefined) return;
    if (this.trailing > 0) {
      this.trailing += chunk.length;
      return;
    }
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    this.parse();
  }

  /** The connection ended: a body delimited by the close is complete now. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.malformed === undefined && this.trailing === 0) this.parse();
  }

  /** Bytes of an incomplete response still held (a response cut by the close). */
  get pending(): number {
    return this.buf.length;
  }

  private parse(): void {
    for (;;) {
      const he = this.buf.indexOf('\r\n\r\n');
      if (he === -1) {
        if (this.buf.length > 64 * 1024) this.bad('a response head over 64 KiB');
        else if (this.buf.length >= 5 && !this.buf.subarray(0, 5).equals(Buffer.from('HTTP/'))) this.bad(`not a status line: ${preview(this.buf)}`);
        return;
      }
      const lines = this.buf.toString('latin1', 0, he).split('\r\n');
      const m = STATUS_LINE.exec(lines[0] ?? '');
      if (m === null) {
        this.bad(`not a status line: ${preview(this.buf)}`);
        return;
      }
      const status = Number(m[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const c = l.indexOf(':');
        if (c <= 0) {
          this.bad(`bad response header line ${JSON.stringify(l)}`);
          return;
        }
        const name = l.slice(0, c).toLowerCase();
        const value = l.slice(c + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      let p = he + 4;
      let body: Buffer = Buffer.alloc(0);
      if (status < 200) {
        this.interim++;
        this.buf = this.buf.subarray(p);
        continue;
      }
      if (status === 204 || status === 304 || this.isHead(this.finals.length)) {
        // no body
      } else if (headers['transfer-encoding'] !== undefined) {
        if (headers['transfer-encoding'].toLowerCase() !== 'chunked') {
          this.bad(`response transfer-encoding ${headers['transfer-encoding']}`);
          return;
        }
        const d = dechunk(this.buf, p);
        if (d === 'malformed') {
          this.bad(`bad chunked response body: ${preview(this.buf.subarray(p))}`);
          return;
        }
        if (d === null) return;
        body = d.body;
        p = d.end;
      } else if (headers['content-length'] !== undefined) {
        if (!/^\d+$/.test(headers['content-length'])) {
          this.bad(`response content-length ${JSON.stringify(headers['content-length'])}`);
          return;
        }
        const n = Number(headers['content-length']);
        if (this.buf.length < p + n) return;
        body = this.buf.subarray(p, p + n);
        p += n;
      } else {
        // delimited by the end of the connection (HTTP/1.0 style)
        if (!this.closed) return;
        body = this.buf.subarray(p);
        p = this.buf.length;
      }
      this.finals.push({ status, headers, body: Buffer.from(body) });
      this.buf = this.buf.subarray(p);
      if (this.buf.length === 0) return;
    }
  }
}

/** The chunked body starting at `p`: its bytes and where it ends; null when incomplete. */
function dechunk(buf: Buffer, p: number): { body: Buffer; end: number } | null | 'malformed' {
  const parts: Buffer[] = [];
  for (;;) {
    const le = buf.indexOf('\r\n', p);
    if (le === -1) return buf.length - p > 1024 ? 'malformed' : null;
    const sizeText = buf.toString('latin1', p, le).split(';')[0]?.trim() ?? '';
    if (!/^[0-9a-fA-F]{1,16}$/.test(sizeText)) return 'malformed';
    const size = parseInt(sizeText, 16);
    if (size === 0) {
      // trailers, then an empty line
      let q = le + 2;
      for (;;) {
        const te = buf.indexOf('\r\n', q);
        if (te === -1) return null;
        if (te === q) return { body: Buffer.concat(parts), end: te + 2 };
        q = te + 2;
      }
    }
    if (buf.length < le + 2 + size + 2) return null;
    if (buf[le + 2 + size] !== 13 || buf[le + 3 + size] !== 10) return 'malformed';
    parts.push(buf.subarray(le + 2, le + 2 + size));
    p = le + 2 + size + 2;
  }
}

/** Printable start of some bytes, for messages. */
export function preview(b: Buffer, n = 120): string {
  const s = JSON.stringify(b.toString('latin1', 0, Math.min(b.length, n)));
  return b.length > n ? `${s}…(${b.length} bytes)` : s;
}
