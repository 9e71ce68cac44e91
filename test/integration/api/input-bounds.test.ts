// The admin API's bounds on what a caller may send (a review of its input validation): route weights
// whose sum overflows, sticky salts, durations past what a timer can wait, canary stage lists, the
// event stream's resume point and the audit log's time range are each a 400 naming the problem; and a
// route that was stored broken before these rules does not keep the next start from serving.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { GlidepathConfig } from '../../../src/config/types.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';

let dir: string;
const workers: Server[] = [];
let cfg: GlidepathConfig;
let app: App;

async function worker(): Promise<string> {
  const w = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  await new Promise<void>((r) => w.listen(0, '127.0.0.1', r));
  workers.push(w);
  return `http://127.0.0.1:${(w.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-admin-bounds-'));
  const static1 = { kind: 'static', endpoints: [await worker()] };
  const static2 = { kind: 'static', endpoints: [await worker()] };
  cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    models: [
      {
        name: 'llama',
        versions: [
          { id: 'v1', provider: static1, warmup: { requests: 0 } },
          { id: 'v2', provider: static2, warmup: { requests: 0 } },
        ],
        route: { weights: { v1: 1, v2: 0 } },
        health: { enabled: false },
      },
    ],
  });
  app = await startGlidepath(cfg);
});

afterAll(async () => {
  await app?.close();
  for (const w of workers) {
    w.closeAllConnections();
    await new Promise((r) => w.close(r));
  }
  rmSync(dir, { recursive: true, force: true });
});

type Answer = {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: { error?: { code: string; message: string } } & Record<string, unknown>;
};

async function admin(method: 'GET' | 'POST' | 'PUT', p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(`${app.adminUrl}/admin/v1${p}`, {
    method,
    headers: { authorization: 'Bearer op-token', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: JSON.parse(text) as Answer['body'] };
}

function refused(a: Answer, code: string, message: RegExp): void {
  expect(a.status, JSON.stringify(a.body)).toBe(400);
  expect(a.body.error?.code).toBe(code);
  expect(a.body.error?.message).toMatch(message);
}

describe('POST /cluster/records', () => {
  const rec = (o: Record<string, unknown>) => ({
    model: 'llama',
    version: 'v1',
    worker: 'llama/v1/0',
    status: 200,
    stream: false,
    ttftMs: null,
    queueMs: 0,
    tpotMs: null,
    itlMs: [],
    latencyMs: 12,
    promptTokens: 3,
    completionTokens: 4,
    at: Date.now(),
    retries: 0,
    shadow: false,
    ...o,
  });
  // a negative latency would read as a fast request in the judge's windows
  it('refuses a negative time or a time past the epoch range, naming the field; takes a good record', async () => {
    refused(await admin('POST', '/cluster/records', { replica: 'r2', records: [rec({ latencyMs: -5 })] }), 'invalid_body', /latencyMs/);
    refused(await admin('POST', '/cluster/records', { replica: 'r2', records: [rec({ itlMs: [3, -1] })] }), 'invalid_body', /itlMs/);
    refused(await admin('POST', '/cluster/records', { replica: 'r2', records: [rec({ at: 1e300 })] }), 'invalid_body', /at/);
    const ok = await admin('POST', '/cluster/records', { replica: 'r2', records: [rec({})] });
    expect([ok.status, ok.body.accepted]).toEqual([200, 1]);
  });
});

describe('PUT /models/:model/route', () => {
  // regression: 1e308 + 1e308 overflowed to Infinity, each weight normalised to 0, the route was
  // accepted (every request then a 503) and stored, and the next start refused it
  it('refuses integer weights whose sum overflows, and the route in force stays', async () => {
    const before = await admin('GET', '/models/llama/route');
    refused(
      await admin('PUT', '/models/llama/route', { weights: { v1: 1e308, v2: 1e308 } }),
      'invalid_route',
      /weights sum to Infinity, past the largest number/,
    );
    const after = await admin('GET', '/models/llama/route');
    expect([after.body.revision, after.body.weights]).toEqual([before.body.revision, before.body.weights]);
  });

  it('takes a sticky salt of 1 to 256 characters, as the config does', async () => {
    refused(
      await admin('PUT', '/models/llama/route', { weights: { v1: 1, v2: 0 }, sticky_salt: '' }),
      'invalid_body',
      /sticky_salt: expected a non-empty sticky salt/,
    );
    refused(
      await admin('PUT', '/models/llama/route', { weights: { v1: 1, v2: 0 }, sticky_salt: 's'.repeat(257) }),
      'invalid_body',
      /sticky_salt: expected a sticky salt of at most 256 characters, got 257 characters/,
    );
    const ok = await admin('PUT', '/models/llama/route', { weights: { v1: 1, v2: 0 }, sticky_salt: 's'.repeat(256) });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });
});

describe('durations past what a timer can wait', () => {
  // regression: above 2^31 - 1 ms Node's setTimeout fires after 1 ms: the monitor looked every ms
  it('refuses a monitor interval over a day, naming interval_ms; a day is taken', async () => {
    refused(
      await admin('PUT', '/models/llama/monitor', { interval_ms: 3_000_000_000 }),
      'invalid_body',
      /interval_ms: expected at most 86400000 ms \(a day\), got 3000000000/,
    );
    refused(await admin('PUT', '/models/llama/monitor', { interval_ms: 86_400_001 }), 'invalid_body', /interval_ms/);
    expect((await admin('PUT', '/models/llama/monitor', { interval_ms: 86_400_000 })).status).toBe(200);
    expect((await admin('PUT', '/models/llama/monitor', { reset: true })).status).toBe(200);
  });

  it('refuses a canary stage duration or a swap drain timeout past its bound', async () => {
    refused(
      await admin('POST', '/models/llama/canary', { version: 'v2', stage_duration_ms: 2 ** 31 }),
      'invalid_body',
      /stage_duration_ms: expected at most 2147483647 ms/,
    );
    refused(
      await admin('POST', '/models/llama/swap', { to: 'v2', drain_timeout_ms: 86_400_001 }),
      'invalid_body',
      /drain_timeout_ms: expected at most 86400000 ms/,
    );
    expect(await app.store.listRollouts({ model: 'llama' })).toEqual([]);
  });
});

describe('canary stage lists', () => {
  const many = Array.from({ length: 21 }, (_, i) => (i + 1) * 4.75);
  it('caps a canary, as an adapter canary, at 20 stages', async () => {
    refused(await admin('POST', '/models/llama/canary', { version: 'v2', stages: many }), 'invalid_body', /stages: at most 20 stages/);
    refused(
      await admin('POST', '/models/llama/adapters/a/canary', { source: '/lora/a2', version: '2', stages: many }),
      'invalid_body',
      /stages: at most 20 stages/,
    );
  });
});

describe('GET /events: where it resumes', () => {
  // regression: a bad value became 0 and replayed the whole backlog
  it.each([
    ['?since=abc', {}, /since: expected an event sequence number/],
    ['?since=1e999', {}, /since: expected an event sequence number/],
    ['?since=-1', {}, /since: expected an event sequence number/],
    ['?since=99999999999999999999', {}, /since: expected an event sequence number/],
    ['', { 'last-event-id': 'x' }, /Last-Event-ID header: expected an event sequence number .*, got "x"/],
  ])('refuses %s %o with 400 invalid_query naming it', async (q, headers, message) => {
    refused(await admin('GET', `/events${q}`, undefined, headers), 'invalid_query', message);
  });

  it('streams from a good one', async () => {
    const res = await request(`${app.adminUrl}/admin/v1/events?since=0`, { headers: { authorization: 'Bearer op-token', 'last-event-id': '3' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    res.body.destroy();
  });
});

describe('GET /audit: its time range', () => {
  // regression: on etcd the 16-digit key of 1e21 was "1e+21", which sorts among the wrong entries
  it.each([
    ['since', '1000000000000000000000'],
    ['until', '8640000000000001'],
    ['since', '-000001-01-01T00:00:00Z'],
  ])('refuses %s=%s outside 1970 to the year 275760', async (k, v) => {
    refused(await admin('GET', `/audit?${k}=${encodeURIComponent(v)}`), 'invalid_query', new RegExp(`${k}: expected a time from 1970 to the year 275760`));
  });

  it('takes the ends of the range', async () => {
    expect((await admin('GET', '/audit?since=0&until=8640000000000000')).status).toBe(200);
  });
});

describe("a rollout's event list: its pages", () => {
  // regression: a rollout past 10,000 events showed only its oldest 10,000, with no way to read on
  it('pages by after= and limit=, oldest first; a bad one is a 400 naming it', async () => {
    const started = await admin('POST', '/models/llama/canary', { version: 'v2' });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    expect((await admin('POST', '/models/llama/canary/abort', { reason: 'paging test' })).status).toBe(200);
    const all = (await admin('GET', '/models/llama/canary/events')).body as unknown as { seq: number; kind: string }[];
    expect(all.length).toBeGreaterThanOrEqual(2);
    const seqs = all.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const first = (await admin('GET', '/models/llama/canary/events?limit=1')).body as unknown as { seq: number }[];
    expect(first.map((e) => e.seq)).toEqual(seqs.slice(0, 1));
    const rest = (await admin('GET', `/models/llama/canary/events?after=${seqs[0]}&limit=10000`)).body as unknown as { seq: number }[];
    expect(rest.map((e) => e.seq)).toEqual(seqs.slice(1));
    expect((await admin('GET', `/models/llama/canary/events?after=${seqs.at(-1)}`)).body).toEqual([]);
    for (const [q, message] of [
      ['after=-1', /after: expected an event sequence number/],
      ['after=x', /after: expected an event sequence number/],
      ['limit=0', /limit: expected an integer from 1 to 10000, got "0"/],
      ['limit=10001', /limit: expected an integer from 1 to 10000/],
      ['limit=1.5', /limit: expected an integer from 1 to 10000/],
    ] as const) {
      refused(await admin('GET', `/models/llama/canary/events?${q}`), 'invalid_query', message);
      refused(await admin('GET', `/models/llama/rolling/events?${q}`), 'invalid_query', message);
    }
  });
});

describe('a route stored broken before these rules', () => {
  it('does not keep the next start from serving: everything goes to the active version, stored one revision on', async () => {
    const stored = await app.store.getRoute('llama');
    expect(stored).toBeDefined();
    // what the overflowing PUT used to store: every weight normalised to 0
    await app.store.tx((t) => t.putRoute({ ...stored!, weights: { v1: 0, v2: 0 }, revision: stored!.revision + 1 }, stored!.revision));
    await app.close();
    const said: string[] = [];
    app = await startGlidepath(cfg, { onProgress: (m) => said.push(m) });
    const route = await admin('GET', '/models/llama/route');
    expect(route.status).toBe(200);
    expect(route.body.weights).toEqual({ v1: 1 });
    expect(route.body.revision).toBe(stored!.revision + 2);
    expect((await app.store.getRoute('llama'))?.revision).toBe(stored!.revision + 2);
    expect(said.join('\n')).toMatch(
      /warning: the stored route of llama cannot be restored \(llama: weights sum to 0.*\); serving only its active version v1 instead/,
    );
  });
});
