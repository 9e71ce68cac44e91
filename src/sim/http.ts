// HTTP plumbing for the simulator: bounded body reading, JSON parsing, and error/JSON replies.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GlidepathError} from '../errors.js';
import { BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError, toGlidepathError } from '../errors.js';

/** Read the whole body, rejecting (413) as soon as it passes `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new PayloadTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (b: Buffer) => {
      if (failed) return;
      size += b.length;
      if (size > limit) {
        failed = true;
        reject(new PayloadTooLargeError(limit));
        return;
      }
      parts.push(b);
    });
    req.on('end', () => {
      if (!failed) resolve(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts));
    });
    req.on('error', (e) => {
      if (!failed) {
        failed = true;
        reject(e);
      }
    });
  });
}

/** Require a JSON content type (vLLM answers 415 otherwise). */
export function requireJson(req: IncomingMessage): void {
  const ct = req.headers['content-type'];
  const media = ct?.split(';')[0]?.trim().toLowerCase();
  if (media !== 'application/json') throw new UnsupportedMediaTypeError(ct);
}

export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  requireJson(req);
  const buf = await readBody(req, limit);
  if (buf.length === 0) throw new BadRequestError('invalid_json', 'request body is empty; expected a JSON object');
  try {
    return JSON.parse(buf.toString('utf8')) as unknown;
  } catch (e) {
    throw new BadRequestError('invalid_json', `request body is not valid JSON: ${(e as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const s = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

export function sendText(res: ServerResponse, status: number, text: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Answer with an OpenAI error body; 413s also close the connection (the body may still be arriving). */
export function sendError(res: ServerResponse, err: unknown): void {
  const e: GlidepathError = toGlidepathError(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers: Record<string, string | number> = { 'content-type': 'application/json' };
  if (e.retryAfterS !== undefined) headers['retry-after'] = e.retryAfterS;
  if (e.status === 413) headers.connection = 'close';
  const s = JSON.stringify(e.toBody());
  headers['content-length'] = Buffer.byteLength(s);
  res.writeHead(e.status, headers);
  res.end(s);
}
