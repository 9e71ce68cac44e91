// The admin REST API under /admin/v1: authenticated, role-checked, audited changes, JSON in and out.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { z } from 'zod';
import { kvCacheCompatible } from '../domain/card.js';
import { routeToSpec } from '../domain/route.js';
import type { RouteSpec } from '../domain/route.js';
import { normalizeVersion } from '../config/load.js';
import { versionSchema } from '../config/schema.js';
import { BadRequestError, ForbiddenError, TooManyRequestsError, UnsupportedMediaTypeError } from '../errors.js';
import type { ListenerLimitsConfig } from '../config/types.js';
import { admission } from '../gateway/server.js';
import type { Admission, ClosableServer } from '../gateway/server.js';
import { refuseConnection } from '../gateway/front.js';
import { isValidHost } from '../gateway/http1/host.js';
import type { ControlPlane } from '../control/plane.js';
import { cacheDownload } from '../fleet/cache.js';
import { deployGreen, retire, rollback, swap } from '../rollout/bluegreen.js';
import { planFor } from '../rollout/planner.js';
import { ROLE_RANK } from './auth.js';
import type { Authenticator } from './auth.js';
import { Router, readJson, sendErr, sendJsonRes, zodMessage } from './router.js';
import type { Ctx, RouteDef } from './router.js';
import { openApiDocument } from './openapi.js';
import { versionView, statusView, workersView } from './views.js';
import type { ApiExtension } from './extensions.js';

export const API_PREFIX = '/admin/v1';

const swapBody = z
  .object({
    to: z.string().optional(),
    mode: z.enum(['overlap', 'drain-first']).optional(),
    drain_timeout_ms: z.number().int().positive().optional(),
    standby: z.enum(['warm', 'sleep']).optional(),
    confirm: z.boolean().optional(),
  })
  .strict();
const deployBody = z.object({ version: z.string().min(1) }).strict();
const retireBody = z.object({ force: z.boolean().optional() }).strict();
const rollbackBody = z.object({ reason: z.string().optional() }).strict();
const cacheBody = z.object({ force: z.boolean().optional() }).strict();
const routeBody = z
  .object({
    weights: z.record(z.string(), z.number()),
    stable: z.string().optional(),
    overrides: z.record(z.string(), z.string()).optional(),
    sticky_salt: z.string().optional(),
    shadow: z.object({ version: z.string(), share: z.number().min(0).max(1) }).strict().nullable().optional(),
    expect_revision: z.number().int().nonnegative().optional(),
  })
  .strict();

/** Does the caller want progress as server-sent events? */
function wantsEvents(req: IncomingMessage): boolean {
  return (req.headers.accept ?? '').includes('text/event-stream');
}

/**
 * Run a long operation: JSON when awaited plainly; with `Accept: text/event-stream`, progress
 * events followed by a final `result` or `error` event.
 */
async function longOp(ctx: Ctx, fn: (progress: (m: string) => void) => Promise<unknown>): Promise<unknown> {
  if (!wantsEvents(ctx.req)) return fn(() => undefined);
  const res = ctx.res;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  try {
    const r = await fn((m) => send('progress', { message: m, at: Date.now() }));
    send('result', r);
  } catch (err) {
    const e = err as { code?: string; status?: number; message?: string };
    send('error', { error: { message: e.message ?? String(err), code: e.code ?? 'internal_error', status: e.status ?? 500 } });
  }
  res.end();
  return RAW;
}

const RAW = Symbol('raw');

