// Monitored rollback, plan and cache against a real control plane (in-process `glidepath up` with
// static workers on 127.0.0.1 port 0): admin endpoints with roles and audit, a real route-switch
// rollback, the webhook receiving the numbers.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';
import { cacheDownload } from '../../../src/fleet/cache.js';
import { versionSpec } from '../../../src/domain/version.js';
import { planFor } from '../../../src/rollout/planner.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';

let dir: string;
let worker: Server;
let hook: Server;
const hooks: unknown[] = [];
let app: App;
const ops = { name: 'ops' };

async function listen(s: Server): Promise<string> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

async function admin(method: 'GET' | 'PUT', p: string, token: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await request(`${app.adminUrl}/admin/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

function failed(version: string, at: number): RequestRecord {
  return {
    model: 'llama',
    version,
    worker: `llama/${version}/0`,
    status: 500,
    errorCode: 'upstream_error',
    stream: false,
    ttftMs: Number.NaN,
    tpotMs: Number.NaN,
    itlMs: [],
    latencyMs: 40,
    promptTokens: 5,
    completionTokens: 0,
    queueMs: 0,
    at,
    retries: 0,
    shadow: false,
  };
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-monitor-'));
  worker = createServer((req, res) => {
    if (req.url === '/health') return res.writeHead(200).end('ok');
    res.writeHead(404).end();
  });
  hook = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hooks.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(204).end();
    });
  });
  const workerUrl = await listen(worker);
  const hookUrl = await listen(hook);
  const weights = path.join(dir, 'v1.bin');
  writeFileSync(weights, 'v1 weights');
  const v = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    base_model: 'llama-3-8b',
    provider: { kind: 'static', endpoints: [workerUrl] },
    warmup: { requests: 0 },
    ...extra,
  });
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: {
      tokens: [
        { name: 'ops', role: 'operator', token: 'op-token' },
        { name: 'watcher', role: 'viewer', token: 'view-token' },
      ],
    },
    gpus: { count: 4, memory_gb: 80 },
    notifications: { webhooks: [`${hookUrl}/glidepath`] },
    cache: { max_versions: 2 },
    models: [
      {
        name: 'llama',
        // interval long enough that only the test's explicit checks act
        monitor: { min_requests: 10, interval_ms: 3_600_000 },
        // the stub worker answers /health only: no engine to probe
        health: { enabled: false },
        versions: [
          v('v1', { weights, weight_hash: `sha256:${createHash('sha256').update('v1 weights').digest('hex')}` }),
          v('v2', { weight_hash: 'b'.repeat(64) }),
        ],
        route: { weights: { v1: 1 } },
      },
    ],
  });
  app = await startGlidepath(cfg);
  await app.controllers.blueGreen.deploy('llama', 'v2', ops);
  await app.controllers.blueGreen.swap('llama', {}, ops);
});

afterAll(async () => {
  await app?.close();
  for (const s of [worker, hook]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('monitored rollback on a real control plane', () => {
  it('GET shows the config (disabled by default); a viewer cannot PUT', async () => {
    const g = await admin('GET', '/models/llama/monitor', 'view-token');
    expect(g.status).toBe(200);
    expect(g.json).toMatchObject({
      model: 'llama',
      active: 'v2',
      standby: 'v1',
      override: null,
      settings: { enabled: false, max_error_rate: 0.05, min_requests: 10, interval_ms: 3_600_000 },
    });
    const denied = await admin('PUT', '/models/llama/monitor', 'view-token', { enabled: true });
    expect(denied.status).toBe(403);
    const bad = await admin('PUT', '/models/llama/monitor', 'op-token', { enabled: 'yes', interval_ms: 5 });
    expect(bad.status).toBe(400);
    const unknown = await admin('GET', '/models/nope/monitor', 'view-token');
    expect(unknown.status).toBe(404);
  });

  it('an operator enables it; the change is audited and persisted', async () => {
    const p = await admin('PUT', '/models/llama/monitor', 'op-token', { enabled: true, max_error_rate: 0.1 });
    expect(p.status).toBe(200);
    expect(p.json.settings).toMatchObject({ enabled: true, max_error_rate: 0.1, min_requests: 10 });
    expect(await app.store.getSetting('monitor:llama')).toEqual({ enabled: true, maxErrorRate: 0.1 });
    expect((await app.store.queryAudit({ action: 'monitor_set' })).map((a) => [a.actor, a.target, a.result])).toEqual([['ops', 'llama', 'ok']]);
  });

  it('a healthy window leaves it alone; a failing one rolls back once and notifies with the numbers', async () => {
    const mon = app.controllers.monitor;
    const tel = app.cp.dp.telemetry;
    const vt = tel.forVersion('llama', 'v2');
    expect((await mon.check('llama')).action).toBe('ok'); // 0 requests: not judged
    const now = Date.now();
    for (let i = 0; i < 20; i++) tel.record(vt, failed('v2', now));
    const r = await mon.check('llama');
    expect(r.action).toBe('rolled_back');
    expect(r.rollback).toMatchObject({ rolled_back_to: 'v1', rolled_back_from: 'v2', method: 'instant_route_switch' });
    expect((await app.cp.registry.active('llama'))?.id).toBe('v1');
    expect(app.cp.route('llama').stable).toBe('v1');
    expect((await app.store.queryAudit({ action: 'rollback' })).map((a) => a.actor)).toContain('monitor');
    expect(r.notifications?.map((n) => n.ok)).toEqual([true]);
    expect(hooks).toHaveLength(1);
    expect(hooks[0]).toMatchObject({
      kind: 'monitored_rollback',
      model: 'llama',
      version: 'v1',
      data: { from: 'v2', to: 'v1', requests: 20, error_rate: 1, thresholds: { max_error_rate: 0.1 } },
    });
    expect((hooks[0] as { message: string }).message).toMatch(
      /^Auto-rollback triggered on llama: error rate 1\.0000 exceeded threshold 0\.1 over 20 requests\. Rolled back from v2 to v1 in \d+\.\d{3} ms\.$/,
    );
    // v2 is blocked as a rollback target: nothing left to roll back to, no flapping
    expect((await mon.check('llama')).action).toBe('no_standby');
    const g = await admin('GET', '/models/llama/monitor', 'view-token');
    expect(g.json).toMatchObject({ active: 'v1', standby: null, last_check: { action: 'no_standby' } });
    expect((await app.store.queryAudit({ action: 'notify' })).map((a) => a.result)).toEqual(['ok']);
  });
});

describe('plan and cache through the control plane', () => {
  it('planFor uses the inventory and the measured load times', async () => {
    const p = await planFor(app.ports, 'llama', 'v2');
    expect(p.current.id).toBe('v1');
    expect(p.cluster).toEqual({ totalGpus: 4, freeGpus: 4 });
    expect(p.risk.level).toBe('medium');
    expect(p.target.loadTimeEstimated).toBe(false);
    expect(p.rows.find((r) => r.strategy === 'blue-green')?.feasible).toBe(true);
    await expect(planFor(app.ports, 'llama', 'v1')).rejects.toThrow(/already active/);
  });

  it('cacheDownload copies, verifies, audits', async () => {
    const r = await cacheDownload(app.cp, 'llama', 'v1', ops);
    expect(r).toMatchObject({ verified: true, bytes: 10, alreadyCached: false });
    expect(r.path.startsWith(path.join(dir, 'state', 'cache'))).toBe(true);
    expect((await app.store.queryAudit({ action: 'cache_download' })).map((a) => [a.actor, a.target, a.result])).toEqual([['ops', 'llama/v1', 'ok']]);
    await expect(cacheDownload(app.cp, 'llama', 'v2', ops)).rejects.toThrow(/simulated: there is nothing to download/);
    expect((await app.store.queryAudit({ action: 'cache_download', result: 'error' })).map((a) => a.errorCode)).toEqual(['unsupported_weights_uri']);
  });

  it('an unverified download records the computed hash on the version', async () => {
    const file = path.join(dir, 'v3.bin');
    writeFileSync(file, 'v3');
    await app.cp.registry.register({ ...versionSpec(await app.cp.registry.get('llama', 'v2')), id: 'v3', weights: file, weightHash: undefined });
    const r = await cacheDownload(app.cp, 'llama', 'v3', ops);
    expect(r.verified).toBe(false);
    expect((await app.cp.registry.get('llama', 'v3')).metadata.computed_weight_hash).toBe(r.hash);
  });
});
