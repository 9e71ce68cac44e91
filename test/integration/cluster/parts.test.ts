// The parts of cluster mode in process (an adversarial review's findings, each kept as a regression):
// the follower's forwarder (only the admin API, onto the leader's origin; Expect; its timeouts armed),
// the mirror (a sync never puts an older route back), the shipper (a batch the leader refuses is dropped,
// not retried forever), the registry (a fleet larger than one etcd transaction boots), and the leader's
// route publication (a commit whose answer was lost is kept; a store ahead of the data plane is overtaken).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { GlidepathConfig, ModelConfig, VersionConfig } from '../../../src/config/types.js';
import { buildDataPlane, startControl } from '../../../src/control/app.js';
import { createForwarder, forwardTarget } from '../../../src/control/forward.js';
import { Mirror } from '../../../src/control/mirror.js';
import { ControlPlane } from '../../../src/control/plane.js';
import { RecordShipper } from '../../../src/control/shipper.js';
import { UnavailableError } from '../../../src/errors.js';
import { Providers } from '../../../src/providers/index.js';
import { openKvStore } from '../../../src/store/kv/store.js';
import { Registry } from '../../../src/store/registry.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';
import type { Store, StoredRoute } from '../../../src/store/types.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';
import { MemoryKv } from '../../helpers/memory-kv.js';
import { versionConfig } from '../../unit/domain/version-fixture.js';

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

function listen(s: Server | ReturnType<typeof createNetServer>): Promise<number> {
  return new Promise((res) => s.listen(0, '127.0.0.1', () => res((s.address() as AddressInfo).port)));
}

/** Raw bytes in, the answer until the peer closes (or `ms` passes). */
function raw(port: number, text: string, ms = 3000): Promise<{ data: string; closed: boolean }> {
  return new Promise((res) => {
    const s = connect(port, '127.0.0.1');
    let data = '';
    const t = setTimeout(() => {
      s.destroy();
      res({ data, closed: false });
    }, ms);
    s.on('data', (d: Buffer) => (data += d.toString('latin1')));
    s.on('close', () => {
      clearTimeout(t);
      res({ data, closed: true });
    });
    s.on('error', () => undefined);
    s.write(text);
  });
}

/** A follower's admin port as cluster.ts builds it: a net server handing every connection to the forwarder, which hears 'listening'. */
async function follower(leaderUrl: string, timeouts?: { headersTimeout: number; requestTimeout: number }): Promise<number> {
  const fwd = createForwarder(
    () => leaderUrl,
    () => 'http://127.0.0.1:1',
  );
  if (timeouts) Object.assign(fwd, timeouts, { connectionsCheckingInterval: 100 });
  const front = createNetServer((socket: Socket) => fwd.emit('connection', socket));
  const port = await listen(front);
  fwd.emit('listening');
  closers.push(() => {
    fwd.closeAllConnections();
    fwd.close();
    front.close();
  });
  return port;
}

