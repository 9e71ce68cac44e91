// A follower replica's admin API: every call forwarded to the leader's admin API as it came (method,
// path, headers, body; the answer streamed back, the event stream included), so any replica takes admin
// calls. The leader authenticates and authorises them. No leader: 503 `no_leader`; a leader that cannot be
// reached: 502 `leader_unreachable`. Connections are not kept alive: a replica's role can change between calls.
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request } from 'undici';
import { answerClientError } from '../api/client-error.js';
import { refuseConnect } from '../api/server.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, errorBody, UnavailableError, UpstreamError } from '../errors.js';
import type { GlidepathError } from '../errors.js';

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1), the ones the forwarder sets itself, and `expect` (node:http
 * has already answered 100 Continue to the client; undici refuses to send it on).
 */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'expect']);

function forwardable(h: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  // and the headers `Connection` names: hop-by-hop too
  const named = new Set(
    String(h.connection ?? '')
      .split(',')
      .map((x) => x.trim().toLowerCase())
      .filter((x) => x !== ''),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP.has(k.toLowerCase()) && !named.has(k.toLowerCase())) out[k] = v;
  return out;
}

/**
 * The leader's URL for a request target: only an origin-form path under the admin API (`/admin/v1/…`)
 * is forwarded, onto the leader's origin — never a target that names another host (`//host/…`,
 * `http://host/…`), which would make every follower an open proxy.
 */
export function forwardTarget(leader: string, target: string | undefined): URL | undefined {
  if (target === undefined || !target.startsWith('/admin/v1/') || target.includes('\\')) return undefined;
  const u = new URL(leader);
  const q = target.indexOf('?');
  u.pathname = q < 0 ? target : target.slice(0, q);
  u.search = q < 0 ? '' : target.slice(q);
  return u;
}

function fail(res: ServerResponse, e: GlidepathError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(e);
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
  const retryAfterS = e.retryAfterS ?? (e.status >= 500 ? 1 : undefined);
  if (retryAfterS !== undefined) headers['retry-after'] = String(retryAfterS);
  res.writeHead(e.status, headers);
  res.end(body);
}

/**
 * `leader()`: the leader's admin URL now; `self()`: this replica's (a call is never forwarded to
 * itself); `local()`: how this replica's own admin server answers a request, once it leads. A call that
 * reached the forwarder on a connection accepted while following, and finds this replica leading, is
 * answered by that server (a leader must not reset calls in flight at its election, nor answer them
 * `no_leader`). `refuse(req)`: why the admin port's admission refuses a call (a client past its rate),
 * answered here with its code and `Retry-After`, never sent on.
 */
export function createForwarder(
  leader: () => string | undefined,
  self: () => string | undefined,
  local: () => ((req: IncomingMessage, res: ServerResponse) => void) | undefined = () => undefined,
  refuse: (req: IncomingMessage) => GlidepathError | undefined = () => undefined,
): Server {
  // each socket's call: a client error on it must not write into an answer already under way
  const inFlight = new WeakMap<Duplex, ServerResponse>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    inFlight.set(req.socket, res);
    // one call per connection: once this replica leads, the client's next connection reaches its own admin server
    res.shouldKeepAlive = false;
    const to = leader();
    const own = to !== undefined && to === self() ? local() : undefined;
    if (own !== undefined) {
      own(req, res);
      return;
    }
    const refused = refuse(req);
    if (refused !== undefined) {
      req.resume();
      fail(res, refused);
      return;
    }
    const url = to === undefined ? undefined : forwardTarget(to, req.url);
    if (to !== undefined && url === undefined) {
      req.resume();
      fail(
        res,
        new BadRequestError(
          'invalid_path',
          `only the admin API's paths (/admin/v1/…) are forwarded to the leader, not ${JSON.stringify((req.url ?? '').slice(0, 200))}`,
        ),
      );
      return;
    }
    if (to === undefined || url === undefined || to === self()) {
      req.resume();
      fail(res, new UnavailableError('no_leader', 'no replica leads the cluster right now (an election is under way, or etcd is unreachable); retry'));
      return;
    }
    void forward(to, url, req, res).catch((err: unknown) => {
      fail(res, new UpstreamError('leader_unreachable', `could not forward to the leader at ${to}: ${(err as Error).message}`));
    });
  });
  // malformed HTTP gets the catalogue's code and JSON body, as on the leader's admin server
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, inFlight.get(socket)));
  server.on('connect', refuseConnect);
  return server;
}

async function forward(to: string, url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const len = req.headers['content-length'];
  const headers = forwardable(req.headers);
  if (len !== undefined) headers['content-length'] = len;
  const r = await request(url, {
    method: (req.method ?? 'GET') as 'GET',
    headers,
    body: hasBody ? req : undefined,
    headersTimeout: DEFAULTS.cluster.forwardHeadersTimeoutMs,
    // the event stream stays open as long as the client keeps it
    bodyTimeout: 0,
  });
  res.writeHead(r.statusCode, { ...forwardable(r.headers), 'x-glidepath-leader': to });
  res.on('close', () => r.body.destroy());
  await pipeline(r.body, res).catch(() => undefined);
}
