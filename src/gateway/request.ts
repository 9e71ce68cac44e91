// Reading and checking an OpenAI request body: size, content type, JSON, and the fields routing needs.
import type { IncomingMessage } from 'node:http';
import { BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors.js';
import { DEFAULTS } from '../defaults.js';

export type Endpoint = 'chat' | 'completions';

export interface ParsedRequest {
  raw: Buffer;
  body: Record<string, unknown>;
  model: string;
  stream: boolean;
  user: string | undefined;
  /** Tokens the client allows (max_tokens / max_completion_tokens), when given. */
  maxTokens: number | undefined;
}

/** Content type must be JSON (charset and other parameters allowed). */
export function checkContentType(ct: string | undefined): void {
  if (ct === undefined) throw new UnsupportedMediaTypeError(undefined);
  if (ct === 'application/json') return; // what nearly every client sends: no copies
  const semi = ct.indexOf(';');
  const base = (semi === -1 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  if (base !== 'application/json') throw new UnsupportedMediaTypeError(ct);
}

/** Read the whole body, refusing early (by Content-Length) or as soon as the limit is crossed. */
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

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function bad(param: string, message: string): never {
  throw new BadRequestError('invalid_request', `${param}: ${message}`);
}

// values passed, not looked up by key: a named property load stays monomorphic, a keyed one does not
function optInt(v: unknown, key: string, min: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) bad(key, `expected an integer, got ${typeName(v)} ${JSON.stringify(v)}`);
  if (v < min) bad(key, `must be at least ${min}, got ${v}`);
  return v;
}

function optNumber(v: unknown, key: string, lo: number, hi: number): void {
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(key, `expected a number, got ${typeName(v)}`);
  if (v < lo || v > hi) bad(key, `must be between ${lo} and ${hi}, got ${v}`);
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
      if (c === 92) i++; // backslash: skip the escaped byte
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

/**
 * Parse and check the fields the gateway relies on; the worker validates the rest as it always
 * does. Errors name the field and what was wrong, OpenAI style.
 */
export function parseRequest(raw: Buffer, endpoint: Endpoint): ParsedRequest {
  if (raw.length === 0) throw new BadRequestError('invalid_json', 'request body is empty; expected a JSON object');
  // JSON.parse takes ~0.6 µs per level of nesting: megabytes of brackets would hold the event loop
  // for seconds. Small bodies cannot nest deep enough to matter and are not scanned.
  if (raw.length > JSON_SCAN_FROM && jsonDepth(raw, DEFAULTS.gateway.maxJsonDepth) > DEFAULTS.gateway.maxJsonDepth) {
    throw new BadRequestError('invalid_json', `request body nests JSON deeper than ${DEFAULTS.gateway.maxJsonDepth} levels`);
  }
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new BadRequestError('invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestError('invalid_json', `request body must be a JSON object, got ${typeName(body)}`);
  }
  const b = body as Record<string, unknown>;
  const model = b.model;
  if (model === undefined) bad('model', 'required');
  if (typeof model !== 'string' || model === '') bad('model', `expected a non-empty string, got ${typeName(model)}`);
  const stream = b.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') bad('stream', `expected a boolean, got ${typeName(stream)}`);
  if (endpoint === 'chat') {
    const msgs = b.messages;
    if (msgs === undefined) bad('messages', 'required');
    if (!Array.isArray(msgs)) bad('messages', `expected an array, got ${typeName(msgs)}`);
    if (msgs.length === 0) bad('messages', 'must contain at least one message');
    for (let i = 0; i < msgs.length; i++) {
      const m: unknown = msgs[i];
      if (typeof m !== 'object' || m === null || Array.isArray(m)) bad(`messages[${i}]`, `expected an object, got ${typeName(m)}`);
      const role = (m as Record<string, unknown>).role;
      if (typeof role !== 'string') bad(`messages[${i}].role`, `expected a string, got ${typeName(role)}`);
      const content = (m as Record<string, unknown>).content;
      if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
        bad(`messages[${i}].content`, `expected a string or an array of parts, got ${typeName(content)}`);
      }
    }
  } else {
    const p = b.prompt;
    if (p === undefined) bad('prompt', 'required');
    if (typeof p !== 'string' && !Array.isArray(p)) bad('prompt', `expected a string or an array, got ${typeName(p)}`);
  }
  const maxTokens = optInt(b.max_tokens, 'max_tokens', 1) ?? optInt(b.max_completion_tokens, 'max_completion_tokens', 1);
  optInt(b.n, 'n', 1);
  optNumber(b.temperature, 'temperature', 0, 2);
  optNumber(b.top_p, 'top_p', 0, 1);
  const user = b.user;
  if (user !== undefined && user !== null && typeof user !== 'string') bad('user', `expected a string, got ${typeName(user)}`);
  return { raw, body: b, model, stream: stream === true, user: typeof user === 'string' ? user : undefined, maxTokens };
}
