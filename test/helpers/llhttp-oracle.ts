// Two readers of one request's bytes, for the differential test of the HTTP/1 core: the gateway's
// pure parser (HeadReader + bodyLength + BodyReader, as the front drives them) and Node's own
// (llhttp, through a real node:http server on loopback, one connection per case).
import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { BodyReader, bodyLength } from '../../src/gateway/http1/request-body.js';
import { HeadReader } from '../../src/gateway/http1/request-head.js';
import { ParseError } from '../../src/gateway/http1/syntax.js';

export const MAX_HEADER = 16 * 1024;
export const MAX_BODY = 64 * 1024;

/** What a reader made of the bytes: one request, a refusal, or "not all of it arrived". */
export type Reading =
  { kind: 'request'; method: string; url: string; headers: Record<string, string>; body: string } | { kind: 'reject'; why: string } | { kind: 'incomplete' };

/** Header fields as one record: names lowercased, repeated fields joined with ", " (Content-Length's equal repeats as one). */
function normalise(pairs: readonly (readonly [string, string])[]): Record<string, string> {
  const out: Record<string, string[]> = {};
  for (const [n, v] of pairs) (out[n.toLowerCase()] ??= []).push(v);
  const rec: Record<string, string> = {};
  for (const [n, vs] of Object.entries(out)) rec[n] = n === 'content-length' && vs.every((v) => v === vs[0]) ? vs[0]! : vs.join(', ');
  return rec;
}

/** The gateway's parser on the whole of `bytes` (as if it all arrived at once). */
export function ours(bytes: Buffer): Reading {
  try {
    const heads = new HeadReader(MAX_HEADER);
    const off = heads.read(bytes);
    if (off < 0) return { kind: 'incomplete' };
    const h = heads.head;
    const n = bodyLength(h.v11, heads.te, heads.cl, MAX_BODY);
    let body: Buffer = Buffer.alloc(0);
    if (n > 0) {
      if (bytes.length - off < n) return { kind: 'incomplete' };
      body = bytes.subarray(off, off + n);
    } else if (n === -1) {
      const r = new BodyReader(MAX_BODY, MAX_HEADER);
      r.chunked();
      r.feed(bytes, off);
      if (!r.done) return { kind: 'incomplete' };
      body = r.take();
    }
    const headers = normalise(Object.entries(h.headers));
    return { kind: 'request', method: h.method, url: h.url, headers, body: body.toString('latin1') };
  } catch (err) {
    if (err instanceof ParseError) return { kind: 'reject', why: err.code };
    throw err;
  }
}

/** A node:http server that reports what llhttp made of each connection's bytes. */
export class NodeOracle {
  private server!: Server;
  private port = 0;
  private readonly waiting = new Map<number, (r: Reading) => void>();
  /** Client ports whose first request node has read. */
  private readonly seen = new Set<number>();

  async start(): Promise<void> {
    this.server = createServer({ maxHeaderSize: MAX_HEADER, requireHostHeader: true, insecureHTTPParser: false, keepAlive: false });
    this.server.on('request', (req: IncomingMessage, res) => {
      // bytes after this request (a second, broken one) make node report an error before this one's
      // body events: the first request is the answer, so later errors on the connection are ignored
      this.seen.add(req.socket.remotePort ?? -1);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      const port = req.socket.remotePort;
      req.on('error', () => this.settle(port, { kind: 'reject', why: 'body' }));
      // the connection ended inside the body: node read a head and waits for the rest
      req.on('close', () => {
        if (!req.complete) this.settle(port, { kind: 'incomplete' });
      });
      req.on('end', () => {
        const pairs: [string, string][] = [];
        for (let i = 0; i < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
        this.settle(port, {
          kind: 'request',
          method: req.method ?? '',
          url: req.url ?? '',
          headers: normalise(pairs),
          body: Buffer.concat(chunks).toString('latin1'),
        });
        res.end();
      });
    });
    // an unmet Expect is answered 417 by node without a request event
    this.server.on('checkExpectation', (req: IncomingMessage, res) => {
      this.settle(req.socket.remotePort, { kind: 'reject', why: 'expectation' });
      res.writeHead(417).end();
    });
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
      if (this.seen.has(socket.remotePort ?? -1)) return;
      const code = err.code ?? 'unknown';
      this.settle(socket.remotePort, code === 'HPE_INVALID_EOF_STATE' ? { kind: 'incomplete' } : { kind: 'reject', why: code });
      socket.destroy();
    });
    // node's server keeps a half-closed connection open while a request waits for its body: when the
    // client's end has arrived and, one turn later, nothing was reported, node is waiting for more
    this.server.on('connection', (socket: Socket) => {
      const port = socket.remotePort;
      socket.on('end', () => setImmediate(() => setImmediate(() => this.settle(port, { kind: 'incomplete' }))));
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  private settle(port: number | undefined, r: Reading): void {
    if (port === undefined) return;
    const f = this.waiting.get(port);
    if (!f) return;
    this.waiting.delete(port);
    this.seen.delete(port);
    f(r);
  }

  /** Send `bytes` on a new connection, half-close it, and report the first request node read (or its refusal). */
  read(bytes: Buffer): Promise<Reading> {
    return new Promise((resolve, reject) => {
      const s = connect(this.port, '127.0.0.1');
      // the port is gone from the socket once it closes: kept here
      let port = -1;
      s.on('connect', () => {
        port = s.localPort!;
        this.waiting.set(port, (r) => {
          resolve(r);
          s.destroy();
        });
        s.end(bytes);
      });
      s.on('error', () => undefined);
      // what node answered: a refusal it makes without an event (a missing Host: 400) is only seen here
      let answer = '';
      s.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      s.on('close', () => {
        const f = this.waiting.get(port);
        if (!f) return;
        this.waiting.delete(port);
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1];
        // closed without a request or an error: a refusal by status, or node waited for more and the half-close ended it
        f(status !== undefined && status >= '400' ? { kind: 'reject', why: `status ${status}` } : { kind: 'incomplete' });
      });
      s.setTimeout(5_000, () => reject(new Error(`node:http gave no outcome within 5 s for ${JSON.stringify(bytes.toString('latin1').slice(0, 200))}`)));
    });
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
