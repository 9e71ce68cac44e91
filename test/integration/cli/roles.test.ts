// Tokens from the config (admin, operator, viewer) through the real CLI: roles, 401/403 with the role
// named, several models (--model required), and drain-first swap to a sleeping standby and back.
/* eslint-disable @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument -- the CLI's JSON output is checked field by field */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gp, startUp } from './helpers.js';
import type { Run, Up } from './helpers.js';

const ADMIN = 'admin-secret-0123456789';
const OPERATOR = 'operator-secret-0123456789';
const VIEWER = 'viewer-secret-0123456789';

const CONFIG = `
auth:
  tokens:
    - { name: ops-admin, role: admin, token: ${ADMIN} }
    - { name: ci, role: operator, token: ${OPERATOR} }
    - { name: dashboard, role: viewer, token: ${VIEWER} }
gpus: { count: 6, memory_gb: 80 }
models:
  - name: chat
    priority: high
    versions:
      - id: v1
        weight_hash: sha256:1111
        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 0 } }
      - id: v2
        weight_hash: sha256:2222
        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 0 } }
    route: { weights: { v1: 1 } }
  - name: embed
    versions:
      - id: e1
        weight_hash: sha256:e1e1
        provider: { kind: sim, sim: { seed: 11, inter_token_ms: 0 } }
      - id: e2
        weight_hash: sha256:e2e2
        provider: { kind: sim, sim: { seed: 12, inter_token_ms: 0 } }
    route: { weights: { e1: 1 } }
`;

let up: Up;
const as = (token: string, ...args: string[]): Promise<Run> => gp(args, { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_TOKEN: token });

beforeAll(async () => {
  up = await startUp(CONFIG);
});

afterAll(async () => {
  expect(await up.stop()).toBe(0);
});

