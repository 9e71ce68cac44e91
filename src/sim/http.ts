// HTTP plumbing for the simulator: JSON request bodies (read by the shared reader) and error/JSON replies.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GlidepathError } from '../errors.js';
import { toGlidepathError } from '../errors.js';
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
