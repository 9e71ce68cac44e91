// A data plane + its HTTP server on port 0, built from the config defaults, and small HTTP clients
// for talking to it (raw bytes, streams that can be abandoned mid-way).
import { request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/types.js';
import type { RouteSpec } from '../../src/domain/route.js';
import { DataPlane } from '../../src/gateway/dataplane.js';
import { createDataServer, startListening } from '../../src/gateway/server.js';
import type { ListeningServer } from '../../src/gateway/server.js';
import { Telemetry } from '../../src/telemetry/telemetry.js';
import { afterEach } from 'vitest';
import { startUpstream } from './upstream.js';
import type { Upstream } from './upstream.js';

export function defaultGatewayConfig(over: Partial<GatewayConfig> = {}): GatewayConfig {
  return { ...parseConfig({ models: [{ name: 'm', versions: [{ id: 'v1' }] }] }).gateway, ...over };
}

export interface VersionSetup {
  id: string;
  /** Worker base URLs; ids are w0, w1, … unless given as {id,url}. */
  workers: (string | { id: string; url: string; kvRole?: 'prefill' | 'decode' })[];
  card?: string;
}

export interface ModelSetup {
  name: string;
  versions: VersionSetup[];
  route: Omit<RouteSpec, 'model'>;
}

export interface Gateway {
  dp: DataPlane;
  telemetry: Telemetry;
  srv: ListeningServer;
  url: string;
  close(): Promise<void>;
}

export async function startGateway(
  models: ModelSetup[],
  over: Partial<GatewayConfig> = {},
  opts: ConstructorParameters<typeof DataPlane>[2] = {},
): Promise<Gateway> {
  const cfg = defaultGatewayConfig(over);
  const telemetry = new Telemetry({ windowMaxSamples: 1000, windowMaxAgeMs: 300_000 });
  const dp = new DataPlane(cfg, telemetry, opts);
  for (const m of models) {
    // the route is set after workers exist (a weighted version with no workers is refused)
    const first = m.versions[0]!.id;
    dp.addModel({
      model: m.name,
      versions: m.versions.map((v) => ({ id: v.id, cardChecksum: v.card ?? 'card' })),
      route: { model: m.name, weights: { [first]: 1 } },
    });
    for (const v of m.versions) {
      dp.setWorkers(
        m.name,
        v.id,
        v.workers.map((w, i) => (typeof w === 'string' ? { id: `${v.id}-w${i}`, url: w } : w)),
      );
    }
    dp.setRoute({ ...m.route, model: m.name });
  }
  const srv = await startListening(createDataServer(dp), '127.0.0.1', 0);
  return {
    dp,
    telemetry,
    srv,
    url: srv.url,
    close: async () => {
      await dp.close();
      await srv.close();
    },
  };
}

/** One model `m` with one version `v1` served by `workers`. */
export function oneModel(workers: string[], name = 'm'): ModelSetup[] {
  return [{ name, versions: [{ id: 'v1', workers }], route: { weights: { v1: 1 } } }];
}

/** Model `m` with versions v1 (worker `v1`) and v2 (worker `v2`), all traffic on v1. */
export function twoVersions(v1: string, v2: string): ModelSetup[] {
  return [
    {
      name: 'm',
      versions: [
        { id: 'v1', workers: [v1] },
        { id: 'v2', workers: [v2] },
      ],
      route: { weights: { v1: 1, v2: 0 } },
    },
  ];
}

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  raw: Buffer;
  json(): Record<string, unknown>;
}

export interface PostOptions {
  headers?: Record<string, string>;
  method?: string;
  /** Raw body (string/Buffer) instead of JSON.stringify(body). */
  rawBody?: string | Buffer;
  contentType?: string | null;
}

export function httpCall(url: string, path: string, body?: unknown, o: PostOptions = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const payload = o.rawBody ?? (body === undefined ? undefined : JSON.stringify(body));
    const headers: Record<string, string> = { ...o.headers };
    if (payload !== undefined && o.contentType !== null) headers['content-type'] = o.contentType ?? 'application/json';
    const req = httpRequest(url + path, { method: o.method ?? (payload === undefined ? 'GET' : 'POST'), headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const text = raw.toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, raw, json: () => JSON.parse(text) as Record<string, unknown> });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) req.end(payload);
    else req.end();
  });
}

export function post(url: string, body: unknown, o: PostOptions = {}): Promise<HttpResult> {
  return httpCall(url, '/v1/chat/completions', body, o);
}

export function chatReq(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra };
}

/** A streaming request whose response can be read chunk by chunk and abandoned. */
export interface OpenStream {
  res: Promise<IncomingMessage>;
  /** Resolves with the first body chunk. */
  firstChunk: Promise<Buffer>;
  /** Resolves with the whole body once it ends (or rejects if it was destroyed). */
  done: Promise<Buffer>;
  abort(): void;
}

export function openStream(url: string, body: unknown, headers: Record<string, string> = {}): OpenStream {
  let abortFn: () => void = () => undefined;
  let resolveFirst!: (b: Buffer) => void;
  const firstChunk = new Promise<Buffer>((r) => (resolveFirst = r));
  let resolveRes!: (r: IncomingMessage) => void;
  let rejectAll!: (e: Error) => void;
  const res = new Promise<IncomingMessage>((r, j) => {
    resolveRes = r;
    rejectAll = j;
  });
  const done = new Promise<Buffer>((resolve, reject) => {
    const req = httpRequest(
      url + '/v1/chat/completions',
      { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, agent: false },
      (r) => {
        resolveRes(r);
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => {
          if (chunks.length === 0) resolveFirst(c);
          chunks.push(c);
        });
        r.on('end', () => resolve(Buffer.concat(chunks)));
        r.on('error', reject);
        r.on('aborted', () => reject(new Error('aborted')));
      },
    );
    req.on('error', (e) => {
      reject(e);
      rejectAll(e);
    });
    abortFn = () => req.destroy();
    req.end(JSON.stringify(body));
  });
  done.catch(() => undefined);
  res.catch(() => undefined);
  return { res, firstChunk, done, abort: () => abortFn() };
}

/** Parse an SSE body into its `data:` payloads. */
export function sseData(body: string): string[] {
  return body
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
}

/** Resolves once `cond()` holds, checked on every turn of the event loop (no fixed sleeps). */
export async function until(cond: () => boolean, what = 'condition', limitMs = 5000): Promise<void> {
  const started = Date.now();
  while (!cond()) {
    if (Date.now() - started > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/**
 * Per-test fixtures: scripted upstreams and gateways that are closed after each test (newest
 * first). Call once at the top of a test file.
 */
export function gatewayFixtures(): {
  upstream: () => Promise<Upstream>;
  gateway: (...args: Parameters<typeof startGateway>) => Promise<Gateway>;
  cleanups: (() => Promise<void>)[];
} {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });
  return {
    cleanups,
    upstream: async () => {
      const u = await startUpstream();
      cleanups.push(() => u.close());
      return u;
    },
    gateway: async (...args) => {
      const g = await startGateway(...args);
      cleanups.push(() => g.close());
      return g;
    },
  };
}
