// Hostile and broken clients against the admin API (issue 12): bad paths and Host values are 400s
// before authentication, admission (connection ceiling, per-address connections and rate) holds, and an
// oversized body gets a 413 the client can read.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';
import { Raw } from '../../helpers/raw.js';

let dir: string;
let worker: Server;
let app: App;
let port: number;

function get(p: string, extra = 'Host: admin\r\n'): string {
  return `GET ${p} HTTP/1.1\r\n${extra}Authorization: Bearer op-token\r\n\r\n`;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-admin-hostile-'));
  worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  await new Promise<void>((r) => worker.listen(0, '127.0.0.1', r));
  const workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    limits: { admin: { max_connections: 6, per_client_connections: 4, per_client_requests_per_s: 5, per_client_burst: 5 } },
    models: [
      { name: 'llama', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [workerUrl] }, warmup: { requests: 0 } }], health: { enabled: false } },
    ],
  });
  app = await startGlidepath(cfg);
  port = app.admin.port;
});

afterAll(async () => {
  await app?.close();
  worker.closeAllConnections();
  await new Promise((r) => worker.close(r));
  rmSync(dir, { recursive: true, force: true });
});

// Regression: the admin API answered an oversized body with 413 and destroyed the request at once,
// so a client still writing a chunked body got ECONNRESET (or EPIPE) instead of the answer. It now
// uses the one body reader (src/http/body.ts), which reads and drops the rest.
/** Send a head and a body the server refuses, read one whole answer, then close; any socket error is returned. */
function oversized(head: string, body: Buffer[], localAddress: string): Promise<{ reply: string; error: string | undefined }> {
  return new Promise((resolve) => {
    let reply = '';
    let error: string | undefined;
    const s = connect({ port, host: '127.0.0.1', localAddress }, () => {
      s.write(head);
      for (const part of body) s.write(part);
    });
    s.on('data', (d: Buffer) => {
      reply += d.toString('latin1');
      const end = reply.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(reply);
      if (end !== -1 && len && reply.length >= end + 4 + Number(len[1])) s.end();
    });
    s.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    s.on('close', () => resolve({ reply, error }));
  });
}

describe('the admin API refuses an oversized body with a 413 the client can read', () => {
  const big = Buffer.alloc(4 * 1024 * 1024, 'y');
  const start = 'POST /admin/v1/models/llama/versions HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer op-token\r\ncontent-type: application/json\r\n';

  it.each([
    ['content-length', `${start}content-length: ${big.length}\r\n\r\n`, [big], '127.0.0.21'],
    ['chunked', `${start}transfer-encoding: chunked\r\n\r\n`, [Buffer.from(`${big.length.toString(16)}\r\n`), big, Buffer.from('\r\n0\r\n\r\n')], '127.0.0.22'],
  ])('a client still sending (%s) reads its 413 instead of a reset', async (_name, head, body, from) => {
    const { reply, error } = await oversized(head, body, from);
    expect(error).toBeUndefined();
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(reply).toMatch(/"code":"body_too_large"/);
  });
});

