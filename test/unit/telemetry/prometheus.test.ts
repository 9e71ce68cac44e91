// The Prometheus client and source against a real HTTP server on port 0 that answers as Prometheus's
// API does (form-encoded POST /api/v1/query, its JSON, its error bodies): the window's increases per
// series summed over replicas, resets, auth headers, and every failure as one catalogue error.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { PrometheusSourceConfig } from '../../../src/config/types.js';
import { PromClient, parseVector } from '../../../src/telemetry/prometheus.js';
import { PrometheusSource, binned, increases, windowSelector } from '../../../src/telemetry/prometheus-source.js';
import { rejected } from '../../helpers/errors.js';

type Handler = (q: { query: string; time: number; auth: string | undefined }, res: ServerResponse) => void;

let handler: Handler = (_q, res) => res.end();
const seen: { query: string; time: number; auth: string | undefined }[] = [];
let server: Server;
let url: string;

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = '';
    req.on('data', (c: Buffer) => (s += c.toString()));
    req.on('end', () => resolve(s));
  });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void body(req).then((b) => {
      if (req.method !== 'POST' || req.url !== '/api/v1/query' || req.headers['content-type'] !== 'application/x-www-form-urlencoded') {
        res.writeHead(404).end('404 page not found');
        return;
      }
      const f = new URLSearchParams(b);
      const q = { query: f.get('query') ?? '', time: Number(f.get('time')), auth: req.headers.authorization };
      seen.push(q);
      handler(q, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const json = (res: ServerResponse, status: number, doc: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
type Series = { labels: Record<string, string>; value: number };
const vector = (res: ServerResponse, t: number, series: Series[]) =>
  json(res, 200, {
    status: 'success',
    data: {
      resultType: 'vector',
      result: series.map((s) => ({ metric: s.labels, value: [t, Number.isFinite(s.value) ? String(s.value) : s.value > 0 ? '+Inf' : 'NaN'] })),
    },
  });

function source(extra: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}): PrometheusSource {
  const cfg = parseConfig({ models: [{ name: 'chat', versions: [{ id: 'v1' }] }], metrics_source: { kind: 'prometheus', url, ...extra } });
  return new PrometheusSource(cfg.metricsSource as PrometheusSourceConfig, env);
}

const s = (name: string, instance: string, version: string, value: number, more: Record<string, string> = {}): Series => ({
  labels: { __name__: name, instance, job: 'glidepath', model: 'chat', version, ...more },
  value,
});
const bucket = (name: string, instance: string, version: string, le: string, value: number) => s(`${name}_bucket`, instance, version, value, { le });
const LAT = 'glidepath_request_duration_seconds';

describe('PromClient', () => {
  it('reads an instant vector at the time asked, with special floats', async () => {
    handler = (q, res) => vector(res, q.time, [s('up', 'a', 'v1', 1), s('x', 'a', 'v1', Infinity)]);
    const c = new PromClient({ url, timeoutMs: 2_000, maxResponseBytes: 1 << 20 });
    const out = await c.instant('up', 1_700_000_000_123);
    expect(out.map((o) => o.value)).toEqual([1, Infinity]);
    expect(seen.at(-1)).toMatchObject({ query: 'up', time: 1_700_000_000.123 });
  });

  it("quotes Prometheus's own error, and the start of a body that is not its JSON", async () => {
    const c = new PromClient({ url, timeoutMs: 2_000, maxResponseBytes: 1 << 20 });
    handler = (_q, res) => json(res, 400, { status: 'error', errorType: 'bad_data', error: 'parse error at char 3' });
    let e = await rejected(c.instant('up{', 0));
    expect(e.code).toBe('metrics_source_error');
    expect(e.message).toContain('HTTP 400: (bad_data) parse error at char 3');
    handler = (_q, res) => res.writeHead(502).end('<html>bad gateway</html>');
    e = await rejected(c.instant('up', 0));
    expect(e.message).toContain('HTTP 502: "<html>bad gateway</html>"');
    handler = (_q, res) => json(res, 200, { status: 'success', data: { resultType: 'matrix', result: [] } });
    e = await rejected(c.instant('up', 0));
    expect(e.message).toContain('answered a matrix where an instant vector was expected');
    expect(() => parseVector('{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}', 'P')).toThrow('malformed vector element');
  });

  it('refuses an answer over max_response_bytes', async () => {
    handler = (q, res) =>
      vector(
        res,
        q.time,
        Array.from({ length: 200 }, (_, i) => s('up', `i${i}`, 'v1', 1)),
      );
    const e = await rejected(new PromClient({ url, timeoutMs: 2_000, maxResponseBytes: 4_096 }).instant('up', 0));
    expect(e.code).toBe('metrics_source_error');
    expect(e.message).toContain('more than 4096 bytes');
  });

  it('says unreachable when nothing listens, and when the answer does not come in time', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    let e = await rejected(new PromClient({ url: `http://127.0.0.1:${port}`, timeoutMs: 2_000, maxResponseBytes: 1 << 20 }).instant('up', 0));
    expect(e.code).toBe('metrics_source_unreachable');
    const held: ServerResponse[] = [];
    handler = (_q, res) => void held.push(res);
    e = await rejected(new PromClient({ url, timeoutMs: 150, maxResponseBytes: 1 << 20 }).instant('up', 0));
    expect(e.code).toBe('metrics_source_unreachable');
    expect(e.message).toContain('no answer within 150 ms');
    for (const r of held) r.end();
  });
});

describe('PrometheusSource', () => {
  it('selects its series by name, model, versions (regex-escaped) and the configured labels', () => {
    expect(windowSelector('chat', ['v1.2', 'v2'], { job: 'glidepath' })).toBe(
      '{__name__=~"glidepath_(requests_total|version_errors_total|time_to_first_token_seconds_bucket|time_per_output_token_seconds_bucket|request_duration_seconds_bucket|request_duration_seconds_sum|tokens_total)",model="chat",version=~"v1\\\\.2|v2",job="glidepath"}',
    );
  });

  it('increases: end - start per series; a reset or a series born inside counts its end value', () => {
    const start = [s('c', 'a', 'v1', 10), s('c', 'b', 'v1', 50)];
    const end = [s('c', 'a', 'v1', 25), s('c', 'b', 'v1', 4), s('c', 'c', 'v1', 7)];
    expect(increases(start, end).map((x) => x.value)).toEqual([15, 4, 7]);
  });

  it('cumulative buckets to per-bucket counts', () => {
    expect(
      binned(
        new Map([
          [Infinity, 10],
          [0.5, 7],
          [0.1, 3],
        ]),
      ),
    ).toEqual({ bounds: [0.1, 0.5, Infinity], counts: [3, 4, 3] });
  });

  it("reads a window: both versions' counters summed over replicas, 4xx left out, tokens of completions", async () => {
    const from = 1_700_000_000_000;
    const to = from + 60_000;
    const at = (t: number): Series[] => {
      const k = t === to / 1000 ? 1 : 0;
      return [
        // two replicas of the stable version
        s('glidepath_requests_total', 'g1', 'v1', 100 + k * 40, { code: '200' }),
        s('glidepath_requests_total', 'g2', 'v1', 5 + k * 60, { code: '200' }),
        s('glidepath_requests_total', 'g2', 'v1', 1 + k * 9, { code: '400' }),
        s('glidepath_version_errors_total', 'g1', 'v1', 0),
        bucket(LAT, 'g1', 'v1', '0.1', 50 + k * 30),
        bucket(LAT, 'g1', 'v1', '0.5', 100 + k * 40),
        bucket(LAT, 'g1', 'v1', '+Inf', 100 + k * 40),
        bucket(LAT, 'g2', 'v1', '0.1', 5 + k * 10),
        bucket(LAT, 'g2', 'v1', '0.5', 5 + k * 60),
        bucket(LAT, 'g2', 'v1', '+Inf', 5 + k * 60),
        s(`${LAT}_sum`, 'g1', 'v1', 20 + k * 8),
        s('glidepath_tokens_total', 'g1', 'v1', 1000 + k * 500, { kind: 'completion' }),
        s('glidepath_tokens_total', 'g1', 'v1', 9000 + k * 9000, { kind: 'prompt' }),
        // the canary, on one replica, born inside the window (no series at its start)
        ...(k === 1
          ? [
              s('glidepath_requests_total', 'g2', 'v2', 12, { code: '200' }),
              s('glidepath_requests_total', 'g2', 'v2', 3, { code: '502' }),
              s('glidepath_version_errors_total', 'g2', 'v2', 4),
              bucket(LAT, 'g2', 'v2', '0.1', 0),
              bucket(LAT, 'g2', 'v2', '0.5', 10),
              bucket(LAT, 'g2', 'v2', '+Inf', 15),
            ]
          : []),
      ];
    };
    handler = (q, res) => vector(res, q.time, at(q.time));
    const r = await source({ labels: { job: 'glidepath' }, bearer_token_env: 'PROM_TOKEN' }, { PROM_TOKEN: 's3cret' }).read('chat', ['v1', 'v2'], from, to);
    const last = seen.slice(-2);
    expect(last.map((q) => q.time).sort()).toEqual([from / 1000, to / 1000]);
    expect(last.every((q) => q.auth === 'Bearer s3cret' && q.query.includes('job="glidepath"'))).toBe(true);
    expect(r.get('v1')).toEqual({
      requests: 100,
      errors: 0,
      ttft: { bounds: [], counts: [] },
      tpot: { bounds: [], counts: [] },
      latency: { bounds: [0.1, 0.5, Infinity], counts: [40, 60, 0] },
      busyS: 8,
      outputTokens: 500,
      replicas: 2,
    });
    expect(r.get('v2')).toMatchObject({ requests: 15, errors: 4, latency: { bounds: [0.1, 0.5, Infinity], counts: [0, 10, 5] }, replicas: 1 });
  });

  it("engine tokens: each scrape target's increase of vllm:generation_tokens_total, summed over its label sets", async () => {
    const from = 1_700_000_000_000;
    const to = from + 30_000;
    handler = (q, res) => {
      const k = q.time === to / 1000 ? 1 : 0;
      const e = (instance: string, lora: string, v: number): Series => ({
        labels: { __name__: 'vllm:generation_tokens_total', instance, job: 'engines', lora },
        value: v,
      });
      vector(res, q.time, [e('10.0.0.1:8000', '', 100 + k * 900), e('10.0.0.1:8000', 'a1', 5 + k * 100), e('10.0.0.2:8000', '', 7 + k * 3)]);
    };
    const t = await source().engineTokens(['10.0.0.1:8000', '10.0.0.2:8000'], from, to);
    expect([...t]).toEqual([
      ['10.0.0.1:8000', 1000],
      ['10.0.0.2:8000', 3],
    ]);
    expect(seen.at(-1)?.query).toBe('{__name__="vllm:generation_tokens_total",instance=~"10\\\\.0\\\\.0\\\\.1:8000|10\\\\.0\\\\.0\\\\.2:8000"}');
    expect((await source().engineTokens([], from, to)).size).toBe(0);
  });

  it('bounds the window to max_window_ms; basic auth; a missing secret is a clear error', async () => {
    handler = (q, res) => vector(res, q.time, []);
    const to = 1_700_000_000_000;
    await source({ max_window_ms: 10_000, basic_auth: { username: 'glide', password_env: 'PW' } }, { PW: 'pw' }).read('chat', ['v1'], 0, to);
    expect(
      seen
        .slice(-2)
        .map((q) => q.time)
        .sort(),
    ).toEqual([(to - 10_000) / 1000, to / 1000]);
    expect(seen.at(-1)?.auth).toBe(`Basic ${Buffer.from('glide:pw').toString('base64')}`);
    const e = await rejected(source({ bearer_token_env: 'NOPE' }, {}).read('chat', ['v1'], 0, to));
    expect(e.code).toBe('metrics_source_error');
    expect(e.message).toContain('environment variable NOPE (metrics_source) is not set');
  });
});
