// Cluster mode (docs/cluster.md, "Admin calls anywhere"; docs/security.md): a follower's admin port
// admits connections and calls as a single process's admin listener does (limits.admin: the connection
// ceiling, connections and requests per client). Regression: a follower's port had no admission at all,
// so one client could hold every descriptor of it; malformed HTTP got node's bare 400, not the catalogue's,
// and CONNECT no answer. A leader stopped with an admin event stream open hung.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, describe, expect } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { startReplica } from '../../../src/control/cluster.js';
import type { Replica } from '../../../src/control/cluster.js';
import { itWithEtcd, startEtcd } from '../../helpers/etcd.js';
import type { EtcdServer } from '../../helpers/etcd.js';

let etcd: EtcdServer | undefined;
let worker: Server | undefined;
const replicas: Replica[] = [];
const sockets: Socket[] = [];
let dir: string | undefined;

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const r of replicas.reverse()) await r.close();
  await etcd?.stop();
  worker?.closeAllConnections();
  worker?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function until(what: string, ms: number, pred: () => boolean | Promise<boolean>): Promise<void> {
  const t0 = Date.now();
  while (!(await pred())) {
    if (Date.now() - t0 > ms) throw new Error(`not ${what} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A connection from `from` (a loopback address of its own: the per-client limits go by address), open once connected. */
function open(port: number, from: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(s));
    s.once('error', reject);
    sockets.push(s);
  });
}

/** What the server sends on `s` after `text` (if any) until it closes. */
function answer(s: Socket, text?: string): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString('latin1')));
    s.on('error', () => undefined);
    s.once('close', () => resolve(data));
    if (text !== undefined) s.write(text);
  });
}

/** The admin port's open client connections, as the replica exports them (on its data port, which has no such limits). */
async function adminOpen(r: Replica): Promise<number> {
  const text = await (await fetch(`${r.dataUrl}/metrics`)).text();
  return Number(/^glidepath_client_connections\{listener="admin"\} (\S+)$/m.exec(text)?.[1] ?? NaN);
}

const call = (p: string): string => `GET ${p} HTTP/1.1\r\nHost: admin\r\n\r\n`;

describe("a follower's admin port", () => {
  itWithEtcd(
    'admits connections and calls by limits.admin (ceiling, per client), and answers malformed HTTP with the catalogue',
    async () => {
      etcd = await startEtcd();
      worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
      await new Promise<void>((r) => worker?.listen(0, '127.0.0.1', r));
      const endpoint = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
      const tmp = mkdtempSync(path.join(tmpdir(), 'gp-admission-'));
      dir = tmp;
      const config = (name: string) =>
        parseConfig({
          server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(tmp, name) },
          store: { kind: 'etcd', endpoints: [(etcd as EtcdServer).endpoint], prefix: '/admission', replica: name, lease_ttl_s: 2 },
          auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
          limits: { admin: { max_connections: 4, per_client_connections: 2, per_client_requests_per_s: 1, per_client_burst: 2 } },
          models: [
            { name: 'm', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [endpoint] }, warmup: { requests: 0 } }], health: { enabled: false } },
          ],
        });
      const r1 = await startReplica(config('r1'));
      replicas.push(r1);
      await until('r1 leading', 30_000, () => r1.role() === 'leader');
      const r2 = await startReplica(config('r2'));
      replicas.push(r2);
      await until('r2 following', 10_000, () => r2.leader() === r1.adminUrl);
      const port = Number(new URL(r2.adminUrl).port);

      // calls: the burst of two is forwarded to the leader, the third is refused here with its Retry-After
      const calls: string[] = [];
      for (let i = 0; i < 3; i++) calls.push(await answer(await open(port, '127.0.0.3'), call('/admin/v1/openapi.json')));
      expect(calls.slice(0, 2).map((a) => /^HTTP\/1\.1 (\d+)/.exec(a)?.[1])).toEqual(['200', '200']);
      expect(calls[0]).toMatch(/x-glidepath-leader: /i);
      expect(calls[2]).toMatch(/^HTTP\/1\.1 429 /);
      expect(calls[2]).toMatch(/retry-after: \d+/i);
      expect(calls[2]).toContain('"code":"rate_limited"');
      expect(calls[2]).not.toMatch(/x-glidepath-leader/i);

      // malformed HTTP: the catalogue's code and JSON body
      const bad = await answer(await open(port, '127.0.0.6'), 'GET /admin/v1/status HTTP/1.1\r\nHost: admin\r\nbad header\r\n\r\n');
      expect(bad).toMatch(/^HTTP\/1\.1 400 /);
      expect(bad).toContain('"code":"invalid_header"');

      // connections per client: two held open, the third refused at accept
      await until("the calls' connections closed on the replica", 10_000, async () => (await adminOpen(r2)) === 0);
      await open(port, '127.0.0.2');
      await open(port, '127.0.0.2');
      const third = await answer(await open(port, '127.0.0.2'));
      expect(third).toMatch(/^HTTP\/1\.1 429 /);
      expect(third).toContain('"code":"too_many_connections"');

      // the ceiling: four open in all, the fifth (another client) refused
      await until('the refused connection closed on the replica', 10_000, async () => (await adminOpen(r2)) === 2);
      await open(port, '127.0.0.4');
      await open(port, '127.0.0.4');
      const fifth = await answer(await open(port, '127.0.0.5'));
      expect(fifth).toMatch(/^HTTP\/1\.1 503 /);
      expect(fifth).toContain('"code":"server_overloaded"');
      expect(await adminOpen(r2)).toBe(4);
      for (const s of sockets.splice(0)) s.destroy();

      // CONNECT: the catalogue's 405, as on the leader's admin server (node:http dropped it without a word)
      await until('the connections closed on the replica', 10_000, async () => (await adminOpen(r2)) === 0);
      const connect = await answer(await open(port, '127.0.0.7'), 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
      expect(connect).toMatch(/^HTTP\/1\.1 405 /);
      expect(connect).toContain('"code":"method_not_allowed"');

      // the leader stopped with an event stream open on its admin port stops (regression: its front
      // waited for the stream, which only the admin server it had handed it to could end)
      // (from an address of its own: the leader counts the follower's forwarded calls as 127.0.0.1's)
      const own = new Agent({ localAddress: '127.0.0.8' });
      const events = await request(`${r1.adminUrl}/admin/v1/events`, { headers: { authorization: 'Bearer op-token' }, dispatcher: own });
      expect(events.statusCode).toBe(200);
      events.body.on('error', () => undefined);
      await r1.close();
      replicas.splice(replicas.indexOf(r1), 1);
      await own.destroy();
    },
    90_000,
  );
});
