// Checking an OpenAI request body: JSON, and the fields routing needs (the body itself is read by
// the HTTP/1 front; the content type is checked by http/body.ts).
import { BadRequestError } from '../errors.js';
import { parseJsonBody } from '../http/body.js';

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

/**
 * Parse and check the fields the gateway relies on; the worker validates the rest as it always
 * does. Errors name the field and what was wrong, OpenAI style.
 */
export function parseRequest(raw: Buffer, endpoint: Endpoint): ParsedRequest {
  const body = parseJsonBody(raw);
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