describe('the follower forwarder', () => {
  it('forwards only the admin API, onto the leader: a target naming another host is refused, never fetched', async () => {
    const hits: string[] = [];
    const leader = createServer((req, res) => {
      hits.push(`leader ${req.url}`);
      res.end('{}');
    });
    const victim = createServer((req, res) => {
      hits.push(`victim ${req.url}`);
      res.end('secret');
    });
    const [lp, vp] = [await listen(leader), await listen(victim)];
    closers.push(
      () => void leader.close(),
      () => void victim.close(),
    );
    const port = await follower(`http://127.0.0.1:${lp}`);
    const a = await raw(port, `GET //127.0.0.1:${vp}/latest/meta-data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n`);
    const b = await raw(port, `POST http://127.0.0.1:${vp}/v3/kv/put HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\r\n{}`);
    const c = await raw(port, `GET /admin/v1/status?x=1 HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(hits).toEqual(['leader /admin/v1/status?x=1']);
    expect(a.data).toContain('400');
    expect(a.data).toContain('invalid_path');
    expect(b.data).toContain('400');
    expect(c.data).toContain('x-glidepath-leader');
    expect(forwardTarget('http://leader:8081', '/admin/v1/a?b=c')?.href).toBe('http://leader:8081/admin/v1/a?b=c');
    for (const t of ['//evil/admin/v1/x', 'http://evil/admin/v1/x', '/metrics', '/admin/v1\\x', undefined])
      expect(forwardTarget('http://leader:8081', t)).toBeUndefined();
  });

  it('takes Expect: 100-continue (the header is not sent on) and drops the headers Connection names', async () => {
    const seen: string[] = [];
    const leader = createServer((req, res) => {
      seen.push(`${req.headers.expect ?? '-'} ${String(req.headers['x-hop'] ?? '-')}`);
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
    const port = await follower(`http://127.0.0.1:${await listen(leader)}`);
    closers.push(() => void leader.close());
    const body = JSON.stringify({ x: 'y'.repeat(2000) });
    const r = await raw(
      port,
      `POST /admin/v1/models/m/rollback HTTP/1.1\r\nHost: x\r\nConnection: x-hop\r\nX-Hop: 1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(r.data).toContain('{"ok":true}');
    expect(seen).toEqual(['- -']);
  });

  it('a call on a connection accepted while following, sent once this replica leads, is answered by its own admin server (regression: the election reset it; then, handed to the limited listener, it hung)', async () => {
    // a real admin server, with the connection limits every config has: its listener is a net server in
    // front of node:http, so a request must be handed to the HTTP server inside (AdminServer.answer)
    const worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
    const endpoint = `http://127.0.0.1:${await listen(worker)}`;
    closers.push(() => void worker.close());
    const cfg = parseConfig({
      models: [
        { name: 'm', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [endpoint] }, warmup: { requests: 0 } }], health: { enabled: false } },
      ],
    });
    expect(cfg.limits.admin).toBeDefined();
    const store = openMemoryStore();
    const control = await startControl(cfg, store, buildDataPlane(cfg));
    closers.push(async () => {
      control.controllers.shutdown();
      control.adminServer.close();
      await control.cp.shutdown(true);
      await store.close();
    });
    const SELF = 'http://127.0.0.1:1';
    let leaderUrl = 'http://127.0.0.1:2';
    let leading = false;
    const fwd = createForwarder(
      () => leaderUrl,
      () => SELF,
      () => (leading ? control.adminServer.answer : undefined),
    );
    const front = createNetServer((socket: Socket) => fwd.emit('connection', socket));
    const port = await listen(front);
    fwd.emit('listening');
    control.adminServer.emit('listening');
    closers.push(() => {
      fwd.closeAllConnections();
      fwd.close();
      front.close();
    });
    // the client's connection is accepted while another replica leads…
    const s = connect(port, '127.0.0.1');
    await new Promise<void>((r) => s.once('connect', () => r()));
    // …then this one is elected, and only then does the call come
    leaderUrl = SELF;
    leading = true;
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString('latin1')));
    const ended = new Promise<void>((r) => s.once('close', () => r()));
    s.write('GET /admin/v1/status HTTP/1.1\r\nHost: x\r\n\r\n');
    await ended;
    // the admin server's own answer: a call without a token is refused by its authentication
    expect(data).toMatch(/^HTTP\/1\.1 401 /);
    expect(data).toContain('"code":"unauthorized"');
  }, 10_000);

  it("arms node:http's timeouts: a client that never finishes its headers is closed", async () => {
    const leader = createServer((_req, res) => res.end('ok'));
    const port = await follower(`http://127.0.0.1:${await listen(leader)}`, { headersTimeout: 300, requestTimeout: 300 });
    closers.push(() => void leader.close());
    expect((await raw(port, 'GET /admin/v1/status HTTP/1.1\r\nHost: x\r\n', 5_000)).closed).toBe(true);
  });
});

const staticModel = {
  name: 'm',
  versions: [
    { id: 'v1', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } },
    { id: 'v2', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } },
  ],
  route: { weights: { v1: 1 } },
};
const route = (revision: number, weights: Record<string, number>): StoredRoute => ({ model: 'm', revision, weights, publishedAt: Date.now() });

