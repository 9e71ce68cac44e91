// A scripted OpenAI-like upstream for gateway tests: each request's behaviour is chosen by the test
// (stream SSE chunks, answer JSON, fail, hang, break mid-stream), and every request is recorded
// with whether its client (the gateway) aborted it.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';

export interface UpstreamRequest {
  readonly n: number;
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  /** Parsed body when it was JSON. */
  readonly json: Record<string, unknown> | undefined;
  /** True once the response closed before it was finished (the gateway hung up). */
  aborted: boolean;
  /** Resolves when the response closes, finished or not. */
  readonly closed: Promise<void>;
  /** Resolves when the response has been fully written. */
  readonly finished: Promise<void>;
}

export interface BehaviourCtx {
  req: IncomingMessage;
  res: ServerResponse;
  rec: UpstreamRequest;
  /** Write one chunk and resolve once it has been handed to the socket. */
  write(chunk: string): Promise<void>;
}

/** What the upstream does with one request. */
export type Behaviour = (ctx: BehaviourCtx) => void | Promise<void>;

// ---- SSE in vLLM's format ------------------------------------------------------------------

export interface ChunkOptions {
  id?: string;
  model?: string;
  created?: number;
  /** Completion endpoint (`text_completion`, `text`) instead of chat. */
  completions?: boolean;
  /** Add a final usage event (as vLLM does with stream_options.include_usage). */
  usage?: { prompt_tokens: number; completion_tokens: number };
}

/** Full SSE events for `n` generated tokens: role event, n content events, finish event, [usage], [DONE]. */
export function sseEvents(n: number, o: ChunkOptions = {}): string[] {
  const id = o.id ?? 'chatcmpl-test';
  const model = o.model ?? 'm';
  const created = o.created ?? 1700000000;
  const out: string[] = [];
  if (o.completions) {
    for (let i = 0; i < n; i++) {
      out.push(
        `data: ${JSON.stringify({ id, object: 'text_completion', created, model, choices: [{ index: 0, text: `t${i} `, logprobs: null, finish_reason: null }] })}\n\n`,
      );
    }
    out.push(
      `data: ${JSON.stringify({ id, object: 'text_completion', created, model, choices: [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }] })}\n\n`,
    );
  } else {
    const obj = 'chat.completion.chunk';
    out.push(
      `data: ${JSON.stringify({ id, object: obj, created, model, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] })}\n\n`,
    );
    for (let i = 0; i < n; i++) {
      out.push(
        `data: ${JSON.stringify({ id, object: obj, created, model, choices: [{ index: 0, delta: { content: `tok${i} ` }, logprobs: null, finish_reason: null }] })}\n\n`,
      );
    }
    out.push(`data: ${JSON.stringify({ id, object: obj, created, model, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }] })}\n\n`);
  }
  if (o.usage) {
    out.push(
      `data: ${JSON.stringify({ id, object: o.completions ? 'text_completion' : 'chat.completion.chunk', created, model, choices: [], usage: { ...o.usage, total_tokens: o.usage.prompt_tokens + o.usage.completion_tokens } })}\n\n`,
    );
  }
  out.push('data: [DONE]\n\n');
  return out;
}

/** A non-streaming chat completion body with usage. */
export function chatBody(text = 'hello there', usage = { prompt_tokens: 7, completion_tokens: 2 }, model = 'm'): Record<string, unknown> {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1700000000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: 'stop' }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

// ---- behaviours --------------------------------------------------------------------------

export interface StreamOptions {
  /** ms between events (real pacing; never used to synchronise a test). */
  delayMs?: number;
  /** Before writing event i (0-based), wait for this promise. */
  gate?: { before: number; until: Promise<unknown> };
  /** Called after each event is written. */
  onEvent?: (i: number) => void;
  status?: number;
  headers?: Record<string, string>;
}

/** Stream these SSE events (each its own write), then end. */
export function stream(events: readonly string[], o: StreamOptions = {}): Behaviour {
  return async (c) => {
    c.res.writeHead(o.status ?? 200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...o.headers });
    c.res.flushHeaders();
    for (let i = 0; i < events.length; i++) {
      if (c.res.destroyed) return;
      if (o.gate && o.gate.before === i) await o.gate.until;
      if (o.delayMs && i > 0) await new Promise((r) => setTimeout(r, o.delayMs));
      if (c.res.destroyed) return;
      await c.write(events[i] as string);
      o.onEvent?.(i);
    }
    c.res.end();
  };
}

