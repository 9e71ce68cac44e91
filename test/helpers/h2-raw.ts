// Raw HTTP/2 frames for tests: what node:http2's client will not send (any header, a RST after a
// HEADERS, a window never opened) and a client that parses frames as it reads, or never reads.
import { once } from 'node:events';
import { constants } from 'node:http2';
import { connect } from 'node:net';
import type { Socket } from 'node:net';

import type { Cleanup } from './h2.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export function frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1). */
function hpackInt(v: number, prefix: number): number[] {
  const max = (1 << prefix) - 1;
  if (v < max) return [v];
  const out = [max];
  v -= max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** Fields as literals without indexing, new names (RFC 7541 §6.2.2): any name, any value, in the order given. */
export function hpack(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [n, v] of fields) {
    const nb = Buffer.from(n, 'latin1');
    const vb = Buffer.from(v, 'latin1');
    out.push(0, ...hpackInt(nb.length, 7), ...nb, ...hpackInt(vb.length, 7), ...vb);
  }
  return Buffer.from(out);
}

export const SETTINGS = (pairs: [number, number][] = []): Buffer => {
  const b = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([k, v], i) => {
    b.writeUInt16BE(k, 6 * i);
    b.writeUInt32BE(v, 6 * i + 2);
  });
  return frame(4, 0, 0, b);
};
export const HEADERS = (id: number, fields: readonly (readonly [string, string])[], end = true): Buffer => frame(1, 0x4 | (end ? 1 : 0), id, hpack(fields));
export const DATA = (id: number, data: string, end = false): Buffer => frame(0, end ? 1 : 0, id, Buffer.from(data));
export const RST = (id: number, code: number = constants.NGHTTP2_CANCEL): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(code);
  return frame(3, 0, id, b);
};
export const WINDOW_UPDATE = (id: number, inc: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(inc);
  return frame(8, 0, id, b);
};
export const get = (path: string, method = 'GET'): [string, string][] => [
  [':method', method],
  [':scheme', 'http'],
  [':path', path],
  [':authority', 'x'],
];

export interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A raw HTTP/2 client: writes what it is told, parses what it reads (while it reads). */
export class Raw {
  readonly frames: Frame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);

  private constructor(readonly sock: Socket) {
    sock.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        const b = this.buf;
        this.frames.push({ type: b[3] as number, flags: b[4] as number, id: b.readUInt32BE(5) & 0x7fffffff, payload: b.subarray(9, 9 + len) });
        this.buf = b.subarray(9 + len);
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', () => (this.closed = true));
  }

  /** Connect to `port`, send the preface and a SETTINGS frame; the socket is destroyed by `cleanup`. */
  static async open(cleanup: Cleanup, port: number, settings: [number, number][] = []): Promise<Raw> {
    const sock = connect(port, '127.0.0.1');
    cleanup.push(() => {
      sock.destroy();
    });
    await once(sock, 'connect');
    const r = new Raw(sock);
    sock.write(Buffer.concat([PREFACE, SETTINGS(settings)]));
    return r;
  }

  send(...b: Buffer[]): void {
    this.sock.write(Buffer.concat(b));
  }

  /** Whether stream `id` got a response head. */
  answered(id: number): boolean {
    return this.frames.some((f) => f.id === id && f.type === 1);
  }

  reset(id: number): number | undefined {
    const f = this.frames.find((x) => x.id === id && x.type === 3);
    return f === undefined ? undefined : f.payload.readUInt32BE(0);
  }
}

/** A client that never reads: a plain socket with no 'data' listener stays paused. */
export async function deafSocket(cleanup: Cleanup, port: number, first: Buffer): Promise<Socket> {
  const sock = connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  cleanup.push(() => {
    sock.destroy();
  });
  await once(sock, 'connect');
  sock.write(first);
  return sock;
}
