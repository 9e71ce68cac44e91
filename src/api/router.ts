// A small method+path router for the admin API with typed params, JSON bodies and error rendering.
// A route that takes a body declares its schema once (`post`/`put` below): the same schema
// validates the body before the handler runs and is the request body of the OpenAPI document.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { Role } from '../config/types.js';
import { BadRequestError, MethodNotAllowedError, NotFoundError, toGlidepathError } from '../errors.js';
import { parseJsonBody, readBody } from '../http/body.js';
import type { Principal } from './auth.js';

export interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  principal: Principal;
  /** The JSON body parsed and validated (used by `post`/`put` with the route's own schema). */
  body<T extends z.ZodType>(schema: T): Promise<z.output<T>>;
}

export type Handler = (ctx: Ctx) => unknown;

export interface RouteDef {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  role: Role;
  summary: string;
  handler: Handler;
  /** Handler writes the response itself (SSE). */
  raw?: boolean;
  /** The JSON body's schema: every POST and PUT has one (the router refuses a route without). */
  body?: z.ZodType;
}

interface RouteInfo {
  role: Role;
  summary: string;
  raw?: boolean;
}

export function get(path: string, info: RouteInfo, handler: Handler): RouteDef {
  return { method: 'GET', path, ...info, handler };
}

/** A POST whose body is validated against `body` before `handler` runs; `body` is also its OpenAPI request schema. */
export function post<S extends z.ZodType>(path: string, info: RouteInfo & { body: S }, handler: (ctx: Ctx, body: z.output<S>) => unknown): RouteDef {
  return { method: 'POST', path, ...info, handler: async (c) => handler(c, await c.body(info.body)) };
}

/** A PUT, as `post`. */
export function put<S extends z.ZodType>(path: string, info: RouteInfo & { body: S }, handler: (ctx: Ctx, body: z.output<S>) => unknown): RouteDef {
  return { method: 'PUT', path, ...info, handler: async (c) => handler(c, await c.body(info.body)) };
}

/** The body of a POST that takes none: `{}` or nothing at all (anything else is refused). */
export const noBody = z.object({}).strict();

interface Compiled extends RouteDef {
  re: RegExp;
  keys: string[];
}

const MAX_BODY = 1 << 20;

/** The caller (ctx.body) has already refused a non-JSON content type. An empty body is `{}`. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req, MAX_BODY);
  return raw.length === 0 ? {} : parseJsonBody(raw);
}

export class Router {
  private readonly routes: Compiled[] = [];

  add(def: RouteDef): void {
    if ((def.method === 'POST' || def.method === 'PUT') && def.body === undefined)
      throw new Error(`admin route ${def.method} ${def.path} declares no body schema`);
    if (this.routes.some((r) => r.method === def.method && r.path === def.path)) throw new Error(`admin route ${def.method} ${def.path} is defined twice`);
    const keys: string[] = [];
    const re = new RegExp(
      '^' +
        def.path.replace(/:([a-z_]+)/g, (_, k: string) => {
          keys.push(k);
          return '([^/]+)';
        }) +
        '$',
    );
    this.routes.push({ ...def, re, keys });
  }

  list(): readonly RouteDef[] {
    return this.routes;
  }

  match(method: string, path: string): { route: Compiled; params: Record<string, string> } {
    const allow: string[] = [];
    for (const r of this.routes) {
      const m = r.re.exec(path);
      if (!m) continue;
      if (r.method !== method) {
        if (!allow.includes(r.method)) allow.push(r.method);
        continue;
      }
      const params: Record<string, string> = {};
      r.keys.forEach((k, i) => {
        const raw = m[i + 1] as string;
        try {
          params[k] = decodeURIComponent(raw);
        } catch {
          throw new BadRequestError('invalid_path', `malformed percent-encoding in the path segment ${JSON.stringify(raw.slice(0, 200))} (${k})`);
        }
      });
      return { route: r, params };
    }
    if (allow.length > 0) throw new MethodNotAllowedError(`${path} does not accept ${method}; it takes ${allow.join(', ')}`, allow);
    throw new NotFoundError('not_found', `no admin endpoint ${method} ${path}`);
  }
}

export function sendJsonRes(res: ServerResponse, status: number, value: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export function sendErr(res: ServerResponse, err: unknown): void {
  const e = toGlidepathError(err);
  if (res.headersSent) {
    if (!res.destroyed) res.end();
    return;
  }
  const body: Record<string, unknown> = { error: { message: e.message, type: e.type, code: e.code, ...(e.details ? { details: e.details } : {}) } };
  if (e.retryAfterS !== undefined) res.setHeader('retry-after', String(e.retryAfterS));
  if (e instanceof MethodNotAllowedError && e.allow.length > 0) res.setHeader('allow', e.allow.join(', '));
  sendJsonRes(res, e.status, body);
}
