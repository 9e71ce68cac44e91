// Request bodies on node:http servers (the simulator, the admin API) and the data plane's JSON
// checks: the content type, the whole body within a size limit, JSON, and a 413 the client can read.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors.js';

/** Content type must be JSON (charset and other parameters allowed). */
export function checkContentType(ct: string | undefined): void {
  if (ct === undefined) throw new UnsupportedMediaTypeError(undefined);
  if (ct === 'application/json') return; // what nearly every client sends: no copies
  const semi = ct.indexOf(';');
  const base = (semi === -1 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  if (base !== 'application/json') throw new UnsupportedMediaTypeError(ct);
}

/**
 * Read the whole body, refusing early (by Content-Length) or as soon as the limit is crossed. A
 * refused body is still read and dropped, never left unread: the connection must not be reset
 * under a client that is still sending (answer it with `closeAfterAnswer`).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume();
    return Promise.reject(new PayloadTooLargeError(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > limit) {
        failed = true;
        chunks.length = 0;
        reject(new PayloadTooLargeError(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!failed) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
    req.on('error', (err) => {
      if (!failed) {
        failed = true;
        reject(new BadRequestError('body_read_failed', `could not read the request body: ${err.message}`));
      }
    });
  });
}

/** Bodies up to this size are parsed without a depth scan (at most ~10 ms of JSON.parse however they nest). */
const JSON_SCAN_FROM = 16 * 1024;

/**
 * The deepest nesting of arrays and objects in `raw` (brackets inside strings do not count), or
 * `limit + 1` as soon as it is passed. Not a validator: JSON.parse still decides what is valid.
 */
export function jsonDepth(raw: Buffer, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as number;
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped byte
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 93 || c === 125) depth--;
  }
  return max;
}

/** The body as JSON: 400 `invalid_json` when it is empty, nests too deep (DEFAULTS.gateway.maxJsonDepth) or does not parse. */
export function parseJsonBody(raw: Buffer): unknown {
  if (raw.length === 0) throw new BadRequestError('invalid_json', 'request body is empty; expected a JSON object');
  // JSON.parse takes ~0.6 µs per level of nesting: megabytes of brackets would hold the event loop
  // for seconds. Small bodies cannot nest deep enough to matter and are not scanned.
  const max = DEFAULTS.gateway.maxJsonDepth;
  if (raw.length > JSON_SCAN_FROM && jsonDepth(raw, max) > max) throw new BadRequestError('invalid_json', `request body nests JSON deeper than ${max} levels`);
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch (err) {
    throw new BadRequestError('invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Close the connection once this answer is written, without resetting it: our side ends, and what
 * the client still sends is read and dropped until it closes too, or for at most `lingerMs`. Use
 * it instead of `connection: close` after refusing a body: with that header node:http destroys the
 * socket as soon as the answer is out, the unread body makes the kernel reset the connection, and
 * a client still writing gets EPIPE instead of the answer.
 */
export function closeAfterAnswer(res: ServerResponse, lingerMs: number = DEFAULTS.http.closeLingerMs): void {
  const socket = res.socket;
  if (socket === null) return;
  res.once('finish', () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), lingerMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}
