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
