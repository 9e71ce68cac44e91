// Regression: the admin API answered an oversized body with 413 and destroyed the request at once,
// so a client still writing a chunked body got ECONNRESET (or EPIPE) instead of the answer. It now uses
// the one body reader (src/http/body.ts), which reads and drops the rest.
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

let dir: string;
let worker: Server;
let app: App;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-admin-body-'));
  worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  await new Promise<void>((r) => worker.listen(0, '127.0.0.1', r));
  const workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    models: [{ name: 'llama', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [workerUrl] }, warmup: { requests: 0 } }] }],
  });
  app = await startGlidepath(cfg);
});

afterAll(async () => {
  await app?.close();
  worker.closeAllConnections();
  await new Promise((r) => worker.close(r));
  rmSync(dir, { recursive: true, force: true });
});

/** Send a head and a body the server refuses, read one whole answer, then close; any socket error is returned. */
function oversized(head: string, body: Buffer[]): Promise<{ reply: string; error: string | undefined }> {
  return new Promise((resolve) => {
    let reply = '';
    let error: string | undefined;
    const s = connect(app.admin.port, '127.0.0.1', () => {
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
    ['content-length', `${start}content-length: ${big.length}\r\n\r\n`, [big]],
    ['chunked', `${start}transfer-encoding: chunked\r\n\r\n`, [Buffer.from(`${big.length.toString(16)}\r\n`), big, Buffer.from('\r\n0\r\n\r\n')]],
  ])('a client still sending (%s) reads its 413 instead of a reset', async (_name, head, body) => {
    const { reply, error } = await oversized(head, body);
    expect(error).toBeUndefined();
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(reply).toMatch(/"code":"body_too_large"/);
  });
});
