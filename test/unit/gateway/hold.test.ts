// HoldQueue: FIFO release, capacity, per-request timeout (fake clock), shutdown.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HoldQueue, HoldRejected } from '../../../src/gateway/hold.js';

const why = (e: unknown): string => (e instanceof HoldRejected ? e.reason : `not a HoldRejected: ${String(e)}`);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('HoldQueue', () => {
  it('releases waiters in arrival order', async () => {
    const q = new HoldQueue(10, 1000);
    const order: number[] = [];
    const ps = [0, 1, 2, 3, 4].map((i) => q.enqueue()!.then(() => order.push(i)));
    expect(q.depth).toBe(5);
    expect(q.releaseAll()).toBe(5);
    await Promise.all(ps);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(q.depth).toBe(0);
  });

  it('refuses when full (undefined, synchronously) and reports depth', () => {
    const depths: number[] = [];
    const q = new HoldQueue(2, 1000, (d) => depths.push(d));
    expect(q.enqueue()).toBeDefined();
    expect(q.enqueue()).toBeDefined();
    expect(q.enqueue()).toBeUndefined();
    expect(depths).toEqual([1, 2]);
    q.releaseAll();
    expect(depths.at(-1)).toBe(0);
  });

  it('times a waiter out at its limit; the others stay and keep their order', async () => {
    const q = new HoldQueue(10, 1000);
    const outcome: string[] = [];
    const a = q.enqueue()!.then(
      () => outcome.push('a released'),
      (e: unknown) => outcome.push(`a ${why(e)}`),
    );
    await vi.advanceTimersByTimeAsync(600);
    const b = q.enqueue()!.then(
      () => outcome.push('b released'),
      (e: unknown) => outcome.push(`b ${why(e)}`),
    );
    await vi.advanceTimersByTimeAsync(399);
    expect(outcome).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(outcome).toEqual(['a timeout']);
    expect(q.depth).toBe(1);
    expect(q.releaseAll()).toBe(1);
    await Promise.all([a, b]);
    expect(outcome).toEqual(['a timeout', 'b released']);
  });

  it('a timed-out waiter frees its place for a new one', async () => {
    const q = new HoldQueue(1, 100);
    const first = q.enqueue()!.catch(why);
    expect(q.enqueue()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(100);
    expect(await first).toBe('timeout');
    expect(q.enqueue()).toBeDefined();
    q.releaseAll();
  });

  it('released waiters never time out afterwards', async () => {
    const q = new HoldQueue(10, 100);
    const outcome: string[] = [];
    const p = q.enqueue()!.then(
      () => outcome.push('released'),
      () => outcome.push('timeout'),
    );
    q.releaseAll();
    await vi.advanceTimersByTimeAsync(1000);
    await p;
    expect(outcome).toEqual(['released']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('closeAll refuses everyone still waiting with "closed"', async () => {
    const q = new HoldQueue(10, 1000);
    const ps = [q.enqueue()!, q.enqueue()!].map((p) => p.catch(why));
    q.closeAll();
    expect(await Promise.all(ps)).toEqual(['closed', 'closed']);
    expect(q.depth).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a long hold with steady timeouts keeps its memory bounded (regression: timed-out waiters were kept until release)', async () => {
    const q = new HoldQueue(10, 100);
    const internal = q as unknown as { waiters: unknown[] };
    let timedOut = 0;
    for (let i = 0; i < 5000; i++) {
      const p = q.enqueue();
      expect(p, `enqueue ${i}`).toBeDefined();
      void p!.catch(() => timedOut++);
      await vi.advanceTimersByTimeAsync(20);
    }
    // at most five are waiting at any time (100 ms limit, one every 20 ms)
    expect(q.depth).toBeLessThanOrEqual(5);
    expect(timedOut).toBeGreaterThan(4990);
    expect(internal.waiters.length).toBeLessThan(200);
    const waiting = q.depth;
    expect(waiting).toBe(5000 - timedOut);
    expect(q.releaseAll()).toBe(waiting);
  });

  it('is reusable after a release', async () => {
    const q = new HoldQueue(2, 1000);
    const p1 = q.enqueue()!;
    q.releaseAll();
    await p1;
    const p2 = q.enqueue()!;
    expect(q.depth).toBe(1);
    q.releaseAll();
    await p2;
  });
});