describe('the mirror', () => {
  it('a sync that read before a newer route arrived by watch does not put the older one back', async () => {
    const cfg = parseConfig({ models: [staticModel] });
    const real = openMemoryStore();
    await new Registry(real).seedFromConfig(cfg);
    await real.putRoute(route(1, { v1: 1 }), 0);
    for (const v of ['v1', 'v2'])
      await real.upsertWorker({
        id: `m/${v}/0`,
        model: 'm',
        versionId: v,
        endpoint: 'http://127.0.0.1:9',
        provider: 'static',
        state: 'ready',
        gpus: [],
        startedAt: 0,
        updatedAt: 0,
      });
    // a sync's reads can be held, to place a watch event between its read and its apply
    let hold: Promise<void> | undefined;
    const store = new Proxy(real, {
      get(target, p, recv) {
        if (p === 'tx')
          return async (fn: Parameters<Store['tx']>[0]) => {
            const out = await target.tx(fn);
            if (hold) await hold;
            return out;
          };
        const v = Reflect.get(target, p, recv) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as Store;
    const { dp } = buildDataPlane(cfg);
    closers.push(() => dp.close());
    const mirror = new Mirror(cfg, store, dp, () => undefined);
    await mirror.syncAll();
    expect(dp.models.get('m')?.route.revision).toBe(1);
    await real.putRoute(route(2, { v1: 1, v2: 1 }), 1);
    let release!: () => void;
    hold = new Promise((r) => (release = r));
    const sync = mirror.sync('m'); // reads revision 2, then waits
    await new Promise((r) => setImmediate(r));
    await real.putRoute(route(3, { v2: 1 }), 2);
    mirror.changed({ area: 'routes', key: 'routes/m', value: route(3, { v2: 1 }) });
    expect(dp.models.get('m')?.route.revision).toBe(3);
    hold = undefined;
    release();
    await sync;
    expect(dp.models.get('m')?.route.revision).toBe(3);
    // the adapters registered through the leader's API reach the follower's data plane (settings watched)
    await real.setSetting('adapters.registered', { m: [{ name: 'fr', source: 'http://127.0.0.1:9/fr' }] }, 0);
    mirror.changed({ area: 'settings', key: 'settings/adapters.registered', value: {} });
    await expect.poll(() => dp.adapters.list().map((a) => `${a.model}/${a.name}`)).toEqual(['m/fr']);
    // an exact sync (after an outage, or a leader stepping down) takes the store's route whatever the data plane holds
    dp.restoreRoute({ model: 'm', weights: { v1: 1 } }, 9);
    await mirror.syncAll(true);
    expect(dp.models.get('m')?.route.revision).toBe(3);
  });
});

describe('the mirror of a replica started before the leader published', () => {
  it("takes the model's config adapters with the model, and reports nothing on the way", async () => {
    const cfg = parseConfig({ models: [{ ...staticModel, adapters: [{ name: 'de', source: 'http://127.0.0.1:9/de' }] }] });
    const store = openMemoryStore();
    const { dp } = buildDataPlane(cfg);
    closers.push(() => dp.close());
    const errors: string[] = [];
    const mirror = new Mirror(cfg, store, dp, (m) => errors.push(m));
    await mirror.syncAll(); // an empty store: nothing to serve yet
    expect(dp.models.has('m')).toBe(false);
    await new Registry(store).seedFromConfig(cfg);
    await store.putRoute(route(1, { v1: 1 }), 0);
    mirror.changed({ area: 'routes', key: 'routes/m', value: route(1, { v1: 1 }) });
    await mirror.sync('m');
    expect(dp.models.get('m')?.route.revision).toBe(1);
    expect(dp.adapters.list().map((a) => `${a.model}/${a.name}`)).toEqual(['m/de']);
    expect(errors).toEqual([]);
  });
});

const rec = (over: Partial<RequestRecord> = {}): RequestRecord => ({
  model: 'm',
  version: 'v1',
  worker: 'm/v1/0',
  status: 200,
  errorCode: undefined,
  stream: true,
  ttftMs: 10,
  queueMs: 0,
  tpotMs: NaN,
  itlMs: [],
  latencyMs: 20,
  promptTokens: 1,
  completionTokens: 1,
  at: Date.now(),
  retries: 0,
  shadow: false,
  ...over,
});

describe('the record shipper', () => {
  it('drops a batch the leader refuses (and says so) instead of sending it again before every later record', async () => {
    const got: number[] = [];
    let calls = 0;
    const leader = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        calls++;
        const n = (JSON.parse(body) as { records: unknown[] }).records.length;
        if (calls === 1) {
          res.statusCode = 400;
          res.end('{"error":{"code":"invalid_body"}}');
        } else {
          got.push(n);
          res.end('{}');
        }
      });
    });
    const url = `http://127.0.0.1:${await listen(leader)}`;
    closers.push(() => void leader.close());
    const telemetry = new Telemetry({ windowMaxSamples: 100, windowMaxAgeMs: 60_000 });
    const errors: string[] = [];
    const s = new RecordShipper(telemetry, {
      replica: 'f1',
      leader: () => url,
      token: () => Promise.resolve('t'),
      tokenRefused: () => undefined,
      onError: (m) => errors.push(m),
    });
    s.start();
    telemetry.ingest(rec({ itlMs: Array.from({ length: 5_000 }, () => 1) })); // kept with its first gaps only
    await s.flush(); // refused: dropped
    for (let i = 0; i < 10; i++) telemetry.ingest(rec());
    await s.flush();
    await s.stop({ flush: true });
    expect(got).toEqual([10]);
    expect([s.dropped, s.shipped]).toEqual([1, 10]);
    expect(errors[0]).toMatch(/refused 1 of the request records sent \(400\).*dropped/);
  });
});

