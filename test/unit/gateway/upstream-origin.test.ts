// Workers at one origin share its idle keep-alive connections (upstream-origin.ts); their request slots,
// queues and in-flight counts stay their own.
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamOrigins, UpstreamPool } from '../../../src/gateway/upstream.js';
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
  const afterTopUp = (): Promise<void> => new Promise((r) => setImmediate(r));
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
    await afterTopUp();
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
    await afterTopUp();
    expect([pool.busy, origins.idle]).toEqual([14, 4]);
    await until(() => srv.connections === 18);
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
    await afterTopUp();
    expect(origins.idle).toBe(3);
  });

  it("no more spares than the worker's free request slots (a request past them waits for one)", async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 4, preconnectRatio: 1, preconnectMax: 16 }, origins);
    cleanups.push(() => pool.destroy());
    for (let k = 0; k < 3; k++) call(pool);
    await afterTopUp();
    expect([pool.busy, origins.idle]).toEqual([3, 1]);
  });

  it('none without a ratio: connections are opened for requests only', async () => {
    const { srv } = await holding();
    const origins = new UpstreamOrigins();
    const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, connections: 64 }, origins);
    cleanups.push(() => pool.destroy());
    for (let k = 0; k < 5; k++) call(pool);
    await afterTopUp();
    expect(origins.idle).toBe(0);
    await until(() => srv.connections === 5);
  });
});
