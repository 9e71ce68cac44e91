import { describe, expect, it } from 'vitest';
import { FakeClock, Jitter, itlMs, jitterFactor, prefillMs, type TimingParams } from '../../../src/sim/timing.js';
import { Scheduler, type Ticket } from '../../../src/sim/scheduler.js';

const p: TimingParams = { prefillTokensPerS: 1000, interTokenMs: 10, itlGrowthPerSeq: 0.1, jitter: 0, latencyMultiplier: 1 };

describe('timing model', () => {
  it('prefill time is prompt tokens over the rate, times the latency fault', () => {
    expect(prefillMs(500, p)).toBe(500);
    expect(prefillMs(500, { ...p, latencyMultiplier: 3 })).toBe(1500);
  });

  it('inter-token latency grows with running sequences', () => {
    expect(itlMs(1, p)).toBe(10);
    expect(itlMs(11, p)).toBeCloseTo(20);
    expect(itlMs(11, { ...p, latencyMultiplier: 2 })).toBeCloseTo(40);
    expect(itlMs(5, { ...p, interTokenMs: 0 })).toBe(0);
  });

  it('jitter is seeded, centred on 1 with the requested spread, and clamped', () => {
    expect(jitterFactor(1, 0, 0)).toBe(1);
    const a = new Jitter(5, 0.1);
    const b = new Jitter(5, 0.1);
    const xs = Array.from({ length: 4000 }, () => a.next());
    expect(Array.from({ length: 4000 }, () => b.next())).toEqual(xs);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    const sd = Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / xs.length);
    expect(mean).toBeGreaterThan(0.99);
    expect(mean).toBeLessThan(1.01);
    expect(sd).toBeGreaterThan(0.085);
    expect(sd).toBeLessThan(0.115);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0.7);
    expect(Math.max(...xs)).toBeLessThanOrEqual(1.3);
    expect(new Jitter(6, 0.1).next()).not.toBe(new Jitter(5, 0.1).next());
  });

  it('the fake clock fires timers in time order', () => {
    const c = new FakeClock();
    const seen: string[] = [];
    c.setTimer(() => seen.push('b'), 20);
    const h = c.setTimer(() => seen.push('x'), 15);
    c.setTimer(() => {
      seen.push('a');
      c.setTimer(() => seen.push('a2'), 5);
    }, 10);
    c.clearTimer(h);
    c.advance(19);
    expect(seen).toEqual(['a', 'a2']);
    c.advance(1);
    expect(seen).toEqual(['a', 'a2', 'b']);
    expect(c.now()).toBe(20);
    expect(c.pending()).toBe(0);
  });
});

describe('scheduler', () => {
  const ticket = (need: number, log: number[], id: number): Ticket => ({ need, start: () => log.push(id) });

  it('runs up to max_num_seqs and queues the rest FIFO', () => {
    const s = new Scheduler(2, 1000, 10);
    const log: number[] = [];
    const t = [1, 2, 3, 4].map((i) => ticket(10, log, i));
    expect(t.map((x) => s.submit(x))).toEqual(['running', 'running', 'waiting', 'waiting']);
    expect([s.running, s.waiting, s.kvUsed]).toEqual([2, 2, 20]);
    s.release(t[1]!);
    expect(log).toEqual([1, 2, 3]);
    s.release(t[3]!); // cancel while waiting
    expect(s.waiting).toBe(0);
    s.release(t[0]!);
    s.release(t[2]!);
    expect([s.running, s.waiting, s.kvUsed]).toEqual([0, 0, 0]);
    expect(log).toEqual([1, 2, 3]);
  });

  it('holds requests while the KV cache is full, head of line first', () => {
    const s = new Scheduler(100, 100, 10);
    const log: number[] = [];
    const big = ticket(80, log, 1);
    const mid = ticket(50, log, 2);
    const small = ticket(10, log, 3);
    s.submit(big);
    expect(s.submit(mid)).toBe('waiting');
    expect(s.submit(small)).toBe('waiting'); // FCFS: no overtaking
    expect(s.kvUsage).toBeCloseTo(0.8);
    s.release(big);
    expect(log).toEqual([1, 2, 3]);
    expect(s.kvUsed).toBe(60);
  });

  it('rejects when the waiting queue is full', () => {
    const s = new Scheduler(1, 100, 1);
    const log: number[] = [];
    s.submit(ticket(1, log, 1));
    expect(s.submit(ticket(1, log, 2))).toBe('waiting');
    expect(s.submit(ticket(1, log, 3))).toBe('rejected');
  });
});