/** Stream `n` tokens in vLLM's format. */
export function streamTokens(n: number, o: StreamOptions & ChunkOptions = {}): Behaviour {
  return stream(sseEvents(n, o), o);
}

/** Send the first `after` events, then destroy the socket (a worker crash mid-stream). */
export function destroyAfter(events: readonly string[], after: number): Behaviour {
  return async (c) => {
    c.res.writeHead(200, { 'content-type': 'text/event-stream' });
    c.res.flushHeaders();
    for (let i = 0; i < after && i < events.length; i++) await c.write(events[i] as string);
    c.res.socket?.destroy();
  };
}

/** Send events and end the response without `data: [DONE]`. */
export function truncated(events: readonly string[]): Behaviour {
  const cut = events.filter((e) => !e.startsWith('data: [DONE]'));
  return stream(cut);
}

export function json(body: unknown, status = 200): Behaviour {
  return (c) => {
    const s = JSON.stringify(body);
    c.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
    c.res.end(s);
  };
}

/** A status with an OpenAI-ish error body (vLLM answers 400 for bad params, 500/503 when sick). */
export function status(code: number, body: unknown = { error: { message: `scripted ${code}`, type: 'server_error', code } }): Behaviour {
  return json(body, code);
}

export function raw(code: number, body: string, contentType = 'application/json'): Behaviour {
  return (c) => {
    c.res.writeHead(code, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    c.res.end(body);
  };
}

/** 200 with a body that is not JSON. */
export function invalidJson(): Behaviour {
  return raw(200, '{"id":"x","choices":[{"message":');
}

/** Never answer (until the connection is closed by the other side or the server stops). */
export function hang(): Behaviour {
  return () => undefined;
}

/** Send headers, then never send a byte. */
export function hangAfterHeaders(): Behaviour {
  return (c) => {
    c.res.writeHead(200, { 'content-type': 'text/event-stream' });
    c.res.flushHeaders();
  };
}

/** Close the connection without answering (before any byte of the response). */
export function resetBeforeAnswer(): Behaviour {
  return (c) => {
    c.req.socket.destroy();
  };
}

// ---- the server ----------------------------------------------------------------------------

export interface Upstream {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  readonly requests: UpstreamRequest[];
  /** Queue behaviours for the next requests, in order. */
  script(...b: Behaviour[]): void;
  /** What to do when the script is empty. */
  setDefault(b: Behaviour): void;
  /** Resolves with the n-th request (1-based) once it has arrived (body read). */
  request(n: number): Promise<UpstreamRequest>;
  close(): Promise<void>;
}

export async function startUpstream(defaultBehaviour: Behaviour = json(chatBody())): Promise<Upstream> {
  const requests: UpstreamRequest[] = [];
  const queue: Behaviour[] = [];
  let dflt = defaultBehaviour;
  const waiters = new Map<number, ((r: UpstreamRequest) => void)[]>();
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let parsed: Record<string, unknown> | undefined;
      try {
        parsed = JSON.parse(body) as Record<string, unknown>;
      } catch {
        parsed = undefined;
      }
      let onClosed!: () => void;
      let onFinished!: () => void;
      const rec: UpstreamRequest = {
        n: requests.length + 1,
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        json: parsed,
        aborted: false,
        closed: new Promise<void>((r) => (onClosed = r)),
        finished: new Promise<void>((r) => (onFinished = r)),
      };
      res.on('finish', () => onFinished());
      res.on('close', () => {
        if (!res.writableFinished) rec.aborted = true;
        onClosed();
      });
      requests.push(rec);
      const ws = waiters.get(rec.n);
      if (ws) {
        waiters.delete(rec.n);
        for (const w of ws) w(rec);
      }
      const b = queue.shift() ?? dflt;
      const ctx: BehaviourCtx = {
        req,
        res,
        rec,
        write: (chunk) =>
          new Promise<void>((resolve) => {
            if (res.destroyed) {
              resolve();
              return;
            }
            res.write(chunk, () => resolve());
          }),
      };
      Promise.resolve(b(ctx)).catch(() => res.destroy());
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    requests,
    script: (...b) => queue.push(...b),
    setDefault: (b) => (dflt = b),
    request: (n) => {
      const have = requests[n - 1];
      if (have) return Promise.resolve(have);
      return new Promise((resolve) => {
        const list = waiters.get(n) ?? [];
        list.push(resolve);
        waiters.set(n, list);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A port on which nothing listens (bound, then closed): connections to it are refused. */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A promise with its resolve function exposed (gates for scripted streams). */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
