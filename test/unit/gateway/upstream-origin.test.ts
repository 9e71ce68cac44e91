// Workers at one origin share its idle keep-alive connections (upstream-origin.ts); their request slots,
// queues and in-flight counts stay their own.
import { afterEach, describe, expect, it } from 'vitest';
import type net from 'node:net';
import { UpstreamOrigins, UpstreamPool } from '../../../src/gateway/upstream.js';
import { VersionPool, Worker } from '../../../src/gateway/pool.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';
import type { Connection } from '../../../src/gateway/upstream-connection.js';
import type { Exchange } from '../../../src/gateway/upstream-exchange.js';
import { call, json, rawServer } from '../../helpers/raw-worker.js';
import type { RawServer } from '../../helpers/raw-worker.js';

const OPTS = { connections: 1, connectTimeoutMs: 1000, keepAliveTimeoutMs: 4000, queueMax: 256, queueTimeoutMs: 30_000 };
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(n: number, origins: UpstreamOrigins | undefined): Promise<{ srv: RawServer; pools: UpstreamPool[] }> {
  const srv = await rawServer(() => [json('{"ok":1}')]);
  const pools = Array.from({ length: n }, (_, i) => new UpstreamPool(`http://127.0.0.1:${srv.port}/w${i}`, OPTS, origins));
  cleanups.push(
    () => srv.close(),
    () => pools.forEach((p) => p.destroy()),
  );
  return { srv, pools };
}

describe('workers sharing an origin', () => {
  it("one after another, three workers' requests travel on one connection, each with its own path prefix", async () => {
    const { srv, pools } = await setup(3, new UpstreamOrigins());
    for (const p of pools) expect((await call(p).done).status).toBe(200);
    expect(srv.connections).toBe(1);
    expect(srv.requests.map((r) => r.slice(0, r.indexOf(' HTTP/1.1')))).toEqual([
      'POST /w0/v1/completions',
      'POST /w1/v1/completions',
      'POST /w2/v1/completions',
    ]);
  });

  it('without a shared registry each worker opens its own (as before)', async () => {
    const { srv, pools } = await setup(3, undefined);
    for (const p of pools) await call(p).done;
    expect(srv.connections).toBe(3);
  });

  it("a worker's request slots stay its own: one full worker queues, another at the origin does not", async () => {
    const { srv, pools } = await setup(2, new UpstreamOrigins());
    const [a, b] = pools as [UpstreamPool, UpstreamPool];
    const first = call(a);
    const queued = call(a);
    const other = call(b);
    expect([a.busy, a.queued, b.busy, b.queued]).toEqual([1, 1, 1, 0]);
    const [r1, r2, r3] = await Promise.all([first.done, queued.done, other.done]);
    expect([r1.status, r2.status, r3.status]).toEqual([200, 200, 200]);
    expect(r2.queuedMs).toBeGreaterThan(0);
    expect(r3.queuedMs).toBe(0);
    expect([a.busy, b.busy]).toEqual([0, 0]);
    // two were in flight at once: two connections, then shared
    expect(srv.connections).toBe(2);
    await call(b).done;
    await call(b).done;
    expect(srv.connections).toBe(2);
  });

  it("a worker that closes leaves its connection to the others; the last one's close closes it", async () => {
    const origins = new UpstreamOrigins();
    const { srv, pools } = await setup(2, origins);
    const [a, b] = pools as [UpstreamPool, UpstreamPool];
    await call(a).done;
    await a.close();
    expect(origins.size).toBe(1);
    await call(b).done;
    expect(srv.connections).toBe(1);
    await b.close();
    expect(origins.size).toBe(0);
    await srv.closed[0];
    // a worker added later at the origin starts afresh
    const c = new UpstreamPool(`http://127.0.0.1:${srv.port}`, OPTS, origins);
    cleanups.push(() => c.destroy());
    await call(c).done;
    expect(srv.connections).toBe(2);
  });

  it('a request in flight when its worker closes finishes; its connection then serves the next worker', async () => {
    const { srv, pools } = await setup(2, new UpstreamOrigins());
    const [a, b] = pools as [UpstreamPool, UpstreamPool];
    const inflight = call(a);
    const closed = a.close();
    expect((await inflight.done).status).toBe(200);
    await closed;
    await call(b).done;
    expect(srv.connections).toBe(1);
  });
});

