// The dashboard's server side on a real admin listener (port 0): its files with a strict CSP and
// nothing outside them, login to an HttpOnly SameSite=Strict session cookie, the admin API through
// that cookie (reads freely, changes only with the CSRF token and from this origin, and only with
// the role), sessions that expire on a moved clock, throttled failed logins, the charts' series.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSse } from '../../../src/cli/client.js';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';

let dir: string;
let worker: Server;
let app: App;
let base: string;
let now = 1_000_000;
const IDLE = 60_000;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-dash-'));
  const web = path.join(dir, 'web');
  mkdirSync(web);
  writeFileSync(path.join(web, 'index.html'), '<!doctype html><title>glidepath</title><script src="app.js"></script>');
  writeFileSync(path.join(web, 'app.js'), 'console.log(1)');
  writeFileSync(path.join(dir, 'secret.txt'), 'outside the bundle');
  worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  await new Promise<void>((r) => worker.listen(0, '127.0.0.1', r));
  const workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: {
      tokens: [
        { name: 'ops', role: 'operator', token: 'op-token' },
        { name: 'watcher', role: 'viewer', token: 'view-token' },
      ],
      session_idle_ms: IDLE,
    },
    models: [
      { name: 'llama', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [workerUrl] }, warmup: { requests: 0 } }], health: { enabled: false } },
    ],
  });
  app = await startGlidepath(cfg, { admin: { webRoot: web, now: () => now } });
  base = app.adminUrl;
});

