// The admin API client every CLI verb talks through: where the API is, which token to send, JSON
// requests, progress streams (SSE), and API errors turned into errors with the API's own code.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
import { ApiError, errorTypeOf, GlidepathError } from '../errors.js';
import type { ErrorType } from '../errors.js';
import { TOKEN_FILE } from '../api/auth.js';
import { UsageError } from './output.js';

export const API_PREFIX = '/admin/v1';
export const DEFAULT_URL = `http://${DEFAULTS.server.adminListen}`;

export interface ClientOptions {
  url?: string | undefined;
  token?: string | undefined;
  dataDir?: string | undefined;
}

/** Where the token came from, for error hints. */
type TokenSource = 'flag' | 'env' | 'file' | 'none';

export interface SseEvent {
  event: string;
  data: string;
}

function normaliseUrl(raw: string, flag: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new UsageError(`${flag}: expected an http(s) URL such as ${DEFAULT_URL}, got ${JSON.stringify(raw)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`${flag}: expected an http(s) URL, got ${JSON.stringify(raw)}`);
  // tolerate the API prefix in the URL (people paste what they curl)
  return u
    .toString()
    .replace(/\/+$/, '')
    .replace(/\/admin\/v1$/, '');
}

/**
 * Resolve the token: `--token`, then GLIDEPATH_TOKEN, then `<data dir>/admin-token` (the token the
 * first `glidepath up` generates when the config has none). No token at all is not an error here:
 * the request goes out without one and the API's 401 is shown with a hint.
 */
function resolveToken(o: ClientOptions): { token: string | undefined; source: TokenSource; file: string } {
  const dir = o.dataDir ?? process.env.GLIDEPATH_DATA_DIR ?? DEFAULTS.server.dataDir;
  const file = path.resolve(dir, TOKEN_FILE);
  if (o.token !== undefined) {
    if (o.token.trim() === '') throw new UsageError('--token: expected a token, got an empty string');
    return { token: sendable(o.token.trim(), '--token'), source: 'flag', file };
  }
  const env = process.env.GLIDEPATH_TOKEN;
  if (env !== undefined && env.trim() !== '') return { token: sendable(env.trim(), 'GLIDEPATH_TOKEN'), source: 'env', file };
  let t: string | undefined;
  try {
    t = readFileSync(file, 'utf8').trim();
  } catch {
    // no token file: fall through
  }
  if (t !== undefined && t !== '') return { token: sendable(t, `the token file ${file}`), source: 'file', file };
  return { token: undefined, source: 'none', file };
}

/**
 * A token goes in `Authorization: Bearer <token>`, one word of visible ASCII (the admin API reads
 * `\S+`, and a header cannot carry a control character or, as UTF-8, a non-ASCII one): anything else
 * is refused here, naming where it came from, rather than failing in the HTTP client as if the API
 * could not be reached.
 */
function sendable(token: string, from: string): string {
  const bad = /[^\x21-\x7e]/.exec(token);
  if (bad !== null) {
    const c = bad[0];
    const code = c.codePointAt(0) ?? 0;
    const shown = code < 0x20 || code === 0x7f ? `a control character (U+${code.toString(16).toUpperCase().padStart(4, '0')})` : JSON.stringify(c);
    throw new UsageError(
      `${from}: the token has ${shown} at position ${bad.index + 1}; a bearer token is one word of visible ASCII characters (letters, digits, punctuation)`,
    );
  }
  return token;
}

export class AdminClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly tokenSource: TokenSource;
  private readonly tokenFile: string;

  constructor(o: ClientOptions = {}) {
    this.baseUrl =
      o.url !== undefined ? normaliseUrl(o.url, '--url') : process.env.GLIDEPATH_URL ? normaliseUrl(process.env.GLIDEPATH_URL, 'GLIDEPATH_URL') : DEFAULT_URL;
    const t = resolveToken(o);
    this.token = t.token;
    this.tokenSource = t.source;
    this.tokenFile = t.file;
  }

  get<T = unknown>(p: string, query: Record<string, string | number | undefined> = {}): Promise<T> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
    const s = qs.toString();
    return this.call<T>('GET', s ? `${p}?${s}` : p);
  }

  post<T = unknown>(p: string, body: unknown = {}, opts: { long?: boolean } = {}): Promise<T> {
    return this.call<T>('POST', p, body, opts.long ?? false);
  }

  put<T = unknown>(p: string, body: unknown): Promise<T> {
    return this.call<T>('PUT', p, body);
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.token !== undefined ? { authorization: `Bearer ${this.token}` } : {}), ...extra };
  }

  private async send(method: 'GET' | 'POST' | 'PUT', p: string, body: unknown, headers: Record<string, string>, long: boolean) {
    const url = `${this.baseUrl}${API_PREFIX}${p}`;
    try {
      return await request(url, {
        method,
        headers: this.headers({ ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }),
        body: body !== undefined ? JSON.stringify(body) : null,
        // loading a version or draining can take minutes; the server ends these itself
        ...(long ? { headersTimeout: 0, bodyTimeout: 0 } : {}),
      });
    } catch (err) {
      throw this.connectError(err);
    }
  }

  private connectError(err: unknown): ApiError {
    const code = (err as { code?: string }).code ?? 'unknown';
    const why = code === 'ECONNREFUSED' ? 'connection refused' : code === 'ENOTFOUND' ? 'host not found' : (err as Error).message;
    return ApiError.local(
      'api_unreachable',
      `cannot reach the admin API at ${this.baseUrl} (${why}): is \`glidepath up\` running at ${this.baseUrl}? (set GLIDEPATH_URL or --url)`,
    );
  }

  private async call<T>(method: 'GET' | 'POST' | 'PUT', p: string, body?: unknown, long = false): Promise<T> {
    const res = await this.send(method, p, method === 'GET' ? undefined : body, {}, long);
    const text = await res.body.text();
    if (res.statusCode >= 400) throw this.apiError(res.statusCode, text);
    return this.json<T>(text, `${method} ${p}`, res.statusCode);
  }

  /** A JSON answer (`what` names it); one that is not JSON is `invalid_response`, never a bare SyntaxError. */
  private json<T>(text: string, what: string, status: number): T {
    try {
      return JSON.parse(text) as T;
    } catch {
      throw ApiError.local(
        'invalid_response',
        `the admin API at ${this.baseUrl} answered ${what} with a body that is not JSON (${JSON.stringify(text.slice(0, 80))}): is GLIDEPATH_URL / --url its admin listener?`,
        status,
      );
    }
  }

  /**
   * POST expecting a progress stream: each `progress` event goes to `onProgress`; the `result` event's
   * data is returned; an `error` event is thrown like an error response.
   */
  async stream<T = unknown>(p: string, body: unknown, onProgress: (data: unknown) => void): Promise<T> {
    const res = await this.send('POST', p, body, { accept: 'text/event-stream' }, true);
    if (res.statusCode >= 400) throw this.apiError(res.statusCode, await res.body.text());
    const ct = String(res.headers['content-type'] ?? '');
    if (!ct.includes('text/event-stream')) {
      // an older server without progress streaming: it answered with the plain result
      return this.json<T>(await res.body.text(), `POST ${p}`, res.statusCode);
    }
    let buf = '';
    let result: { ok: true; value: T } | undefined;
    const handle = (raw: string): void => {
      const ev = parseSseEvent(raw);
      if (!ev) return;
      const data: unknown = ev.data === '' ? undefined : this.json(ev.data, `the ${ev.event} event of POST ${p}'s progress stream`, res.statusCode);
      if (ev.event === 'progress') onProgress(data);
      else if (ev.event === 'result') result = { ok: true, value: data as T };
      else if (ev.event === 'error') throw this.apiErrorFromBody(data, 500);
    };
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString('utf8');
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const raw = buf.slice(0, i);
          buf = buf.slice(i + 2);
          handle(raw);
        }
      }
    } catch (err) {
      if (err instanceof ApiError || err instanceof GlidepathError) throw err;
      throw ApiError.local('stream_broken', `the progress stream from ${this.baseUrl} broke: ${(err as Error).message}`);
    }
    if (buf.trim() !== '') handle(buf);
    if (!result) throw ApiError.local('stream_incomplete', `the progress stream from ${this.baseUrl} ended without a result (did \`glidepath up\` stop?)`);
    return result.value;
  }

  private apiError(status: number, text: string): ApiError {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return this.apiErrorFromBody(body, status, text);
  }

  private apiErrorFromBody(body: unknown, status: number, text = ''): ApiError {
    const e = (body as { error?: { message?: unknown; code?: unknown; type?: unknown; status?: unknown; details?: unknown } } | undefined)?.error;
    const st = typeof e?.status === 'number' ? e.status : status;
    let message = typeof e?.message === 'string' ? e.message : `the admin API answered HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`;
    if (st === 401) message += this.tokenHint();
    // an error answer without a code is no Glidepath error body (a proxy's page?): the CLI's own code
    if (typeof e?.code !== 'string') return ApiError.local('invalid_response', message, st);
    const type = (typeof e.type === 'string' ? e.type : errorTypeOf(st)) as ErrorType;
    const details = e.details && typeof e.details === 'object' ? (e.details as Record<string, unknown>) : undefined;
    return new ApiError(e.code, st, type, message, details);
  }

  private tokenHint(): string {
    switch (this.tokenSource) {
      case 'none':
        return ` — no token found: set GLIDEPATH_TOKEN, pass --token, or point --data-dir / GLIDEPATH_DATA_DIR at the data directory holding ${TOKEN_FILE} (looked for ${this.tokenFile})`;
      case 'file':
        return ` — the token in ${this.tokenFile} was rejected (is it from another data directory?)`;
      case 'env':
        return ' — the token in GLIDEPATH_TOKEN was rejected';
      case 'flag':
        return ' — the token given with --token was rejected';
    }
  }
}

/** The events of a server-sent event stream, as they arrive (the blocks between blank lines, parsed; comments skipped). */
export async function* readSse(body: AsyncIterable<Buffer | string>): AsyncGenerator<SseEvent> {
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = parseSseEvent(buf.slice(0, i));
      buf = buf.slice(i + 2);
      if (ev) yield ev;
    }
  }
}

/** One SSE event block → {event, data}; comments and blank blocks → undefined. */
export function parseSseEvent(raw: string): SseEvent | undefined {
  let event = 'message';
  const data: string[] = [];
  for (const line of raw.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0 && event === 'message') return undefined;
  return { event, data: data.join('\n') };
}