export function buildRouter(cp: ControlPlane, extensions: readonly ApiExtension[] = []): Router {
  const r = new Router();
  const model = (ctx: Ctx) => {
    const m = ctx.params.model as string;
    cp.modelConfig(m);
    return m;
  };
  const defs: RouteDef[] = [
    { method: 'GET', path: '/status', role: 'viewer', summary: 'models, routes, versions and workers at a glance', handler: () => statusView(cp) },
    { method: 'GET', path: '/models/:model/versions', role: 'viewer', summary: 'versions of a model', handler: (c) => cp.registry.list(model(c)).map((v) => versionView(cp, v)) },
    {
      method: 'GET',
      path: '/models/:model/versions/:version',
      role: 'viewer',
      summary: 'one version with its transitions, active history and KV-cache compatibility with the active version',
      handler: (c) => {
        const m = model(c);
        const v = cp.version(m, c.params.version as string);
        const active = cp.registry.active(m);
        return {
          ...versionView(cp, v),
          transitions: cp.registry.transitions(m, v.id),
          kv_cache_compatibility: active && active.id !== v.id ? { with: active.id, ...kvCacheCompatible(active, v) } : undefined,
          window: cp.dp.telemetry.stats(m, v.id),
        };
      },
    },
    {
      method: 'POST',
      path: '/models/:model/versions',
      role: 'operator',
      body: versionSchema,
      summary: 'register a new version (body: one version as under models[].versions in glidepath.yaml); a process provider needs admin',
      handler: async (c) => {
        const b = await c.body(versionSchema);
        const m = model(c);
        // a process provider runs a command on this host: only an admin may register one
        if (b.provider.kind === 'process' && ROLE_RANK[c.principal.role] < ROLE_RANK.admin) {
          throw new ForbiddenError(`token ${JSON.stringify(c.principal.name)} has role ${c.principal.role}; registering a version with a process provider (a command run on this host) needs admin`);
        }
        const gpus = cp.inventory.total;
        if (b.provider.kind !== 'static' && b.tp > gpus) throw new BadRequestError('invalid_body', `tp: ${b.tp} needs more GPUs than the ${gpus} in the inventory`);
        const vc = normalizeVersion(m, b);
        return cp.exclusive(m, () =>
          cp.audited({ name: c.principal.name }, 'register_version', `${m}/${vc.id}`, { model: m, version: vc.id, card_checksum: vc.cardChecksum }, () => {
            const v = cp.registry.register(vc);
            cp.events.emit({ kind: 'version_registered', model: m, version: v.id, message: `${m}/${v.id} registered (card ${v.cardChecksum})` });
            return Promise.resolve(versionView(cp, v));
          }),
        );
      },
    },
    {
      method: 'POST',
      path: '/models/:model/versions/:version/retire',
      role: 'operator',
      body: retireBody,
      summary: 'unload a version and free its GPUs (never the active one; standby only with force)',
      handler: async (c) => {
        const b = await c.body(retireBody);
        return retire(cp, model(c), c.params.version as string, { force: b.force ?? false }, { name: c.principal.name });
      },
    },
    {
      method: 'POST',
      path: '/models/:model/versions/:version/cache',
      role: 'operator',
      body: cacheBody,
      summary: "cache download: copy the version's weights into the weight cache, verify the weight hash, evict least recently used (never active or standby); force re-downloads",
      handler: async (c) => {
        const b = await c.body(cacheBody);
        return cacheDownload(cp, model(c), c.params.version as string, { name: c.principal.name }, { force: b.force ?? false });
      },
    },
    {
      method: 'GET',
      path: '/models/:model/plan',
      role: 'viewer',
      summary: 'strategy comparison (extra GPUs, downtime, capacity drop, rollback and deploy time) for moving the active version to ?to=V on this cluster, with a recommendation',
      handler: (c) => {
        const to = c.query.get('to');
        if (to === null || to === '') throw new BadRequestError('invalid_query', 'to: the version to plan a move to is required (?to=V)');
        return planFor(cp, model(c), to);
      },
    },
    {
      method: 'POST',
      path: '/models/:model/deploy',
      role: 'operator',
      body: deployBody,
      summary: 'deploy green: load a version on free GPUs beside the active one, warm it, mark it ready',
      handler: async (c) => {
        const b = await c.body(deployBody);
        const m = model(c);
        return longOp(c, async (progress) => versionView(cp, await deployGreen(cp, m, b.version, { name: c.principal.name }, progress)));
      },
    },
    {
      method: 'POST',
      path: '/models/:model/swap',
      role: 'operator',
      body: swapBody,
      summary: 'make the ready (green) version active; overlap or drain-first',
      handler: async (c) => {
        const b = await c.body(swapBody);
        return swap(cp, model(c), { to: b.to, mode: b.mode, drainTimeoutMs: b.drain_timeout_ms, standby: b.standby }, { name: c.principal.name });
      },
    },
    {
      method: 'POST',
      path: '/models/:model/rollback',
      role: 'operator',
      body: rollbackBody,
      summary: 'instant rollback to the standby version (one route swap)',
      handler: async (c) => {
        const b = await c.body(rollbackBody);
        return rollback(cp, model(c), { name: c.principal.name }, b.reason);
      },
    },
    {
      method: 'GET',
      path: '/models/:model/route',
      role: 'viewer',
      summary: 'the route in force, with configured vs actual shares',
      handler: (c) => {
        const m = model(c);
        const st = cp.dp.model(m);
        return { ...routeToSpec(st.route), revision: st.route.revision, shares: st.split.shares() };
      },
    },
    {
      method: 'PUT',
      path: '/models/:model/route',
      role: 'operator',
      body: routeBody,
      summary: 'replace the route (weights, overrides, shadow); validated, atomic, persisted',
      handler: async (c) => {
        const b = await c.body(routeBody);
        const m = model(c);
        return cp.exclusive(m, () =>
          cp.audited({ name: c.principal.name }, 'set_route', m, b, () => {
            const cur = cp.route(m);
            if (b.expect_revision !== undefined && b.expect_revision !== cur.revision) {
              throw new BadRequestError('route_revision_conflict', `route of ${m} is at revision ${cur.revision}, not ${b.expect_revision}`);
            }
            const spec: RouteSpec = { model: m, weights: b.weights, stable: b.stable, overrides: b.overrides ?? cur.overrides, stickySalt: b.sticky_salt ?? cur.stickySalt, shadow: b.shadow === null ? undefined : (b.shadow ?? cur.shadow) };
            const { route, switchMs } = cp.publishRoute(spec);
            return Promise.resolve({ ...routeToSpec(route), revision: route.revision, switch_ms: switchMs });
          }),
        );
      },
    },
    { method: 'GET', path: '/workers', role: 'viewer', summary: 'every worker with its state, load and GPUs', handler: (c) => workersView(cp, c.query.get('model') ?? undefined) },
    { method: 'GET', path: '/gpus', role: 'viewer', summary: 'the GPU inventory and who holds each GPU', handler: () => cp.inventory.list() },
    {
      method: 'GET',
      path: '/audit',
      role: 'viewer',
      summary: 'the audit log, newest first; filters since, until (epoch ms or ISO), actor, action, target, result, limit',
      handler: (c) => {
        const q = c.query;
        const time = (k: string) => {
          const v = q.get(k);
          if (v === null) return undefined;
          const n = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
          if (!Number.isFinite(n)) throw new BadRequestError('invalid_query', `${k}: expected epoch ms or an ISO date, got ${JSON.stringify(v)}`);
          return n;
        };
        const limitS = q.get('limit');
        const limit = limitS === null ? undefined : Number(limitS);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) throw new BadRequestError('invalid_query', `limit: expected a positive integer, got ${JSON.stringify(limitS)}`);
        const result = q.get('result');
        if (result !== null && result !== 'ok' && result !== 'error') throw new BadRequestError('invalid_query', `result: expected ok or error, got ${JSON.stringify(result)}`);
        return cp.store.queryAudit({
          since: time('since'),
          until: time('until'),
          actor: q.get('actor') ?? undefined,
          action: q.get('action') ?? undefined,
          target: q.get('target') ?? undefined,
          result: result ?? undefined,
          limit,
        });
      },
    },
    {
      method: 'GET',
      path: '/events',
      role: 'viewer',
      summary: 'server-sent events of every change (Last-Event-ID resumes)',
      raw: true,
      handler: (c) => {
        const res = c.res;
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
        const last = Number(c.req.headers['last-event-id'] ?? c.query.get('since') ?? '0');
        const write = (e: { seq: number; kind: string }) => res.write(`id: ${e.seq}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`);
        for (const e of cp.events.since(Number.isFinite(last) ? last : 0)) write(e);
        const unsub = cp.events.subscribe(write);
        const ping = setInterval(() => res.write(': ping\n\n'), 15_000);
        res.on('close', () => {
          unsub();
          clearInterval(ping);
        });
      },
    },
  ];
  for (const d of defs) r.add(d);
  for (const ext of extensions) for (const d of ext.routes(cp)) r.add(d);
  r.add({ method: 'GET', path: '/openapi.json', role: 'viewer', summary: 'this API as an OpenAPI 3.1 document', handler: () => openApiDocument(r.list()) });
  return r;
}

