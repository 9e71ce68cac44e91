// The admin API's route table and its OpenAPI document: every endpoint that existed before the
// routes moved into src/api/routes/ is still there with its method and role, and every route that
// takes a body publishes that body's schema (regression: canary, experiment and monitor routes,
// defined by the strategies themselves, had no request schema in the document).
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRouter } from '../../../src/api/server.js';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';

let dir: string;
let worker: Server;
let app: App;

type Op = { description: string; requestBody?: { content: { 'application/json': { schema: { type?: string; properties?: Record<string, unknown> } } } } };
type Doc = { paths: Record<string, Record<string, Op>> };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-openapi-'));
  worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  await new Promise<void>((r) => worker.listen(0, '127.0.0.1', r));
  const workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    models: [
      { name: 'llama', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [workerUrl] }, warmup: { requests: 0 } }], health: { enabled: false } },
    ],
  });
  app = await startGlidepath(cfg);
});

afterAll(async () => {
  await app?.close();
  worker.closeAllConnections();
  await new Promise((r) => worker.close(r));
  rmSync(dir, { recursive: true, force: true });
});

/** Every admin endpoint as the CLI and the tests know it: method, path, role. */
const ENDPOINTS = [
  'GET /status viewer',
  'GET /workers viewer',
  'GET /gpus viewer',
  'GET /models/:model/versions viewer',
  'GET /models/:model/versions/:version viewer',
  'POST /models/:model/versions operator',
  'GET /models/:model/versions/:version/probes viewer',
  'POST /models/:model/versions/:version/probes/record operator',
  'PUT /models/:model/versions/:version/probes operator',
  'POST /workers/readmit operator',
  'GET /models/:model/capacity viewer',
  'POST /models/:model/deploy operator',
  'POST /models/:model/swap operator',
  'POST /models/:model/stop-start operator',
  'POST /models/:model/rollback operator',
  'POST /models/:model/versions/:version/retire operator',
  'GET /models/:model/route viewer',
  'PUT /models/:model/route operator',
  'GET /models/:model/plan viewer',
  'POST /models/:model/versions/:version/cache operator',
  'POST /models/:model/rolling operator',
  'GET /models/:model/rolling viewer',
  'GET /models/:model/rolling/history viewer',
  'GET /models/:model/rolling/events viewer',
  'POST /models/:model/rolling/pause operator',
  'POST /models/:model/rolling/resume operator',
  'POST /models/:model/rolling/abort operator',
  'POST /models/:model/rolling/restart operator',
  'POST /models/:model/rolling/undo operator',
  'POST /models/:model/canary operator',
  'GET /models/:model/canary viewer',
  'GET /models/:model/canary/history viewer',
  'GET /models/:model/canary/events viewer',
  'POST /models/:model/canary/pause operator',
  'POST /models/:model/canary/resume operator',
  'POST /models/:model/canary/promote operator',
  'POST /models/:model/canary/abort operator',
  'POST /models/:model/experiments operator',
  'GET /models/:model/experiments viewer',
  'POST /models/:model/experiments/analyze viewer',
  'POST /models/:model/experiments/stop operator',
  'GET /judge viewer',
  'GET /judge/samples viewer',
  'GET /models/:model/monitor viewer',
  'PUT /models/:model/monitor operator',
  'GET /models/:model/adapters viewer',
  'POST /models/:model/adapters operator',
  'POST /models/:model/adapters/remove operator',
  'POST /models/:model/adapters/:name/canary operator',
  'GET /models/:model/adapters/:name/canary viewer',
  'GET /models/:model/adapters/:name/canary/history viewer',
  'GET /models/:model/adapters/:name/canary/events viewer',
  'POST /models/:model/adapters/:name/canary/pause operator',
  'POST /models/:model/adapters/:name/canary/resume operator',
  'POST /models/:model/adapters/:name/canary/promote operator',
  'POST /models/:model/adapters/:name/canary/abort operator',
  'GET /scheduler viewer',
  'GET /scheduler/plan viewer',
  'POST /scheduler/time-sharing/:group/turn operator',
  'GET /audit viewer',
  'POST /cluster/records operator',
  'POST /cluster/judge-samples operator',
  'GET /events viewer',
  'GET /models/:model/series viewer',
  'GET /series/stream viewer',
  'GET /models/:model/canary/distributions viewer',
  'GET /openapi.json viewer',
];

async function openapi(): Promise<Doc> {
  const res = await request(`${app.adminUrl}/admin/v1/openapi.json`);
  expect(res.statusCode).toBe(200);
  return (await res.body.json()) as Doc;
}

describe('admin routes and the OpenAPI document', () => {
  it('every endpoint keeps its method, path and role; none is defined twice', () => {
    const routes = buildRouter({ cp: app.cp, controllers: app.controllers }).list();
    expect(routes.map((r) => `${r.method} ${r.path} ${r.role}`).sort()).toEqual([...ENDPOINTS].sort());
  });

  it('every route with a body has a requestBody with that body’s schema; every POST and PUT has a body', async () => {
    const routes = buildRouter({ cp: app.cp, controllers: app.controllers }).list();
    const doc = await openapi();
    for (const r of routes) {
      const op = doc.paths[`/admin/v1${r.path.replace(/:([a-z_]+)/g, '{$1}')}`]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.path}`).toBeDefined();
      if (r.method === 'POST' || r.method === 'PUT') expect(r.body, `${r.method} ${r.path} declares no body`).toBeDefined();
      if (r.body === undefined) {
        expect(op?.requestBody, `${r.method} ${r.path}`).toBeUndefined();
        continue;
      }
      const schema = op?.requestBody?.content['application/json'].schema;
      expect(schema?.type, `${r.method} ${r.path}`).toBe('object');
      expect(schema?.properties, `${r.method} ${r.path}`).toBeDefined();
    }
  });

  it('the canary, experiment and monitor bodies are described field by field', async () => {
    const doc = await openapi();
    const props = (p: string, m: string) =>
      Object.keys(doc.paths[`/admin/v1${p}`]?.[m]?.requestBody?.content['application/json'].schema.properties ?? {}).sort();
    expect(props('/models/{model}/canary', 'post')).toEqual(['shadow_share', 'stage_duration_ms', 'stages', 'version']);
    expect(props('/models/{model}/canary/abort', 'post')).toEqual(['reason']);
    expect(props('/models/{model}/experiments', 'post')).toEqual(['a', 'alpha', 'b', 'metric', 'min_detectable_effect', 'power', 'split']);
    expect(props('/models/{model}/experiments/stop', 'post')).toEqual(['promote']);
    expect(props('/models/{model}/experiments/analyze', 'post')).toEqual([]);
    expect(props('/models/{model}/monitor', 'put')).toEqual(['enabled', 'interval_ms', 'max_error_rate', 'max_p99_latency_ms', 'min_requests', 'reset']);
    expect(doc.paths['/admin/v1/models/{model}/canary']?.post?.description).toBe('Requires role: operator.');
  });

  it('a body the schema refuses is a 400 naming the field, before the controller runs', async () => {
    const res = await request(`${app.adminUrl}/admin/v1/models/llama/canary`, {
      method: 'POST',
      headers: { authorization: 'Bearer op-token', 'content-type': 'application/json' },
      body: JSON.stringify({ version: 'v2', stages: 'ten', speed: 'fast' }),
    });
    expect(res.statusCode).toBe(400);
    const body = (await res.body.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_body');
    expect(body.error.message).toMatch(/speed: unknown key "speed"/);
    expect(body.error.message).toMatch(/stages: /);
    expect(await app.store.listRollouts({ model: 'llama' })).toEqual([]);
  });
});
