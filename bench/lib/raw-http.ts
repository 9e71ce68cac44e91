// A raw HTTP/1.1 client for bench:hostile: exact bytes out (pipelined, trickled, never read), and
// complete responses counted as they arrive.
import { connect } from 'node:net';
import type { Socket } from 'node:net';

/** Counts complete HTTP/1.1 responses (Content-Length or chunked) in a byte stream. */
export class Answers {
  count = 0;
  bytes = 0;
  statuses: number[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  push(d: Buffer): void {
    this.bytes += d.length;
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    for (;;) {
      const used = this.one();
      if (used === 0) break;
      this.buf = this.buf.subarray(used);
    }
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Bytes of the first complete response in the buffer (0: incomplete). */
  private one(): number {
    const he = this.buf.indexOf('\r\n\r\n');
    if (he === -1) return 0;
    const head = this.buf.subarray(0, he).toString('latin1');
    const status = Number(head.slice(9, 12));
    const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    let end: number;
    if (len) {
      end = he + 4 + Number(len[1]);
      if (this.buf.length < end) return 0;
    } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
      let p = he + 4;
      for (;;) {
        const le = this.buf.indexOf('\r\n', p);
        if (le === -1) return 0;
        const size = parseInt(this.buf.subarray(p, le).toString('latin1'), 16);
        if (size === 0) {
          const te = this.buf.indexOf('\r\n\r\n', le);
          if (te === -1) return 0;
          end = te + 4;
          break;
        }
        p = le + 2 + size + 2;
        if (this.buf.length < p) return 0;
      }
    } else end = he + 4;
    this.count++;
    this.statuses.push(status);
    return end;
  }

  /** Resolve when `n` responses are complete or `ms` has passed; true if they are. */
  async wait(n: number, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (this.count < n && Date.now() < until) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, until - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.count >= n;
  }
}

export function rawClient(port: number): { socket: Socket; answers: Answers; connected: Promise<void> } {
  const socket = connect({ port, host: '127.0.0.1' });
  const answers = new Answers();
  socket.on('data', (d: Buffer) => answers.push(d));
  socket.on('error', () => {});
  const connected = new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return { socket, answers, connected };
}

/** Write `data` in `size`-byte writes, waiting for the socket to drain between them (the kernel paces it). */
export async function writeAll(s: Socket, data: Buffer, size: number, until: number): Promise<boolean> {
  for (let o = 0; o < data.length; o += size) {
    if (s.destroyed || Date.now() > until) return false;
    if (!s.write(data.subarray(o, o + size))) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, until - Date.now()));
        const done = (): void => {
          clearTimeout(t);
          s.off('close', done);
          s.off('drain', done);
          r();
        };
        s.once('drain', done);
        s.once('close', done);
      });
    }
  }
  return !s.destroyed;
}

export function chatRequest(body: string, extra = ''): string {
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
