// The admin REST API under /admin/v1: the listener (connection admission, rate limits), then
// authentication, role checks, body parsing and error rendering around the routes of src/api/routes/.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import { BadRequestError, errorBody, GlidepathError, MethodNotAllowedError, UnsupportedMediaTypeError } from '../errors.js';
import type { ListenerLimitsConfig } from '../config/types.js';
import { admission } from '../gateway/server.js';
import type { Admission, ClosableServer } from '../gateway/server.js';
import { requestRefusal } from '../gateway/limits.js';
import { refuseConnection } from '../gateway/http1/response-writer.js';
import { defaultErrorBody } from '../gateway/http1/server-options.js';
import { isValidHost } from '../gateway/http1/host.js';
import type { Authenticator } from './auth.js';
import { zodMessage } from '../config/issues.js';
import { Router, readJson, sendErr, sendJsonRes } from './router.js';
import type { Ctx } from './router.js';
import { openApiDocument } from './openapi.js';
import { adminRoutes } from './routes/index.js';
import type { AdminContext } from './routes/index.js';
import { RAW } from './routes/context.js';
import { Dashboard } from './dashboard.js';
import { DEFAULT_SESSION_LIMITS, LoginThrottle, SessionStore } from './session.js';
import { defaultWebRoot } from './static.js';
import { SeriesRecorder } from './series.js';
import { answerClientError } from './client-error.js';

export const API_PREFIX = '/admin/v1';

export function buildRouter(ctx: AdminContext, series: SeriesRecorder = new SeriesRecorder(ctx.cp)): Router {
  const r = new Router();
  for (const d of adminRoutes(ctx, series)) r.add(d);
  r.add({ method: 'GET', path: '/openapi.json', role: 'viewer', summary: 'this API as an OpenAPI 3.1 document', handler: () => openApiDocument(r.list()) });
  return r;
}

export interface AdminServerOptions {
  /** Where the dashboard's built front end is (default: dist/web of this package). */
  webRoot?: string;
  /** The dashboard sessions' lifetimes (default: the config's `auth.session_idle_ms`, `auth.session_max_ms`). */
  sessions?: { idleMs: number; maxMs: number };
  /** The clock of the sessions and the login throttle (tests move it). */
  now?: () => number;
  /**
   * Connections are admitted by the caller's listener with this admission (a cluster replica's admin
   * port, src/control/cluster.ts): the server returned is the bare HTTP server, which refuses a client's
   * requests past its rate with it. Without it, `limits` makes the server's own admission.
   */
  admission?: Admission;
}

/** The admin API's listener, and `answer`: its HTTP server's handling of a request parsed elsewhere. */
export type AdminServer = ClosableServer & { answer: (req: IncomingMessage, res: ServerResponse) => void };

/**
 * The admin API's listener. With `limits`, connections are admitted first (the connection ceiling
 * and per-address limits, as on the data plane) and only admitted ones reach the HTTP server.
 * It serves the dashboard too (/dashboard/, src/api/dashboard.ts).
 */
export function createAdminServer(ctx: AdminContext, auth: Authenticator, limits?: ListenerLimitsConfig, opts: AdminServerOptions = {}): AdminServer {
  const series = new SeriesRecorder(ctx.cp);
  const router = buildRouter(ctx, series);
  const now = opts.now ?? Date.now;
  const { sessionIdleMs: idleMs, sessionMaxMs: maxMs } = ctx.cp.cfg.auth;
  const sessions = new SessionStore({ ...DEFAULT_SESSION_LIMITS, ...(opts.sessions ?? { idleMs, maxMs }) }, now);
  const throttle = new LoginThrottle(undefined, undefined, now);
  const dash = new Dashboard(auth, ctx.cp.store, { webRoot: opts.webRoot ?? defaultWebRoot(), sessions, throttle });
  const adm = opts.admission ?? (limits === undefined ? undefined : admission('admin', limits, ctx.cp.dp.telemetry));
  // each socket's current response: a client error on it must not write into one already under way
  const inFlight = new WeakMap<Duplex, ServerResponse>();
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    inFlight.set(req.socket, res);
    void handle(ctx, router, auth, dash, adm, req, res);
  });
  // malformed HTTP (an oversized head, a control character in a header…) gets the catalogue's code
  // and JSON body, as every other refusal of this listener; node:http alone sends a bare 400 or 431
  http.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, inFlight.get(socket)));
  series.start();
  http.on('close', () => series.stop());
  http.on('connect', refuseConnect);
  /** A request another server parsed (a cluster replica's forwarder, once this replica leads) is answered as one of this listener's. */
  const answer = (req: IncomingMessage, res: ServerResponse): void => void http.emit('request', req, res);
  if (adm === undefined || opts.admission !== undefined) return Object.assign(http, { answer });
  const front = admittingListener(adm, () => http);
  // node:http starts enforcing its header and request timeouts on 'listening'; it never listens itself here
  front.on('listening', () => http.emit('listening'));
  front.on('close', () => {
    http.close();
    series.stop();
  });
  return Object.assign(front, { closeAllConnections: () => http.closeAllConnections(), answer });
}