describe('issue 12: the admin API against hostile clients', () => {
  it('malformed percent-encoding in an admin path is a 400 with an error body, before authentication', async () => {
    for (const p of ['/admin/v1/models/%E0%A4%A/versions', '/admin/v1/models/%/versions', '/admin/v1/models/%zz/versions/%C0']) {
      const raw = new Raw(port, '127.0.0.11').send(`GET ${p} HTTP/1.1\r\nHost: admin\r\n\r\n`);
      const [r] = await raw.responses(1);
      expect(r!.status, p).toBe(400);
      expect(JSON.parse(r!.body), p).toMatchObject({ error: { code: 'invalid_path', type: 'invalid_request_error' } });
      raw.socket.destroy();
    }
  });

  it('CONNECT is answered 405 with an error body, not dropped', async () => {
    const raw = new Raw(port, '127.0.0.19').send('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    await raw.close();
    expect(raw.text).toMatch(/^HTTP\/1\.1 405 /);
    expect(raw.text).toMatch(/"code":"method_not_allowed"/);
  });

  // regression: the admin listener had no clientError handler, so malformed HTTP got node's bare 400/431 without the error body
  it('malformed HTTP gets the catalogue code and JSON error body, not a bare 400 or 431', async () => {
    const ctl = new Raw(port, '127.0.0.23').send('GET /admin/v1/status HTTP/1.1\r\nHost: admin\r\nX-A: b\x01c\r\n\r\n');
    await ctl.close();
    expect(ctl.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(ctl.text).toMatch(/content-type: application\/json/);
    expect(ctl.text).toMatch(/"code":"invalid_header"/);
    expect(ctl.text).toMatch(/malformed HTTP request: Invalid header value char/);
    const big = new Raw(port, '127.0.0.24').send(`GET /admin/v1/status HTTP/1.1\r\nHost: admin\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    await big.close();
    expect(big.text).toMatch(/^HTTP\/1\.1 431 /);
    expect(big.text).toMatch(/"code":"headers_too_large"/);
    expect(big.text).toMatch(/"type":"invalid_request_error"/);
  });

  // regression: 405s carried no Allow header (RFC 9110 §15.5.6 requires it)
  it('a 405 lists the methods the path takes in Allow', async () => {
    const raw = new Raw(port, '127.0.0.25').send(
      'DELETE /admin/v1/status HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer op-token\r\n\r\n' +
        'POST /admin/v1/models/llama/route HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer op-token\r\ncontent-length: 0\r\n\r\n',
    );
    const [del, post] = await raw.responses(2);
    expect([del!.status, del!.headers.allow]).toEqual([405, 'GET']);
    expect([post!.status, post!.headers.allow]).toEqual([405, 'GET, PUT']);
    expect(JSON.parse(post!.body)).toMatchObject({
      error: { code: 'method_not_allowed', message: '/models/llama/route does not accept POST; it takes GET, PUT' },
    });
    raw.socket.destroy();
  });

  it('an invalid Host value is a 400', async () => {
    const raw = new Raw(port, '127.0.0.12').send(get('/admin/v1/status', 'Host: a b@c\r\n'));
    const [r] = await raw.responses(1);
    expect(r!.status).toBe(400);
    expect(JSON.parse(r!.body)).toMatchObject({ error: { code: 'invalid_host' } });
    raw.socket.destroy();
  });

  it('one address over its request rate gets 429 with Retry-After; another address is served', async () => {
    const raw = new Raw(port, '127.0.0.13');
    let all = '';
    for (let i = 0; i < 8; i++) all += get('/admin/v1/status');
    raw.send(all);
    const rs = await raw.responses(8);
    const codes = rs.map((r) => r.status);
    expect(codes.filter((c) => c === 200).length).toBeGreaterThanOrEqual(5);
    expect(codes).toContain(429);
    const limited = rs.find((r) => r.status === 429)!;
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(limited.body)).toMatchObject({ error: { code: 'rate_limited', type: 'rate_limit_error' } });
    const other = new Raw(port, '127.0.0.14').send(get('/admin/v1/status'));
    expect((await other.responses(1))[0]!.status).toBe(200);
    raw.socket.destroy();
    other.socket.destroy();
  });

  it('one address over its connection limit gets 429 at accept; the listener ceiling gives 503', async () => {
    const mine = [0, 1, 2, 3].map(() => new Raw(port, '127.0.0.15').send(get('/admin/v1/openapi.json')));
    for (const r of mine) expect((await r.responses(1))[0]!.status).toBe(200);
    const fifth = new Raw(port, '127.0.0.15');
    await fifth.close();
    expect(fifth.text).toMatch(/^HTTP\/1\.1 429 /);
    expect(fifth.text).toMatch(/too_many_connections/);
    // 4 open from .15: two more from elsewhere reach the ceiling of 6
    const others = [new Raw(port, '127.0.0.16'), new Raw(port, '127.0.0.17')];
    for (const o of others) o.send(get('/admin/v1/status'));
    for (const o of others) await o.responses(1);
    const over = new Raw(port, '127.0.0.18');
    await over.close();
    expect(over.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(over.text).toMatch(/retry-after: 1/);
    expect(over.text).toMatch(/server_overloaded/);
    const text = await app.cp.dp.telemetry.metrics.registry.metrics();
    expect(text).toMatch(/glidepath_client_refused_total\{listener="admin",reason="client_connections"\} 1/);
    expect(text).toMatch(/glidepath_client_refused_total\{listener="admin",reason="capacity"\} 1/);
    expect(text).toMatch(/glidepath_client_connections_max\{listener="admin"\} 6/);
    for (const r of [...mine, ...others]) r.socket.destroy();
  });
});
