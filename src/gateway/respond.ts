// Writing data-plane answers: OpenAI error bodies (never a stack trace) and small JSON replies.
import type { FrontResponse } from './front.js';
import { MethodNotAllowedError } from '../errors.js';
import type { GlidepathError } from '../errors.js';

export function sendJson(res: FrontResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function sendError(res: FrontResponse, err: GlidepathError, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const h: Record<string, string> = { ...headers };
  if (err.retryAfterS !== undefined) h['retry-after'] = String(err.retryAfterS);
  // a 405 names the methods the path takes (RFC 9110 §15.5.6)
  if (err instanceof MethodNotAllowedError && err.allow.length > 0) h.allow = err.allow.join(', ');
  sendJson(res, err.status, err.toBody(), h);
}