/**
 * A listener that admits connections by `adm` (the connection ceiling and per-address limits, as on the
 * data plane: a refused one gets its 503 or 429 and is closed) and hands the admitted ones to `to()`.
 */
export function admittingListener(adm: Admission, to: () => Pick<Server, 'emit'>): NetServer {
  const front = createNetServer((socket) => {
    const addr = socket.remoteAddress ?? '';
    const why = adm.limits.admit(addr);
    if (why !== undefined) {
      adm.refused(why, addr);
      refuseConnection(socket, why, adm.limits, defaultErrorBody);
      return;
    }
    socket.once('close', () => adm.limits.close(addr));
    to().emit('connection', socket);
  });
  adm.watch(front);
  return front;
}

/** Why the admission refuses this request (a client past its rate; the listener at its ceiling), or nothing. */
export function refusedRequest(adm: Admission, req: IncomingMessage): GlidepathError | undefined {
  const addr = req.socket.remoteAddress ?? '';
  const r = requestRefusal(adm.limits, null, false, addr, req.method ?? '', req.url ?? '');
  if (r === undefined) return undefined;
  adm.refused(r.why, addr);
  // 429 for one client's excess, 503 when the whole listener is at its ceiling (as on the data plane)
  return new GlidepathError(r.code, r.message, { retryAfterS: r.retryAfterS });
}

/** CONNECT is no admin method: node:http would drop the connection without a word (the admin server's and a follower's forwarder's answer). */
export function refuseConnect(_req: IncomingMessage, socket: Duplex): void {
  const body = errorBody(new MethodNotAllowedError('CONNECT is not supported by the admin API'));
  socket.on('error', () => undefined);
  socket.end(
    `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** A path to match routes with: decoded segments are checked by the router; here the target must parse at all. */
function adminUrl(target: string): URL {
  try {
    return new URL(target, 'http://admin');
  } catch {
    throw new BadRequestError('invalid_path', `the request target ${JSON.stringify(target.slice(0, 200))} is not a valid path`);
  }
}

async function handle(
  { cp }: AdminContext,
  router: Router,
  auth: Authenticator,
  dash: Dashboard,
  adm: Admission | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  try {
    const refused = adm === undefined ? undefined : refusedRequest(adm, req);
    if (refused !== undefined) throw refused;
    // RFC 9112 §3.2: one Host with a valid value (node:http already requires one on HTTP/1.1)
    const host = req.headers.host;
    if (host !== undefined && !isValidHost(host)) throw new BadRequestError('invalid_host', `invalid Host header value ${JSON.stringify(host.slice(0, 64))}`);
    const url = adminUrl(req.url ?? '/');
    if (Dashboard.owns(url.pathname)) {
      await dash.handle(req, res, url.pathname);
      return;
    }
    if (!url.pathname.startsWith(API_PREFIX)) {
      throw new BadRequestError('not_admin_path', `admin endpoints live under ${API_PREFIX}/ and the dashboard under /dashboard/ (got ${url.pathname})`);
    }
    const path = url.pathname.slice(API_PREFIX.length) || '/';
    const { route, params } = router.match(req.method ?? 'GET', path);
    // the OpenAPI document is public so tools can discover the API; everything else needs a token
    // a bearer token, or the dashboard's session cookie (with its CSRF token for a change)
    const principal = path === '/openapi.json' ? { name: 'anonymous', role: 'viewer' as const } : dash.principal(req, route.method);
    try {
      auth.require(principal, route.role, `${route.method} ${API_PREFIX}${route.path}`);
    } catch (err) {
      // a known token attempting a change it may not make is worth a line in the audit log
      if (route.method !== 'GET') {
        await cp.store.appendAudit({
          at: Date.now(),
          actor: principal.name,
          action: 'denied',
          target: `${route.method} ${path}`,
          params: { role: principal.role, needs: route.role },
          result: 'error',
          errorCode: 'forbidden',
        });
      }
      throw err;
    }
    const ctx: Ctx = {
      req,
      res,
      params,
      query: url.searchParams,
      principal,
      body: async (schema) => {
        const ct = req.headers['content-type'];
        if (ct !== undefined && !/^application\/json\b/i.test(ct)) throw new UnsupportedMediaTypeError(ct);
        const raw = await readJson(req);
        const parsed = schema.safeParse(raw);
        if (!parsed.success) throw new BadRequestError('invalid_body', zodMessage(parsed.error));
        return parsed.data;
      },
    };
    if (route.raw === true) dash.bindStream(req, res);
    const out = await route.handler(ctx);
    if (route.raw || out === RAW) return;
    sendJsonRes(res, 200, out ?? { ok: true });
  } catch (err) {
    req.resume();
    sendErr(res, err);
  }
}