/**
 * The admin API's listener. With `limits`, connections are admitted first (the connection ceiling
 * and per-address limits, as on the data plane) and only admitted ones reach the HTTP server.
 */
export function createAdminServer(cp: ControlPlane, auth: Authenticator, extensions: readonly ApiExtension[] = [], limits?: ListenerLimitsConfig): ClosableServer {
  const router = buildRouter(cp, extensions);
  const adm = limits === undefined ? undefined : admission('admin', limits, cp.dp.telemetry);
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    void handle(cp, router, auth, adm, req, res);
  });
  if (adm === undefined) return http;
  const front = createNetServer((socket) => {
    const addr = socket.remoteAddress ?? '';
    const why = adm.limits.admit(addr);
    if (why !== undefined) {
      adm.refused(why, addr);
      refuseConnection(socket, why, adm.limits);
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

async function handle(cp: ControlPlane, router: Router, auth: Authenticator, adm: Admission | undefined, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (adm !== undefined && adm.limits.rateLimited) {
      const addr = req.socket.remoteAddress ?? '';
      const wait = adm.limits.take(addr);
      if (wait > 0) {
        adm.refused('client_rate', addr);
        throw new TooManyRequestsError('rate_limited', `too many requests from ${addr}: at most ${adm.limits.settings.perClientRps} per second (burst ${adm.limits.settings.perClientBurst})`, wait);
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
        cp.store.appendAudit({ at: Date.now(), actor: principal.name, action: 'denied', target: `${route.method} ${path}`, params: { role: principal.role, needs: route.role }, result: 'error', errorCode: 'forbidden' });
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
