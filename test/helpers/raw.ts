// A raw HTTP/1.1 client for tests: exact bytes out, everything received kept and parsed into responses.
import { connect } from 'node:net';
import type { Socket } from 'node:net';

export interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: string;
  raw: string;
}

/** Undo chunked framing from `p`; null when incomplete. */
function dechunk(text: string, p: number): { body: string; end: number } | null {
  let body = '';
  for (;;) {
    const le = text.indexOf('\r\n', p);
    if (le === -1) return null;
    const size = parseInt(text.slice(p, le), 16);
    if (size === 0) {
      if (text.length < le + 4) return null;
      return { body, end: le + 4 };
    }
    if (text.length < le + 2 + size + 2) return null;
    body += text.slice(le + 2, le + 2 + size);
    p = le + 2 + size + 2;
  }
}

/** Every complete response in `text` (latin1). `noBody(i)`: the i-th answers a HEAD. */
export function parseResponses(text: string, closed: boolean, noBody: (i: number) => boolean = () => false): Parsed[] {
  const out: Parsed[] = [];
  let pos = 0;
  while (pos < text.length) {
    const he = text.indexOf('\r\n\r\n', pos);
    if (he === -1) break;
    const lines = text.slice(pos, he).split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const c = l.indexOf(':');
      headers[l.slice(0, c).toLowerCase()] = l.slice(c + 1).trim();
    }
    let p = he + 4;
    let body = '';
    if (status < 200 || status === 204 || status === 304 || noBody(out.length)) {
      // no body
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (text.length < p + n) break;
      body = text.slice(p, p + n);
      p += n;
    } else if (headers['transfer-encoding'] === 'chunked') {
      const d = dechunk(text, p);
      if (d === null) break;
      body = d.body;
      p = d.end;
    } else {
      if (!closed) break;
      body = text.slice(p);
      p = text.length;
    }
    out.push({ status, headers, body, raw: text.slice(pos, p) });
    pos = p;
  }
  return out;
}

/** A raw client socket: exact bytes out, everything received kept. */
export class Raw {
  readonly socket: Socket;
  readonly chunks: Buffer[] = [];
  closed = false;
  private data = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  /** `localAddress`: connect from another loopback address (another client, as the server sees it). */
  constructor(port: number, localAddress?: string) {
    this.socket = connect(localAddress === undefined ? { port, host: '127.0.0.1' } : { port, host: '127.0.0.1', localAddress });
    this.socket.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.data = Buffer.concat([this.data, d]);
      this.wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('error', () => {});
  }

  get text(): string {
    return this.data.toString('latin1');
  }

  send(bytes: string | Buffer): this {
    this.socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
    return this;
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private next(): Promise<void> {
    return new Promise((r) => this.waiters.push(r));
  }

  async until(pred: () => boolean, what: string): Promise<void> {
    while (!pred()) {
      if (this.closed) throw new Error(`connection closed before ${what}; got ${JSON.stringify(this.text)}`);
      await this.next();
    }
  }

  async responses(n: number, noBody?: (i: number) => boolean): Promise<Parsed[]> {
    await this.until(() => parseResponses(this.text, this.closed, noBody).length >= n, `${n} responses`);
    return parseResponses(this.text, this.closed, noBody);
  }

  async close(): Promise<void> {
    while (!this.closed) await this.next();
  }
}