function bigFleet(n: number, perModel: number): Pick<GlidepathConfig, 'models'> {
  const out: ModelConfig[] = [];
  for (let i = 0; i < n; i++) {
    const vs: VersionConfig[] = [];
    for (let j = 0; j < perModel; j++) vs.push(versionConfig(`v${j}`, `model-${i}`));
    out.push({ name: `model-${i}`, versions: vs } as unknown as ModelConfig);
  }
  return { models: out };
}

/** A backend whose commit lands but whose answer is lost once (etcd answered after the deadline). */
class LateKv extends MemoryKv {
  lateOnce = false;
  override async commit(guard: string, writes: ReadonlyMap<string, string | null>): Promise<boolean> {
    const ok = await super.commit(guard, writes);
    if (this.lateOnce) {
      this.lateOnce = false;
      throw new UnavailableError('store_unavailable', 'etcd memory: deadline exceeded');
    }
    return ok;
  }
}

describe('the leader on the key-value store', () => {
  it('boots a fleet with more versions than one etcd transaction writes (a transaction per model)', async () => {
    const r = await new Registry(await openKvStore(new MemoryKv(128))).seedFromConfig(bigFleet(65, 2));
    expect(r.added).toHaveLength(130);
  });

  it('keeps a route whose commit landed though its answer was lost, and overtakes a store that is ahead', async () => {
    const cfg = parseConfig({ store: { kind: 'etcd', endpoints: ['http://127.0.0.1:1'] }, models: [staticModel] });
    const kv = new LateKv();
    const store = await openKvStore(kv);
    const { dp } = buildDataPlane(cfg);
    closers.push(() => dp.close());
    dp.addModel({
      model: 'm',
      versions: [
        { id: 'v1', cardChecksum: 'a' },
        { id: 'v2', cardChecksum: 'b' },
      ],
      route: { model: 'm', weights: { v1: 1 } },
    });
    dp.setWorkers('m', 'v1', [{ id: 'w1', url: 'http://127.0.0.1:9' }]);
    dp.setWorkers('m', 'v2', [{ id: 'w2', url: 'http://127.0.0.1:9' }]);
    const cp = new ControlPlane(cfg, store, dp, new Providers());
    await cp.publishRoute({ model: 'm', weights: { v1: 1 } }); // revision 2
    kv.lateOnce = true;
    const r = await cp.publishRoute({ model: 'm', weights: { v2: 1 } });
    expect([r.route.revision, dp.models.get('m')?.route.revision, (await store.getRoute('m'))?.revision]).toEqual([3, 3, 3]);
    // a replica that no longer leads wrote revision 7: the next publication lands past it, and the data plane follows
    await store.putRoute({ model: 'm', revision: 7, weights: { v1: 1 } }, 3);
    const next = await cp.publishRoute({ model: 'm', weights: { v1: 1, v2: 1 } });
    expect([next.route.revision, dp.models.get('m')?.route.revision, (await store.getRoute('m'))?.revision]).toEqual([8, 8, 8]);
  });
});
