// A test's data-plane HTTP/1.1 server (src/gateway/front.ts) on port 0: an echo handler, raw request builders, and the closing of every server started.
import type { AddressInfo } from 'node:net';
import { createFrontServer } from '../../src/gateway/front.js';
import type { Parsed } from './raw.js';
import type { FrontHandler, FrontOptions, FrontRequest } from '../../src/gateway/front.js';

export type Front = ReturnType<typeof createFrontServer>;

const servers: Front[] = [];

/** Close every server started (a test file's afterEach). */
export async function closeFronts(): Promise<void> {
  while (servers.length) {
    const s = servers.pop()!;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
}

export interface Started {
  server: Front;
  port: number;
  url: string;
  /** Requests the handler has seen. */
  seen: FrontRequest[];
}

/** Echo: the request as JSON, with a content-length. */
export const echo: FrontHandler = (req, res) => {
  const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: req.body.toString('latin1'), v: req.httpVersion });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

export async function start(handler: FrontHandler = echo, opts: Partial<FrontOptions> = {}): Promise<Started> {
  const seen: FrontRequest[] = [];
  const server = createFrontServer(
    (req, res) => {
      seen.push(req);
      handler(req, res);
    },
    { maxBodyBytes: 1 << 20, ...opts },
  );
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://127.0.0.1:${port}`, seen };
}

export function get(path = '/', extra = ''): string {
  return `GET ${path} HTTP/1.1\r\nHost: a\r\n${extra}\r\n`;
}

export function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: a\r\nContent-Length: ${Buffer.byteLength(body, 'latin1')}\r\n${extra}\r\n${body}`;
}

export interface Echoed {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  v: string;
}

export function echoed(p: Parsed): Echoed {
  return JSON.parse(p.body) as Echoed;
}

export function tick(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}