afterAll(async () => {
  await app?.close();
  worker.closeAllConnections();
  await new Promise((r) => worker.close(r));
  rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, p: string, opts: { cookie?: string; csrf?: string; origin?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (opts.cookie !== undefined) headers.cookie = opts.cookie;
  if (opts.csrf !== undefined) headers['x-glidepath-csrf'] = opts.csrf;
  if (opts.origin !== undefined) headers.origin = opts.origin;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(`${base}${p}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // a file
  }
  return { status: res.statusCode, headers: res.headers, body: body as Record<string, unknown> & { error?: { code: string; message: string } } };
}

async function login(token: string): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const r = await call('POST', '/dashboard/login', { body: { token }, origin: base });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const setCookie = String(r.headers['set-cookie']);
  return { cookie: setCookie.split(';')[0] as string, csrf: r.body.csrf as string, setCookie };
}

describe('dashboard files', () => {
  it('sends / to /dashboard/ and serves the page with a strict CSP and nosniff', async () => {
    const root = await call('GET', '/');
    expect(root.status).toBe(302);
    expect(root.headers.location).toBe('/dashboard/');
    const page = await call('GET', '/dashboard/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'; script-src 'self'; style-src 'self'");
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    const js = await call('GET', '/dashboard/app.js');
    expect(js.headers['content-type']).toMatch(/^text\/javascript/);
    expect(js.headers.etag).toBeTypeOf('string');
  });

  it('serves nothing outside the bundle, however the path is spelt', async () => {
    for (const p of [
      '/dashboard/..%2fsecret.txt',
      '/dashboard/%2e%2e/secret.txt',
      '/dashboard/../secret.txt',
      '/dashboard/secret.txt',
      '/dashboard/.%2e/secret.txt',
    ]) {
      const r = await call('GET', p);
      expect(r.status, p).toBeGreaterThanOrEqual(400);
      expect(JSON.stringify(r.body), p).not.toContain('outside the bundle');
    }
  });
});

describe('login and the session cookie', () => {
  it('refuses a wrong token and gives a right one an HttpOnly, SameSite=Strict cookie (no Secure over plain HTTP), never the token', async () => {
    const bad = await call('POST', '/dashboard/login', { body: { token: 'nope' } });
    expect(bad.status).toBe(401);
    expect(bad.headers['set-cookie']).toBeUndefined();
    const r = await call('POST', '/dashboard/login', { body: { token: 'op-token' } });
    expect(r.status).toBe(200);
    const c = String(r.headers['set-cookie']);
    expect(c).toMatch(/^gp_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+$/);
    expect(r.body).toMatchObject({ name: 'ops', role: 'operator', idle_ms: IDLE });
    expect(JSON.stringify(r.body)).not.toContain('op-token');
  });

  it('refuses a login posted from another origin, and a body that is not {token}', async () => {
    expect((await call('POST', '/dashboard/login', { body: { token: 'op-token' }, origin: 'http://evil.example' })).status).toBe(403);
    const r = await call('POST', '/dashboard/login', { body: { token: 'op-token', extra: 1 } });
    expect(r.status).toBe(400);
    expect(r.body.error?.message).toContain('extra');
  });

  it('reads the admin API with the cookie alone, and tells the page its CSRF token', async () => {
    const s = await login('view-token');
    expect((await call('GET', '/admin/v1/status', { cookie: s.cookie })).status).toBe(200);
    const me = await call('GET', '/dashboard/session', { cookie: s.cookie });
    expect(me.body).toMatchObject({ name: 'watcher', role: 'viewer', csrf: s.csrf });
    // without a cookie: no session, which is no error
    const none = await call('GET', '/dashboard/session');
    expect([none.status, none.body]).toEqual([200, null]);
  });

  // regression: a malformed gp_session was answered "missing Authorization header", and hid a valid one after it
  it('answers a malformed session cookie with a 401 naming it, and takes a valid one after it', async () => {
    const bad = await call('GET', '/admin/v1/status', { cookie: 'gp_session=abc!' });
    expect(bad.status).toBe(401);
    expect(bad.body.error?.code).toBe('unauthorized');
    expect(bad.body.error?.message).toMatch(/the gp_session cookie is malformed/);
    const s = await login('view-token');
    expect((await call('GET', '/admin/v1/status', { cookie: `gp_session=abc!; ${s.cookie}` })).status).toBe(200);
  });

  it('answers a method a dashboard path does not take with 405 and its Allow header', async () => {
    const r = await call('GET', '/dashboard/login');
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe('POST');
  });

  it('refuses a change by cookie without the CSRF token, with a wrong one, or from another origin', async () => {
    const s = await login('op-token');
    const body = { reason: 'test' };
    const none = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, origin: base, body });
    expect(none.status).toBe(403);
    expect(none.body.error?.code).toBe('csrf_rejected');
    const wrong = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, origin: base, csrf: `${s.csrf.slice(0, -1)}x`, body });
    expect(wrong.body.error?.code).toBe('csrf_rejected');
    const elsewhere = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, origin: 'http://evil.example', csrf: s.csrf, body });
    expect(elsewhere.body.error?.code).toBe('csrf_rejected');
    const noOrigin = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, csrf: s.csrf, body });
    expect(noOrigin.body.error?.code).toBe('csrf_rejected');
    // with both, the call reaches the controller (no standby to roll back to: 409)
    const ok = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, origin: base, csrf: s.csrf, body });
    expect(ok.body.error?.code).toBe('no_standby');
  });

  it("refuses a viewer's change with 403 forbidden and audits it as denied", async () => {
    const s = await login('view-token');
    const r = await call('POST', '/admin/v1/models/llama/rollback', { cookie: s.cookie, origin: base, csrf: s.csrf, body: {} });
    expect(r.status).toBe(403);
    expect(r.body.error?.code).toBe('forbidden');
    const audit = await call('GET', '/admin/v1/audit?action=denied&actor=watcher', { cookie: s.cookie });
    expect((audit.body as unknown as { target: string }[])[0]?.target).toBe('POST /models/llama/rollback');
  });

  it('ends a session idle past its lifetime (session_expired), and keeps one in use alive', async () => {
    const idle = await login('view-token');
    const busy = await login('view-token');
    for (let i = 0; i < 3; i++) {
      now += IDLE / 2;
      expect((await call('GET', '/admin/v1/status', { cookie: busy.cookie })).status).toBe(200);
    }
    const r = await call('GET', '/admin/v1/status', { cookie: idle.cookie });
    expect(r.status).toBe(401);
    expect(r.body.error?.code).toBe('session_expired');
    expect((await call('GET', '/dashboard/session', { cookie: idle.cookie })).status).toBe(401);
  });

  it('ends an event stream opened with the cookie once its session has expired (the open stream does not keep it alive)', async () => {
    const s = await login('view-token');
    const res = await request(`${base}/admin/v1/events?unnamed=1`, { headers: { cookie: s.cookie } });
    expect(res.statusCode).toBe(200);
    const ended = res.body.text();
    now += IDLE + 1;
    // the stream's check runs every 5 s (DEFAULTS.dashboard.streamCheckMs) of real time
    const body = await ended;
    // unnamed: every event is a plain `data:` message
    expect(body).toMatch(/^data: \{"kind":"version_loading"/m);
    expect(body).not.toMatch(/^event:/m);
  }, 15_000);

  it('cuts off an event stream whose client stops reading once 1 MiB waits for it; reconnecting with Last-Event-ID resumes after that event', async () => {
    const sock = connect(Number(new URL(base).port), '127.0.0.1');
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write(`GET /admin/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer view-token\r\n\r\n`);
    sock.pause(); // a client that reads nothing
    let received = 0;
    const closed = new Promise<void>((r) => sock.once('close', () => r()));
    sock.on('error', () => undefined);
    // ~8 MB of events: far past the stream's 1 MiB and the sockets' buffers
    const message = 'x'.repeat(2_000);
    for (let i = 0; i < 4_000; i++) app.cp.events.emit({ kind: 'probe_set_unverified', model: 'llama', message });
    sock.on('data', (d: Buffer) => (received += d.length));
    sock.resume();
    await closed;
    expect(received).toBeLessThan(4_000 * message.length);
    // the client reconnects from the last event it has: it is sent what followed, and nothing before
    const seqs = app.cp.events.since(0).map((e) => e.seq);
    const from = seqs[seqs.length - 3] as number;
    const again = connect(Number(new URL(base).port), '127.0.0.1');
    again.on('error', () => undefined);
    again.write(`GET /admin/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer view-token\r\nLast-Event-ID: ${from}\r\n\r\n`);
    let text = '';
    await new Promise<void>((r) =>
      again.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes(`id: ${seqs[seqs.length - 1]}\n`)) r();
      }),
    );
    again.destroy();
    expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual(seqs.slice(-2));
  }, 30_000);

  it('logs out: the cookie is cleared and the session is gone', async () => {
    const s = await login('op-token');
    const out = await call('POST', '/dashboard/logout', { cookie: s.cookie, origin: base, csrf: s.csrf, body: {} });
    expect(out.status).toBe(200);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    expect((await call('GET', '/admin/v1/status', { cookie: s.cookie })).body.error?.code).toBe('session_expired');
  });

  it('throttles an address after too many failed logins, with Retry-After', async () => {
    now += 120_000;
    let last = await call('POST', '/dashboard/login', { body: { token: 'wrong' } });
    for (let i = 0; i < 12 && last.status === 401; i++) last = await call('POST', '/dashboard/login', { body: { token: 'wrong' } });
    expect(last.status).toBe(429);
    expect(last.body.error?.code).toBe('login_throttled');
    expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);
    // even the right token waits
    expect((await call('POST', '/dashboard/login', { body: { token: 'op-token' } })).status).toBe(429);
    now += 61_000;
    expect((await call('POST', '/dashboard/login', { body: { token: 'op-token' } })).status).toBe(200);
  });
});

describe('the series the charts draw', () => {
  it('streams a sample of every model each interval and keeps them as the model series', async () => {
    const ac = new AbortController();
    const res = await request(`${base}/admin/v1/series/stream`, { headers: { authorization: 'Bearer view-token' }, signal: ac.signal });
    expect(res.headers['content-type']).toBe('text/event-stream');
    let sample: { at: number; models: Record<string, { weights: Record<string, number> }> } | undefined;
    for await (const e of readSse(res.body)) {
      if (e.event !== 'sample') continue;
      sample = JSON.parse(e.data) as typeof sample;
      break;
    }
    ac.abort();
    expect(sample?.models.llama?.weights).toEqual({ v1: 1 });
    const hist = await call('GET', '/admin/v1/models/llama/series', { cookie: (await login('view-token')).cookie });
    expect((hist.body.points as { at: number }[]).some((p) => p.at === sample?.at)).toBe(true);
  });
});
