// The admin REST API under /admin/v1: the listener (connection admission, rate limits), then
// authentication, role checks, body parsing and error rendering around the routes of src/api/routes/.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
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

export const API_PREFIX = '/admin/v1';

export function buildRouter(ctx: AdminContext): Router {
  const r = new Router();
  for (const d of adminRoutes(ctx)) r.add(d);
  r.add({ method: 'GET', path: '/openapi.json', role: 'viewer', summary: 'this API as an OpenAPI 3.1 document', handler: () => openApiDocument(r.list()) });
  return r;
}

/**
 * The admin API's listener. With `limits`, connections are admitted first (the connection ceiling
 * and per-address limits, as on the data plane) and only admitted ones reach the HTTP server.
 */
export function createAdminServer(ctx: AdminContext, auth: Authenticator, limits?: ListenerLimitsConfig): ClosableServer {
  const router = buildRouter(ctx);
  const adm = limits === undefined ? undefined : admission('admin', limits, ctx.cp.dp.telemetry);
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    void handle(ctx, router, auth, adm, req, res);
  });
  // CONNECT is no admin method: node:http would drop the connection without a word
  http.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    const body = errorBody(new MethodNotAllowedError('CONNECT is not supported by the admin API'));
    socket.on('error', () => undefined);
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  if (adm === undefined) return http;
  const front = createNetServer((socket) => {
    const addr = socket.remoteAddress ?? '';
    const why = adm.limits.admit(addr);
    if (why !== undefined) {
      adm.refused(why, addr);
      refuseConnection(socket, why, adm.limits, defaultErrorBody);
      return;
    }
    socket.once('close', () => adm.limits.close(addr));
    http.emit('connection', socket);
  });
  // node:http starts enforcing its header and request timeouts on 'listening'; it never listens itself here
  front.on('listening', () => http.emit('listening'));
  front.on('close', () => http.close());
  adm.watch(front);
  return Object.assign(front, { closeAllConnections: () => http.closeAllConnections() });
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
  adm: Admission | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  try {
    if (adm !== undefined) {
      const addr = req.socket.remoteAddress ?? '';
      const r = requestRefusal(adm.limits, null, false, addr, req.method ?? '', req.url ?? '');
      if (r !== undefined) {
        adm.refused(r.why, addr);
        // 429 for one client's excess, 503 when the whole listener is at its ceiling (as on the data plane)
        throw new GlidepathError(r.code, r.message, { retryAfterS: r.retryAfterS });
      }
    }
    // RFC 9112 §3.2: one Host with a valid value (node:http already requires one on HTTP/1.1)
    const host = req.headers.host;
    if (host !== undefined && !isValidHost(host)) throw new BadRequestError('invalid_host', `invalid Host header value ${JSON.stringify(host.slice(0, 64))}`);
    const url = adminUrl(req.url ?? '/');
    if (!url.pathname.startsWith(API_PREFIX)) {
      throw new BadRequestError('not_admin_path', `admin endpoints live under ${API_PREFIX}/ (got ${url.pathname})`);
    }
    const path = url.pathname.slice(API_PREFIX.length) || '/';
    const { route, params } = router.match(req.method ?? 'GET', path);
    // the OpenAPI document is public so tools can discover the API; everything else needs a token
    const principal = path === '/openapi.json' ? { name: 'anonymous', role: 'viewer' as const } : auth.authenticate(req.headers.authorization);
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
    const out = await route.handler(ctx);
    if (route.raw || out === RAW) return;
    sendJsonRes(res, 200, out ?? { ok: true });
  } catch (err) {
    req.resume();
    sendErr(res, err);
  }
}
