// HTTP/2 clients and a data-plane front on port 0 for the HTTP/2 tests: each test file keeps its own
// list of things to close (`Cleanup`) and empties it after every test.
import { connect as h2connect } from 'node:http2';
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders, SecureClientSessionOptions } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';
import { createFrontServer } from '../../src/gateway/front.js';
import type { FrontHandler, FrontOptions } from '../../src/gateway/front.js';

export type Cleanup = (() => Promise<void> | void)[];
export type Front = ReturnType<typeof createFrontServer>;

/** A front on 127.0.0.1:0 serving HTTP/1.1 and HTTP/2 (16 streams per connection unless `opts` says otherwise). */
export async function startFront(
  cleanup: Cleanup,
  handler: FrontHandler,
  opts: Partial<FrontOptions> = {},
): Promise<{ server: Front; url: string; port: number }> {
  const server = createFrontServer(handler, { maxBodyBytes: 1 << 20, http2: { maxConcurrentStreams: 16 }, ...opts });
  cleanup.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, url: `http://127.0.0.1:${port}`, port };
}

/** An HTTP/2 connection (prior knowledge), once the server's SETTINGS have arrived. */
export function h2Session(cleanup: Cleanup, url: string, opts: SecureClientSessionOptions = {}): Promise<ClientHttp2Session> {
  const s = h2connect(url, opts);
  s.on('error', () => undefined);
  cleanup.push(() => {
    s.destroy();
  });
  return new Promise((resolve, reject) => {
    s.once('remoteSettings', () => resolve(s));
    s.once('error', reject);
  });
}

export interface H2Result {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on `s`, its whole answer. */
export function h2Call(s: ClientHttp2Session, headers: OutgoingHttpHeaders, body?: string | Buffer): Promise<H2Result> {
  return new Promise((resolve, reject) => {
    const req = s.request(headers, { endStream: body === undefined });
    let h: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on('response', (r) => (h = r));
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve({ status: Number(h[':status']), headers: h, body: Buffer.concat(chunks).toString('utf8') }));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
  });
}

/** A stream on `s` whose errors are its outcome's business (a reset is read from `rstCode`). */
export function h2Request(s: ClientHttp2Session, headers: OutgoingHttpHeaders, endStream = true): ClientHttp2Stream {
  const st = s.request(headers, { endStream });
  st.on('error', () => undefined);
  return st;
}

/** How a stream ended: whole (`ended`), or reset (`rstCode`), and the body it got. */
export function h2Outcome(st: ClientHttp2Stream): Promise<{ ended: boolean; rstCode: number; body: string }> {
  let ended = false;
  let body = '';
  st.on('data', (c: Buffer) => (body += c.toString()));
  st.on('end', () => (ended = true));
  return new Promise((resolve) => st.once('close', () => resolve({ ended, rstCode: st.rstCode ?? 0, body })));
}

/** A test file's HTTP/2 kit: its cleanup list, emptied after every test, and fronts and sessions that it closes. */
export function h2Kit(): {
  cleanup: Cleanup;
  start: (handler: FrontHandler, opts?: Partial<FrontOptions>) => ReturnType<typeof startFront>;
  session: (url: string, opts?: SecureClientSessionOptions) => Promise<ClientHttp2Session>;
} {
  const cleanup: Cleanup = [];
  afterEach(async () => {
    while (cleanup.length) await cleanup.pop()!();
  });
  return {
    cleanup,
    start: (handler, opts = {}) => startFront(cleanup, handler, opts),
    session: (url, opts = {}) => h2Session(cleanup, url, opts),
  };
}
