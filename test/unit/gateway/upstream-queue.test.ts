// The per-worker cap on requests in flight and the wait queue by priority: WaitQueue alone, then UpstreamPool against a raw worker.
import type net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamPool, WorkerQueueError } from '../../../src/gateway/upstream.js';
import { MAX_LANES, WaitQueue } from '../../../src/gateway/upstream-queue.js';
import { call, json, rawServer } from '../../helpers/raw-worker.js';

describe('WaitQueue', () => {
  const w = (name: string, rank: number, queuedAt: number) => ({ name, rank, queuedAt });

  it('serves the first lane first, arrival order within a lane', () => {
    const q = new WaitQueue<ReturnType<typeof w>>();
    for (const x of [w('b1', 2, 1), w('a1', 1, 2), w('b2', 2, 3), w('z', 0, 4), w('a2', 1, 5)]) q.push(x);
    expect(q.size).toBe(5);
    const order: string[] = [];
    for (let x = q.shift(); x !== undefined; x = q.shift()) order.push(x.name);
    expect(order).toEqual(['z', 'a1', 'a2', 'b1', 'b2']);
    expect(q.size).toBe(0);
  });

  it('finds the oldest waiter of any lane, and removes any waiter', () => {
    const q = new WaitQueue<ReturnType<typeof w>>();
    const late = w('late', 0, 9);
    const early = w('early', 3, 1);
    const mid = w('mid', 3, 5);
    q.push(late);
    q.push(early);
    q.push(mid);
    expect(q.oldest()?.name).toBe('early');
    expect(q.remove(mid)).toBe(true);
    expect(q.remove(mid)).toBe(false);
    expect(q.remove(early)).toBe(true);
    expect(q.oldest()?.name).toBe('late');
    expect(q.size).toBe(1);
  });

  it('makes room for a higher lane by evicting the newest of the lowest lane below it, never its own or a higher one', () => {
    const q = new WaitQueue<ReturnType<typeof w>>();
    for (const x of [w('p', 1, 1), w('s1', 2, 2), w('s2', 2, 3), w('b', 3, 4)]) q.push(x);
    expect(q.evictBelow(1)?.name).toBe('b');
    expect(q.evictBelow(1)?.name).toBe('s2');
    expect(q.evictBelow(2)).toBeUndefined();
    expect(q.evictBelow(0)?.name).toBe('s1');
    expect(q.evictBelow(1)).toBeUndefined();
    expect(q.evictBelow(0)?.name).toBe('p');
    expect(q.size).toBe(0);
  });

  it('clamps lanes to 0..MAX_LANES-1 and clears everything', () => {
    const q = new WaitQueue<ReturnType<typeof w>>();
    const hi = w('hi', -3, 1);
    const lo = w('lo', 99, 2);
    q.push(lo);
    q.push(hi);
    expect([hi.rank, lo.rank]).toEqual([0, MAX_LANES - 1]);
    expect(q.clear().map((x) => x.name)).toEqual(['hi', 'lo']);
    expect(q.size).toBe(0);
    expect(q.shift()).toBeUndefined();
  });
});

