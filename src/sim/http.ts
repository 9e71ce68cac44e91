// HTTP plumbing for the simulator and the llama.cpp engine: a route table, JSON request bodies (read by the shared reader) and error/JSON replies.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GlidepathError } from '../errors.js';
import { BadRequestError, MethodNotAllowedError, NotFoundError, toGlidepathError } from '../errors.js';
import { checkContentType, closeAfterAnswer, parseJsonBody, readBody } from '../http/body.js';

/** A JSON body: 415 unless the content type is JSON (as vLLM), 413 past `limit` bytes, 400 if not JSON. */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  checkContentType(req.headers['content-type']);
  return parseJsonBody(await readBody(req, limit));
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const s = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

export function sendText(res: ServerResponse, status: number, text: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Answer with an OpenAI error body; 413s also close the connection, gently (the body may still be arriving). */
export function sendError(res: ServerResponse, err: unknown): void {
  const e: GlidepathError = toGlidepathError(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers: Record<string, string | number> = { 'content-type': 'application/json' };
  if (e.retryAfterS !== undefined) headers['retry-after'] = e.retryAfterS;
  const s = JSON.stringify(e.toBody());
  headers['content-length'] = Buffer.byteLength(s);
  if (e.status === 413) closeAfterAnswer(res);
  res.writeHead(e.status, headers);
  res.end(s);
}

export type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;
/** path → method → handler. */
export type Routes = Map<string, Map<string, Handler>>;

export function routeTable(): { routes: Routes; add: (method: string, path: string, h: Handler) => void } {
  const routes: Routes = new Map();
  const add = (method: string, path: string, h: Handler) => {
    if (!routes.has(path)) routes.set(path, new Map());
    routes.get(path)?.set(method, h);
  };
  return { routes, add };
}

/** Run the route's handler: 404 for an unknown path, 405 (with Allow) for a method it does not take; whatever a handler throws is answered. */
export function dispatch(routes: Routes, req: IncomingMessage, res: ServerResponse): void {
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://engine');
  } catch {
    sendError(res, new BadRequestError('invalid_url', 'request URL is malformed'));
    return;
  }
  const byMethod = routes.get(url.pathname);
  if (!byMethod) {
    sendError(res, new NotFoundError('not_found', `no route for ${req.method ?? ''} ${url.pathname}`));
    return;
  }
  const h = byMethod.get(req.method ?? 'GET');
  if (!h) {
    res.setHeader('allow', [...byMethod.keys()].join(', '));
    sendError(res, new MethodNotAllowedError(`${req.method ?? ''} is not allowed on ${url.pathname}; use ${[...byMethod.keys()].join(' or ')}`));
    return;
  }
  try {
    const p = h(req, res, url);
    if (p) p.catch((e: unknown) => sendError(res, e));
  } catch (e) {
    sendError(res, e);
  }
}