describe('spare connections (gateway.preconnect)', () => {
  /** An origin that holds every request unanswered, noting on which of its connections (by order of accept) each came. */
  async function holding(): Promise<{ srv: RawServer; on: number[] }> {
    const on: number[] = [];
    const srv = await rawServer((_i, sock) => {
      on.push(srv.sockets.indexOf(sock));
      return undefined;
    });
    cleanups.push(() => srv.close());
    return { srv, on };
  }
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
  /** The top-up is done: a turn of the loop opened no spare (it opens a few a turn while it wants more). */
  async function afterTopUp(origins?: UpstreamOrigins): Promise<void> {
    for (let before = -1; before !== (origins?.idle ?? 0);) {
      before = origins?.idle ?? 0;
      await turn();
    }
  }
  async function until(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise((r) => setTimeout(r, 5));
  }

  it('keeps ratio × requests in flight idle (at most max per worker); a burst is written on them, not on new connects', async () => {
    const { srv, on } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64, preconnectRatio: 1, preconnectMax: 4 }, origins);
    cleanups.push(() => pool.destroy());
    call(pool);
    call(pool);
    expect(origins.idle).toBe(0);
    await afterTopUp(origins);
    // two in flight, two spares
    expect(origins.idle).toBe(2);
    await until(() => srv.connections === 4 && on.length === 2);
    // a burst of two (another worker's streams continued here): both go out on the spares opened before it
    call(pool);
    call(pool);
    await until(() => on.length === 4);
    expect(on.slice(2).every((i) => i < 4)).toBe(true);
    // and the spares are made up again, up to the bound per worker however many are in flight
    for (let i = 0; i < 10; i++) call(pool);
    await afterTopUp(origins);
    expect([pool.busy, origins.idle]).toEqual([14, 4]);
    await until(() => srv.connections === 18);
  });

  it('a few a turn of the loop: a burst that took many is not answered by one long run of connects', async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64, preconnectRatio: 1, preconnectMax: 16 }, origins);
    cleanups.push(() => pool.destroy());
    for (let i = 0; i < 10; i++) call(pool);
    const seen: number[] = [];
    for (let k = 0; k < 6; k++) {
      await turn();
      seen.push(origins.idle);
    }
    expect(seen).toEqual([2, 4, 6, 8, 10, 10]);
  });

  it("the data plane's bound on idle connections caps the spares of every worker together", async () => {
    const origins = new UpstreamOrigins(3);
    const pools: UpstreamPool[] = [];
    for (let i = 0; i < 2; i++) {
      const { srv } = await holding();
      const p = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64, preconnectRatio: 1, preconnectMax: 16 }, origins);
      cleanups.push(() => p.destroy());
      pools.push(p);
      for (let k = 0; k < 5; k++) call(p);
    }
    await afterTopUp(origins);
    expect(origins.idle).toBe(3);
  });

  it("no more spares than the worker's free request slots (a request past them waits for one)", async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 4, preconnectRatio: 1, preconnectMax: 16 }, origins);
    cleanups.push(() => pool.destroy());
    for (let k = 0; k < 3; k++) call(pool);
    await afterTopUp(origins);
    expect([pool.busy, origins.idle]).toEqual([3, 1]);
  });

  it('made up again when they idle out, while the streams that wanted them go on (no new request needed)', async () => {
    const { srv } = await holding();
    const pool = new UpstreamPool(
      `http://127.0.0.1:${srv.port}`,
      { ...OPTS, connections: 64, keepAliveTimeoutMs: 300, preconnectRatio: 0.5, preconnectMax: 16 },
      new UpstreamOrigins(),
    );
    cleanups.push(() => pool.destroy());
    for (let i = 0; i < 8; i++) call(pool);
    await until(() => pool.idle === 4);
    // the first four idle out at 300 ms and are replaced
    await until(() => srv.connections >= 16);
    expect([pool.busy, pool.idle]).toEqual([8, 4]);
  });

  it('go under the connections that have carried requests: a request takes a connected one first', async () => {
    const { srv } = await holding();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64, preconnectRatio: 1, preconnectMax: 16 }, new UpstreamOrigins());
    cleanups.push(() => pool.destroy());
    call(pool);
    call(pool);
    await turn();
    await until(() => srv.connections === 4 && srv.sockets.length === 4);
    await until(() => (pool as unknown as { shared: { idle: { connected: boolean }[] } }).shared.idle.every((c) => c.connected));
    // a burst over two turns of the loop: the top-up between them opens spares that are still connecting
    const first = call(pool);
    await turn();
    const second = call(pool);
    const carrier = (c: ReturnType<typeof call>): Connection | undefined => (c.ctl() as Exchange).conn as Connection | undefined;
    expect([carrier(first)?.connected, carrier(second)?.connected]).toEqual([true, true]);
  });

  it('one the worker closed while idle is like a reused connection: its request is sent again on a fresh one', async () => {
    const srv = await rawServer((i) => (i === 0 ? undefined : [json('{"ok":1}')]));
    cleanups.push(() => srv.close());
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 8, preconnectRatio: 1, preconnectMax: 1 }, new UpstreamOrigins());
    cleanups.push(() => pool.destroy());
    call(pool); // held: one spare
    await until(() => srv.connections === 2 && srv.requests.length === 1);
    await until(() => (pool as unknown as { shared: { idle: { connected: boolean }[] } }).shared.idle[0]?.connected === true);
    // the worker closes the idle spare (its keep-alive limit, a restart) before the gateway has read the FIN
    (srv.sockets[1] as net.Socket).end();
    const r = await call(pool).done;
    expect([r.error, r.status]).toEqual([undefined, 200]);
  });

  it("idle out at the worker's own keep-alive limit once a response has said it, even if opened before", async () => {
    const srv = await rawServer((i) => (i === 1 ? undefined : [json('{"ok":1}', 'keep-alive: timeout=2\r\n')]));
    cleanups.push(() => srv.close());
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 8, preconnectRatio: 1, preconnectMax: 1 }, new UpstreamOrigins());
    cleanups.push(() => pool.destroy());
    const t0 = performance.now();
    // the spare (socket 1) is opened while the first request is in flight, before its answer says
    // `timeout=2` (a limit of 1 s); the second request takes the first connection again and is held
    await call(pool).done;
    call(pool);
    await until(() => srv.connections >= 2);
    await srv.closed[1];
    // at the worker's limit (1 s, swept every 250 ms), not the default 4 s
    expect(performance.now() - t0).toBeLessThan(2_500);
  });

  it("a worker below its peers' mean keeps spares for that mean (peerLoad), from the first ask, before any request of its own", async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64, preconnectRatio: 0.5, preconnectMax: 16 }, origins);
    cleanups.push(() => pool.destroy());
    let mean = 0;
    pool.peerLoad = () => mean;
    // the version idle: asked, it opens none
    pool.wantSpares();
    await afterTopUp(origins);
    expect(origins.idle).toBe(0);
    // its peers carry 9 each: ceil(0.5 × 9) spares, with nothing in flight of its own
    mean = 9;
    pool.wantSpares();
    await afterTopUp(origins);
    expect([pool.busy, origins.idle]).toEqual([0, 5]);
    await until(() => srv.connections === 5);
    // its own load counts once it is the larger: 12 in flight want 6 (one more spare made up)
    for (let k = 0; k < 12; k++) call(pool);
    await afterTopUp(origins);
    expect([pool.busy, origins.idle]).toEqual([12, 6]);
    // still at most max_per_worker, however loaded its peers
    mean = 100;
    pool.wantSpares();
    await afterTopUp(origins);
    expect(origins.idle).toBe(16);
  });

  it("a worker admitted into a loaded version opens spares for its peers' mean at once; its version's idle workers keep none", async () => {
    const telemetry = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
    const version = new VersionPool('m', 'v1', 'card', telemetry.forVersion('m', 'v1'));
    const origins = new UpstreamOrigins();
    const ws: Worker[] = [];
    for (const id of ['a', 'b', 'fresh']) {
      const { srv } = await holding();
      const w = new Worker({ id, url: `http://127.0.0.1:${srv.port}`, weight: id === 'fresh' ? 0 : 1 }, 'v1', {
        ...OPTS,
        connections: 64,
        preconnectRatio: 0.5,
        preconnectMax: 16,
        origins,
      });
      cleanups.push(() => w.destroy());
      ws.push(w);
    }
    const [a, b, fresh] = ws as [Worker, Worker, Worker];
    version.workers = ws;
    // nothing in flight: nobody opens a spare
    await afterTopUp(origins);
    expect(origins.idle).toBe(0);
    // a and b carry 12 each (6 spares each for their own load)
    for (let k = 0; k < 12; k++) {
      call(a.upstream);
      call(b.upstream);
    }
    await afterTopUp(origins);
    expect([a.upstream.idle, b.upstream.idle, fresh.upstream.idle]).toEqual([6, 6, 0]);
    // the replacement passes its probes (weight 1): before its first request it holds spares for the
    // version's mean, (12 + 12 + 0) / 3 = 8 in flight → 4
    fresh.setHealth(1);
    version.refresh();
    await afterTopUp(origins);
    expect([fresh.upstream.busy, fresh.upstream.idle]).toEqual([0, 4]);
    // a worker taken out of rotation keeps spares for its own requests only (none made up towards it
    // for its peers once they idle out)
    a.setHealth(0);
    version.refresh();
    expect([a.upstream.peerLoad, typeof fresh.upstream.peerLoad]).toEqual([undefined, 'function']);
  });

  it('none without a ratio: connections are opened for requests only', async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64 }, origins);
    cleanups.push(() => pool.destroy());
    for (let k = 0; k < 5; k++) call(pool);
    await afterTopUp(origins);
    expect(origins.idle).toBe(0);
    await until(() => srv.connections === 5);
  });
});