describe('glidepath admin verbs (tokens from the config)', () => {
  it('no admin-token file is generated; without a token the CLI gets 401 with a hint', async () => {
    expect(existsSync(join(up.dataDir, 'admin-token'))).toBe(false);
    const r = await gp(['status'], { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_DATA_DIR: up.dataDir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: missing Authorization header; send "Authorization: Bearer <token>" — no token found: set GLIDEPATH_TOKEN, pass --token/m);
    expect(r.stderr).toMatch(/\(unauthorized\)$/m);
  });

  it('with several models --model is required (exit 2); an unknown model is 404 (exit 1)', async () => {
    const r = await as(VIEWER, 'version', 'list');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--model is required: this fleet serves 2 models \(chat, embed\)/);
    const unknown = await as(VIEWER, 'version', 'list', '--model', 'nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/model "nope" is not in the config \(models: chat, embed\) \(model_not_found\)/);
    const ok = await as(VIEWER, 'version', 'list', '--model', 'embed');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^e1\s+active/m);
    const st = await as(VIEWER, 'status', '--model', 'embed', '-o', 'json');
    expect(st.json.models.map((m: { model: string }) => m.model)).toEqual(['embed']);
    const w = await as(VIEWER, 'workers', '--model', 'chat', '-o', 'json');
    expect(w.json.map((x: { id: string }) => x.id)).toEqual(['chat/v1/0']);
  });

  it('a viewer reads but every change is 403 (exit 1) naming the role and what it needs', async () => {
    const reads = await Promise.all([as(VIEWER, 'status'), as(VIEWER, 'version', 'show', 'v2', '-m', 'chat'), as(VIEWER, 'workers'), as(VIEWER, 'audit')]);
    for (const r of reads) expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const changes: [string[], string][] = [
      [['swap', '--confirm', '-m', 'chat'], 'POST /admin/v1/models/:model/swap'],
      [['deploy', 'green', '--version', 'v2', '-m', 'chat'], 'POST /admin/v1/models/:model/deploy'],
      [['rollback', '--instant', '-m', 'chat'], 'POST /admin/v1/models/:model/rollback'],
      [['version', 'register', '--id', 'v9', '-m', 'chat'], 'POST /admin/v1/models/:model/versions'],
    ];
    const runs = await Promise.all(changes.map(([args]) => as(VIEWER, ...args)));
    runs.forEach((r, i) => {
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`error: token "dashboard" has role viewer; ${changes[i]![1]} needs operator (forbidden)`);
    });
    const retire = await as(VIEWER, 'version', 'retire', 'v2', '-m', 'chat');
    expect(retire.code).toBe(1);
    expect(retire.stderr).toMatch(/has role viewer; POST \/admin\/v1\/models\/:model\/versions\/:version\/retire needs operator \(forbidden\)/);
    // denied attempts are in the audit log under the token's name
    const denied = await as(VIEWER, 'audit', '--actor', 'dashboard', '-o', 'json');
    expect(denied.json).toHaveLength(5);
    expect(denied.json.every((e: { action: string; error_code: string }) => e.action === 'denied' && e.error_code === 'forbidden')).toBe(true);
    expect(denied.json.map((e: { target: string }) => e.target)).toContain('POST /models/chat/swap');
  });

  it('the OpenAPI document is public and describes every endpoint with its role and body schema', async () => {
    const r = await fetch(`${up.adminUrl}/admin/v1/openapi.json`);
    expect(r.status).toBe(200);
    const doc = (await r.json()) as {
      paths: Record<
        string,
        Record<string, { description: string; requestBody?: { content: { 'application/json': { schema: { properties?: Record<string, unknown> } } } } }>
      >;
    };
    const register = doc.paths['/admin/v1/models/{model}/versions']!.post!;
    expect(register.description).toBe('Requires role: operator.');
    expect(Object.keys(register.requestBody!.content['application/json'].schema.properties!)).toEqual(
      expect.arrayContaining(['id', 'weights', 'weight_hash', 'tp', 'provider']),
    );
    const swap = doc.paths['/admin/v1/models/{model}/swap']!.post!;
    expect(Object.keys(swap.requestBody!.content['application/json'].schema.properties!).sort()).toEqual([
      'confirm',
      'drain_timeout_ms',
      'mode',
      'standby',
      'to',
    ]);
    expect(doc.paths['/admin/v1/models/{model}/plan']!.get!.description).toBe('Requires role: viewer.');
    expect(doc.paths['/admin/v1/models/{model}/versions/{version}/cache']!.post).toBeDefined();
  });

  it('a wrong token is 401 (exit 1)', async () => {
    const r = await as('not-a-token', 'status');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/invalid bearer token — the token in GLIDEPATH_TOKEN was rejected \(unauthorized\)/);
  });

  it('only an admin may register a version with a process provider (it runs a command on the host)', async () => {
    const file = join(up.dir, 'proc.yaml');
    writeFileSync(file, 'id: p1\nprovider: { kind: process, command: "vllm serve {weights} --port {port}" }\n');
    const op = await as(OPERATOR, 'version', 'register', '--file', file, '-m', 'chat');
    expect(op.code).toBe(1);
    expect(op.stderr).toMatch(
      /token "ci" has role operator; registering a version with a process provider \(a command run on this host\) needs admin \(forbidden\)/,
    );
    const admin = await gp(['version', 'register', '--file', file, '-m', 'chat', '--token', ADMIN, '--url', up.adminUrl, '-o', 'json']);
    expect(admin.code).toBe(0);
    expect(admin.json).toMatchObject({ version: 'p1', status: 'registered', provider: 'process' });
  });

  it('an operator deploys, swaps drain-first to a sleeping standby, and rolls back (waking it first)', async () => {
    const d = await as(OPERATOR, 'deploy', 'green', '--version', 'e2', '-m', 'embed');
    expect(d.code).toBe(0);
    expect(d.stderr).toMatch(/embed\/e2\/0: warming up/);
    const s = await as(OPERATOR, 'swap', '--confirm', '-m', 'embed', '--mode', 'drain-first', '--drain-timeout', '2000', '--standby', 'sleep');
    expect(s.code).toBe(0);
    expect(s.stdout).toMatch(/^Swapped embed: e1 → e2 \(drain-first\); route switch [\d.]+ ms/m);
    expect(s.stdout).toMatch(/^New requests held [\d.]+ m?s while e1 drained$/m);
    expect(s.stdout).toMatch(/^Drain: 0 in-flight request\(s\) finished in [\d.]+ m?s$/m);
    expect(s.stdout).toMatch(/e1 is now the standby \(asleep: weights in CPU memory, rollback wakes it first\)/);
    const list = await as(OPERATOR, 'version', 'list', '-m', 'embed');
    expect(list.stdout).toMatch(/^e1\s+standby \(asleep\)/m);
    const r = await as(OPERATOR, 'rollback', '--instant', '-m', 'embed', '-o', 'json');
    expect(r.code).toBe(0);
    expect(r.json).toMatchObject({ model: 'embed', rolled_back_to: 'e1', rolled_back_from: 'e2', method: 'wake_then_route_switch' });
    expect(r.json.wake_ms).toBeGreaterThan(0);
    expect(r.json.elapsed_ms).toBeLessThan(r.json.total_ms);
    const audit = await as(VIEWER, 'audit', '--actor', 'ci', '--result', 'ok');
    expect(audit.stdout).toMatch(/ci\s+rollback\s+embed\s+ok/);
    expect(audit.stdout).toMatch(/ci\s+swap\s+embed\s+ok\s+\S+ m?s\s+mode=drain-first drainTimeoutMs=2000 standby=sleep/);
  });

  it('regression: deploy green kept only the stable version in the route, dropping a running canary split', async () => {
    expect((await as(OPERATOR, 'deploy', 'green', '--version', 'v2', '-m', 'chat', '--quiet')).code).toBe(0);
    const put = await fetch(`${up.adminUrl}/admin/v1/models/chat/route`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
      body: JSON.stringify({ weights: { v1: 0.9, v2: 0.1 } }),
    });
    expect(put.status).toBe(200);
    expect((await as(OPERATOR, 'version', 'register', '--id', 'v3', '--weight-hash', 'sha256:3333', '-m', 'chat')).code).toBe(0);
    const d = await as(OPERATOR, 'deploy', 'green', '--version', 'v3', '-m', 'chat');
    expect(d.code).toBe(0);
    const st = await as(VIEWER, 'status', '-m', 'chat', '-o', 'json');
    expect(st.json.models[0].route.weights).toEqual({ v1: 0.9, v2: 0.1, v3: 0 });
    // a load that fails after the progress stream began arrives as its error event: exit 1 with the code
    expect((await as(OPERATOR, 'version', 'register', '--id', 'v4', '--tp', '2', '--weight-hash', 'sha256:4444', '-m', 'chat')).code).toBe(0);
    const full = await as(OPERATOR, 'deploy', 'green', '--version', 'v4', '-m', 'chat');
    expect(full.code).toBe(1);
    expect(full.stderr).toMatch(
      /^error: chat\/v4 needs 2 GPU\(s\) \(1 worker\(s\) × TP 2, ≥8 GB each\) but only 1 suitable of 1 free \(6 total\) \(insufficient_gpus\)$/m,
    );
    expect((await as(VIEWER, 'version', 'show', 'v4', '-m', 'chat')).stdout).toMatch(/status\s+failed[\s\S]*failure\s+.*insufficient_gpus/);
    const human = await as(VIEWER, 'status', '-m', 'chat');
    expect(human.stdout).toMatch(/^chat\s+high\s+v1\s+-\s+v1 90%, v2 10%\s+\d+$/m);
  });

  it('regression: swapping to a sleeping standby left it marked asleep, so a restart put the active version to sleep', async () => {
    // state: e1 active (woken by the rollback), e2 standby
    const away = await as(OPERATOR, 'swap', '--confirm', '-m', 'embed', '--to', 'e2', '--standby', 'sleep');
    expect(away.code).toBe(0);
    expect((await as(VIEWER, 'version', 'list', '-m', 'embed')).stdout).toMatch(/^e1\s+standby \(asleep\)/m);
    const back = await as(OPERATOR, 'swap', '--confirm', '-m', 'embed', '--to', 'e1');
    expect(back.code).toBe(0);
    expect(back.stdout).toMatch(/^Swapped embed: e2 → e1 \(overlap\)/m);
    await up.restart();
    const vs = await as(VIEWER, 'version', 'list', '-m', 'embed', '-o', 'json');
    expect(vs.json.map((v: { version: string; status: string; asleep: boolean }) => [v.version, v.status, v.asleep])).toEqual([
      ['e1', 'active', false],
      ['e2', 'standby', false],
    ]);
    const ws = await as(VIEWER, 'workers', '-m', 'embed', '-o', 'json');
    expect(ws.json.find((w: { version: string }) => w.version === 'e1')).toMatchObject({ state: 'ready', routable: true });
  });
});