const OPTS = { connections: 4, connectTimeoutMs: 1000, keepAliveTimeoutMs: 4000, queueMax: 256, queueTimeoutMs: 30_000 };
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A worker that answers each request only when the test says so; `arrived(n)` resolves when n requests have reached it. */
async function heldWorker(opts: Partial<typeof OPTS>) {
  const held: { i: number; sock: net.Socket }[] = [];
  const waiters: { n: number; go: () => void }[] = [];
  const srv = await rawServer((i, sock) => {
    held.push({ i, sock });
    for (const x of waiters.splice(0))
      if (held.length >= x.n) x.go();
      else waiters.push(x);
    return undefined;
  });
  const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}`, { ...OPTS, ...opts });
  cleanups.push(
    () => srv.close(),
    () => pool.destroy(),
  );
  return {
    srv,
    pool,
    arrived: (n: number) => (held.length >= n ? Promise.resolve() : new Promise<void>((go) => waiters.push({ n, go }))),
    /** Answer the request that arrived k-th (0-based) with its body's `n`. */
    answer: (k: number) => {
      const h = held[k] as { i: number; sock: net.Socket };
      const body = /\{"n":(\d+)\}$/.exec(srv.requests[h.i] as string)?.[1] ?? '?';
      h.sock.write(json(`{"n":${body}}`));
    },
    /** The body `n` of each request the worker received, in arrival order. */
    bodies: () => srv.requests.map((r) => Number(/\{"n":(\d+)\}$/.exec(r)?.[1])),
  };
}

const ask = (pool: UpstreamPool, n: number, lane?: number) => call(pool, '/v1/completions', false, `{"n":${n}}`, undefined, lane);

describe('UpstreamPool: the cap on requests in flight', () => {
  it('sends at most `cap` at once; lowering it lets the running ones finish, raising it starts the waiting ones', async () => {
    const { pool, arrived, answer, bodies } = await heldWorker({ connections: 4 });
    pool.setCap(2);
    expect(pool.limit).toBe(2);
    const rs = [0, 1, 2, 3, 4].map((n) => ask(pool, n));
    await arrived(2);
    expect([pool.busy, pool.queued]).toEqual([2, 3]);
    // lowered below what runs: nothing is stopped, nothing new starts
    pool.setCap(1);
    answer(0);
    await rs[0]?.done;
    expect([pool.busy, pool.queued]).toEqual([1, 3]);
    answer(1);
    await rs[1]?.done;
    await arrived(3);
    expect([pool.busy, pool.queued]).toEqual([1, 2]);
    // raised: the waiting ones start at once, up to the new cap (and never past `connections`)
    pool.setCap(100);
    expect(pool.limit).toBe(4);
    await arrived(5);
    expect([pool.busy, pool.queued]).toEqual([3, 0]);
    for (const k of [2, 3, 4]) answer(k);
    const done = await Promise.all(rs.map((r) => r.done));
    expect(done.map((r) => r.parts.join(''))).toEqual([0, 1, 2, 3, 4].map((n) => `{"n":${n}}`));
    expect(bodies()).toEqual([0, 1, 2, 3, 4]);
    // a cap below 1 is 1: a worker always takes something
    pool.setCap(0);
    expect(pool.limit).toBe(1);
  });
});

describe('UpstreamPool: slots shared out by a degradation level', () => {
  it('below the top tier at most the share; continuations and the top tier may use every slot, and go first', async () => {
    const { pool, arrived, answer, bodies } = await heldWorker({ connections: 8 });
    pool.setCap(4, 0.5);
    expect([pool.limit, pool.sharedLimit]).toEqual([4, 2]);
    const low = [ask(pool, 0, 2), ask(pool, 1, 3), ask(pool, 2, 2)];
    await arrived(2);
    expect([pool.busy, pool.queued]).toEqual([2, 1]);
    // what a picker is told (roomFor): a slot is free to the top tier and continuations, none below
    const lane = (n: number) => ({ priority: () => n });
    expect([0, 1, 2, 3].map((n) => pool.roomFor(lane(n)))).toEqual([true, true, false, false]);
    expect(pool.roomFor({})).toBe(true); // (no priority: the top tier's lane)
    // the top tier and a continuation take the slots the share leaves
    const top = [ask(pool, 3, 1), ask(pool, 4, 0)];
    await arrived(4);
    expect([pool.busy, pool.queued]).toEqual([4, 1]);
    expect([0, 1, 2].map((n) => pool.roomFor(lane(n)))).toEqual([false, false, false]);
    const more = ask(pool, 5, 1);
    expect(pool.queued).toBe(2);
    // a slot frees with 3 in flight (≥ the share): only the top tier may take it
    answer(0);
    await arrived(5);
    expect(bodies().slice(4)).toEqual([5]);
    // the share counts every request in flight: the low lane waits until fewer than 2 run
    answer(1);
    await low[1]?.done;
    answer(2);
    await top[0]?.done;
    expect([pool.busy, pool.queued]).toEqual([2, 1]);
    answer(3);
    await arrived(6);
    expect(bodies()).toEqual([0, 1, 3, 4, 5, 2]);
    for (let k = 4; k < 6; k++) answer(k);
    await Promise.all([...low, ...top, more].map((r) => r.done));
    // back to the whole cap for everyone
    pool.setCap(4);
    expect(pool.sharedLimit).toBe(4);
  });
});

describe('UpstreamPool: the wait queue by priority', () => {
  it('sends waiting requests by lane, then arrival; a request without a priority waits in lane 1', async () => {
    const { pool, arrived, answer, bodies } = await heldWorker({ connections: 1 });
    const first = ask(pool, 0, 2);
    await arrived(1);
    const rs = [ask(pool, 1, 3), ask(pool, 2, 2), ask(pool, 3), ask(pool, 4, 0), ask(pool, 5, 3), ask(pool, 6, 1)];
    expect(pool.queued).toBe(6);
    for (let k = 0; k < 7; k++) {
      await arrived(k + 1);
      answer(k);
    }
    await Promise.all([first.done, ...rs.map((r) => r.done)]);
    expect(bodies()).toEqual([0, 4, 3, 6, 2, 1, 5]);
  });

  it('a full queue: a higher lane takes the place of the newest lower one (which hears `full` with its wait); an equal or lower lane is refused', async () => {
    const { pool, arrived, answer, bodies } = await heldWorker({ connections: 1, queueMax: 2 });
    const running = ask(pool, 0, 1);
    await arrived(1);
    const low1 = ask(pool, 1, 3);
    const low2 = ask(pool, 2, 3);
    const same = ask(pool, 3, 3);
    expect(same.r.error).toMatchObject({ reason: 'full', queuedMs: 0 });
    const high = ask(pool, 4, 1);
    expect(low2.r.error).toBeInstanceOf(WorkerQueueError);
    expect(low2.r.error?.message).toMatch(/higher priority took this one's place/);
    expect(low1.r.events).toEqual(['start']);
    expect(pool.queued).toBe(2);
    for (let k = 0; k < 3; k++) {
      await arrived(k + 1);
      answer(k);
    }
    await Promise.all([running.done, high.done, low1.done]);
    expect(bodies()).toEqual([0, 4, 1]);
  });

  it('one timeout for every lane: the oldest waiter expires first whatever its lane', async () => {
    const { pool, arrived, answer } = await heldWorker({ connections: 1, queueTimeoutMs: 1000 });
    const running = ask(pool, 0);
    await arrived(1);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const low = ask(pool, 1, 5);
      vi.advanceTimersByTime(300);
      const high = ask(pool, 2, 0);
      vi.advanceTimersByTime(700);
      expect(low.r.error).toMatchObject({ reason: 'timeout', queuedMs: 1000 });
      expect(high.r.events).toEqual(['start']);
      vi.advanceTimersByTime(300);
      expect(high.r.error).toMatchObject({ reason: 'timeout', queuedMs: 1000 });
      expect(pool.queued).toBe(0);
    } finally {
      vi.useRealTimers();
    }
    answer(0);
    expect((await running.done).parts.join('')).toBe('{"n":0}');
  });
});

describe('UpstreamPool: a worker taken out of its pool', () => {
  it('hands its waiting requests back at once (WorkerQueueError closed, with their wait), lets the running one finish', async () => {
    const { pool, arrived, answer } = await heldWorker({ connections: 1 });
    const running = ask(pool, 0);
    await arrived(1);
    const waiting = [ask(pool, 1, 1), ask(pool, 2, 3)];
    const closing = pool.close();
    for (const w of waiting) {
      expect(w.r.events).toEqual(['start', 'error']);
      expect(w.r.error).toBeInstanceOf(WorkerQueueError);
      expect(w.r.error).toMatchObject({ reason: 'closed', code: 'EQUEUECLOSED' });
      expect((w.r.error as WorkerQueueError).queuedMs).toBeGreaterThanOrEqual(0);
    }
    expect(pool.queued).toBe(0);
    answer(0);
    expect((await running.done).parts.join('')).toBe('{"n":0}');
    await closing;
  });
});
