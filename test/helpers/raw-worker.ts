// A raw TCP worker that answers with exact bytes, and a recording handler for the gateway's upstream client (test/unit/gateway/upstream*.test.ts).
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { UpstreamController, UpstreamHandler, UpstreamPool } from '../../src/gateway/upstream.js';

export interface Result {
  status: number;
  contentType: string | undefined;
  /** Each onResponseData call's bytes (and the tail that came with the end). */
  parts: string[];
  error: Error | undefined;
  events: string[];
  /** What onRequestSent said (-1: not called). */
  queuedMs: number;
}

/** A handler that records everything; resolves when the exchange ends either way. */
export function call(
  pool: UpstreamPool,
  path = '/v1/completions',
  stream = false,
  body = '{"a":1}',
  onData?: () => void,
  /** The handler's priority (its queue lane); undefined: it has none. */
  lane?: number,
): { done: Promise<Result>; ctl: () => UpstreamController; r: Result } {
  const r: Result = { status: 0, contentType: undefined, parts: [], error: undefined, events: [], queuedMs: -1 };
  let ctl: UpstreamController | undefined;
  let resolve!: (x: Result) => void;
  const done = new Promise<Result>((res) => (resolve = res));
  const h: UpstreamHandler = {
    onRequestStart(c) {
      ctl = c;
      r.events.push('start');
    },
    onRequestSent(queuedMs) {
      r.queuedMs = queuedMs;
      r.events.push('sent');
    },
    onResponseStart(_c, status, ct) {
      r.status = status;
      r.contentType = ct;
      r.events.push('head');
    },
    onResponseData(_c, chunk) {
      r.parts.push(chunk.toString('latin1'));
      onData?.();
    },
    onResponseEnd(tail) {
      if (tail !== undefined) r.parts.push(tail.toString('latin1'));
      r.events.push('end');
      resolve(r);
    },
    onResponseError(_c, err) {
      r.error = err;
      r.events.push('error');
      resolve(r);
    },
  };
  if (lane !== undefined) h.priority = () => lane;
  pool.dispatch(path, stream, Buffer.from(body), h);
  return { done, ctl: () => ctl as UpstreamController, r };
}

export interface RawServer {
  port: number;
  /** Request heads+bodies received, per connection index. */
  requests: string[];
  connections: number;
  sockets: net.Socket[];
  closed: Promise<void>[];
  close(): Promise<void>;
}

/**
 * A TCP server that answers each complete request (head + Content-Length body) with `answer(i)`'s
 * byte pieces, written one by one (each piece its own write).
 */
export async function rawServer(answer: (i: number, sock: net.Socket) => (string | Buffer)[] | undefined): Promise<RawServer> {
  const st: RawServer = { port: 0, requests: [], connections: 0, sockets: [], closed: [], close: () => Promise.resolve() };
  const srv = net.createServer((sock) => {
    st.connections++;
    st.sockets.push(sock);
    st.closed.push(new Promise((r) => sock.once('close', () => r())));
    sock.on('error', () => undefined);
    let buf = '';
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (;;) {
        const e = buf.indexOf('\r\n\r\n');
        if (e === -1) return;
        const m = /content-length: (\d+)/i.exec(buf.slice(0, e));
        const len = m ? Number(m[1]) : 0;
        if (buf.length < e + 4 + len) return;
        const req = buf.slice(0, e + 4 + len);
        buf = buf.slice(e + 4 + len);
        const i = st.requests.length;
        st.requests.push(req);
        const pieces = answer(i, sock);
        if (pieces) for (const p of pieces) sock.write(p);
      }
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  st.port = (srv.address() as AddressInfo).port;
  st.close = () =>
    new Promise<void>((r) => {
      for (const s of st.sockets) s.destroy();
      srv.close(() => r());
    });
  return st;
}

export const json = (body: string, extra = '') => `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n${extra}\r\n${body}`;
