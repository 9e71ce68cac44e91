// The adapter prefetcher with deterministic inputs: recent demand (decayed, registered adapters only,
// bounded whatever names arrive), the top-k and each one's workers by its share of demand, never an
// adapter in use or in the top-k evicted, no load for one already there; its round through a data
// plane's real AdapterSlots (one load per worker and adapter, counted as `prefetch`); the config.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { DataPlane } from '../../../src/gateway/dataplane.js';
import { AdapterDemand, planPrefetch } from '../../../src/gateway/prefetch.js';
import type { PrefetchWorker } from '../../../src/gateway/prefetch.js';
import type { AdapterLoader } from '../../../src/gateway/adapters.js';
import { ConfigError } from '../../../src/errors.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';

const minimal = { models: [{ name: 'm', versions: [{ id: 'v1' }] }] };
const demand = (o: Record<string, number>) => new Map(Object.entries(o));
/** A worker holding `slots` least recently used first: `name` loaded and idle, `name*` in use, `name~` loading. */
const worker = (id: string, slots: string[] = [], outstanding = 0): PrefetchWorker => ({
  id,
  outstanding,
  slots: slots.map((s) => ({ name: s.replace(/[*~]$/, ''), loaded: !s.endsWith('~'), inUse: s.endsWith('*') ? 1 : 0 })),
});

describe('AdapterDemand', () => {
  it('halves every half-life and forgets what fell below a hundredth', () => {
    const d = new AdapterDemand(1000, () => true);
    for (let i = 0; i < 4; i++) d.record('a', 0);
    d.record('b', 0);
    expect(d.scores(1000)).toEqual(demand({ a: 2, b: 0.5 }));
    d.record('a', 1000);
    expect(d.scores(2000).get('a')).toBeCloseTo(1.5);
    expect([...d.scores(8000).keys()]).toEqual(['a']); // b: 1/256 after 8 half-lives
  });

  it('counts registered adapters only: a flood of other names keeps nothing, and a removed adapter is dropped', () => {
    const registered = new Set(['a', 'b']);
    const d = new AdapterDemand(30_000, (n) => registered.has(n));
    for (let i = 0; i < 10_000; i++) d.record(`client-made-up-${i}`, i);
    d.record('a', 0);
    d.record('b', 0);
    expect(d.size).toBe(2);
    registered.delete('b');
    expect([...d.scores(1).keys()]).toEqual(['a']);
    expect(d.size).toBe(1);
  });
});

describe('planPrefetch', () => {
  it('takes the top-k by demand (ties by name), nothing with no demand', () => {
    const p = planPrefetch(demand({ c: 5, a: 9, b: 5, d: 1, z: 0 }), [worker('w0')], 8, 3);
    expect(p.top).toEqual(['a', 'b', 'c']);
    expect(planPrefetch(demand({ z: 0 }), [worker('w0')], 8, 3).top).toEqual([]);
  });

  it('places each on ceil(share × workers) workers, at least one; free slots, the fewest top-k held, the least busy first', () => {
    // shares of 100: a 60 → 3 of 4 workers, b 25 → 1, c 10 → 1 (at least one); d is outside the top 3
    const ws = [worker('w0', [], 5), worker('w1', [], 1), worker('w2', [], 0), worker('w3', ['x', 'y', 'z'], 0)];
    const p = planPrefetch(demand({ a: 60, b: 25, c: 10, d: 5 }), ws, 4, 3);
    expect(p.loads).toEqual([
      { worker: 'w2', adapter: 'a', evicts: undefined },
      { worker: 'w3', adapter: 'a', evicts: undefined }, // its last free slot
      { worker: 'w1', adapter: 'a', evicts: undefined },
      { worker: 'w0', adapter: 'b', evicts: undefined }, // busy, but the one without a top-k adapter
      { worker: 'w2', adapter: 'c', evicts: undefined }, // w3 is full now: free slots go first
    ]);
  });

  it('loads nothing where the adapter is already (loaded or loading), and only up to its share', () => {
    const ws = [worker('w0', ['a']), worker('w1', ['b~']), worker('w2')];
    // half the demand each: one of two workers
    expect(planPrefetch(demand({ a: 10, b: 10 }), ws.slice(0, 2), 8, 2).loads).toEqual([]);
    // a wants 2 of 3 workers (10/15 × 3): one more
    expect(planPrefetch(demand({ a: 10, b: 5 }), ws, 8, 2).loads).toEqual([{ worker: 'w2', adapter: 'a', evicts: undefined }]);
  });

  it('never evicts an adapter in use or one of the top-k; evicts the least recently used of the others', () => {
    // w0: full of adapters in use; w1: full of top-k ones and ones in use; w2: three it may evict, x oldest
    const ws = [worker('w0', ['p*', 'q*', 'r*', 't*']), worker('w1', ['a', 'b', 's*', 'u*']), worker('w2', ['b', 'x', 'y', 'v'])];
    const p = planPrefetch(demand({ a: 5, b: 4, c: 3, x: 0.1 }), ws, 4, 3);
    expect(p.loads).toEqual([
      { worker: 'w2', adapter: 'a', evicts: 'x' },
      { worker: 'w2', adapter: 'c', evicts: 'y' },
    ]);
    // nothing left to evict anywhere: no load
    expect(planPrefetch(demand({ a: 5, b: 4, c: 3 }), [ws[0] as PrefetchWorker, ws[1] as PrefetchWorker], 4, 3).loads).toEqual([]);
  });

  it('leaves every worker one slot that the top-k does not take', () => {
    const p = planPrefetch(demand({ a: 4, b: 3, c: 2, d: 1 }), [worker('w0')], 3, 4);
    expect(p.loads.map((l) => l.adapter)).toEqual(['a', 'b']);
  });
});

/** A loader whose loads wait for the test; counted per worker and adapter. */
function heldLoader() {
  const calls: string[] = [];
  const waiting: (() => void)[] = [];
  const loader: AdapterLoader = {
    load: (url, name) => {
      calls.push(`load ${name} ${url}`);
      return new Promise((r) => waiting.push(r));
    },
    unload: (url, name) => {
      calls.push(`unload ${name} ${url}`);
      return Promise.resolve();
    },
  };
  const settle = () => new Promise((r) => setImmediate(r));
  /** Let go of every load asked so far (a load is asked once its unload, if any, answered). */
  const release = async () => {
    await settle();
    for (const go of waiting.splice(0)) go();
    await settle();
  };
  return { loader, calls, release };
}

function dataPlane(loader: AdapterLoader, gateway: Record<string, unknown> = {}) {
  const cfg = parseConfig({ ...minimal, gateway: { adapter_prefetch: { top_k: 2 }, ...gateway } }).gateway;
  const telemetry = new Telemetry({ windowMaxSamples: 100, windowMaxAgeMs: 60_000 });
  const dp = new DataPlane(cfg, telemetry, { adapterLoader: loader });
  dp.addModel({ model: 'm', versions: [{ id: 'v1', cardChecksum: 'c' }], route: { model: 'm', weights: { v1: 1 } } });
  dp.addVersion('m', 'v1', 'c', { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: 4 });
  dp.setWorkers('m', 'v1', [
    { id: 'w0', url: 'http://127.0.0.1:1' },
    { id: 'w1', url: 'http://127.0.0.1:2' },
  ]);
  dp.setAdapters(
    'm',
    ['a', 'b', 'c'].map((n) => ({ name: n, model: 'm', source: `/a/${n}`, servedAs: n })),
  );
  return { dp, telemetry };
}

describe('AdapterPrefetcher round', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('loads the top-k through the slots’ load path, once; a request meanwhile waits for that load; counted as prefetch', async () => {
    const { loader, calls, release } = heldLoader();
    const { dp, telemetry } = dataPlane(loader);
    const pf = dp.prefetcher;
    for (const [n, times] of [
      ['a', 6],
      ['b', 3],
      ['c', 1],
      ['not-registered', 50],
    ] as const)
      for (let i = 0; i < times; i++) pf.requested(n, 0);
    expect(pf.demand.size).toBe(3);
    // a: 6/10 of demand → 2 workers; b → 1; c is outside the top 2
    expect(pf.round(0, 0).loads.map((l) => `${l.adapter}@${l.worker}`)).toEqual(['a@w0', 'a@w1', 'b@w0']);
    const w0 = dp.pool('m', 'v1').workers[0]!;
    // a request for a on w0 while its prefetch loads: the same load
    const spec = dp.adapters.get('a')!;
    const req = w0.adapters.acquire(w0, spec, 4, loader, telemetry.metrics, pf.keepFor('m'));
    expect(pf.round(0, 0).loads).toEqual([]); // everything there or loading: nothing more
    await release();
    expect(await req).toBe('miss');
    expect(calls.filter((c) => c.startsWith('load'))).toEqual(['load a http://127.0.0.1:1', 'load a http://127.0.0.1:2', 'load b http://127.0.0.1:1']);
    expect(await w0.adapters.acquire(w0, dp.adapters.get('b')!, 4, loader, telemetry.metrics)).toBe('hit');
    const text = await telemetry.metrics.registry.metrics();
    expect(text).toMatch(/glidepath_adapter_loads_total{model="m",outcome="loaded",trigger="prefetch"} 3/);
    expect([...pf.keepFor('m')]).toEqual(['a', 'b']);
    await dp.close();
  });

  it('a request’s load evicts a top-k adapter only when nothing else can go', async () => {
    const { loader, release } = heldLoader();
    const { dp, telemetry } = dataPlane(loader);
    const pf = dp.prefetcher;
    for (let i = 0; i < 5; i++) pf.requested('a', 0);
    pf.round(0, 0);
    await release();
    const w0 = dp.pool('m', 'v1').workers.find((w) => w.adapters.has('a'))!;
    // w0 (4 slots): a (top-k, least recently used), then x, y, z loaded by requests
    for (const n of ['x', 'y', 'z']) {
      const p = w0.adapters.acquire(w0, { name: n, model: 'm', source: `/a/${n}`, servedAs: n }, 4, loader, telemetry.metrics, pf.keepFor('m'));
      await release();
      await p;
      w0.adapters.done(n);
    }
    const p = w0.adapters.acquire(w0, dp.adapters.get('c')!, 4, loader, telemetry.metrics, pf.keepFor('m'));
    await release();
    await p;
    expect(w0.adapters.names().sort()).toEqual(['a', 'c', 'y', 'z']);
    await dp.close();
  });

  it('a load that keeps failing is not asked again every round: the wait doubles, and ends with a success', async () => {
    const calls: string[] = [];
    let broken = true;
    const loader: AdapterLoader = {
      load: (_u, name) => {
        calls.push(`load ${name}`);
        return broken ? Promise.reject(new Error('400: no such file')) : Promise.resolve();
      },
      unload: () => Promise.resolve(),
    };
    const { dp } = dataPlane(loader, { adapter_prefetch: { top_k: 1, interval_ms: 1000 } });
    const pf = dp.prefetcher;
    for (let i = 0; i < 5; i++) pf.requested('a', 0);
    const rounds = async (monos: number[]) => {
      for (const m of monos) await pf.round(0, m).settled;
    };
    // a on both workers: fails on each; then waits 2 s, then 4 s
    await rounds([0, 1_000, 1_999]);
    expect(calls).toEqual(['load a', 'load a']);
    await rounds([2_000, 3_000, 5_999]);
    expect(calls.length).toBe(4);
    broken = false;
    await rounds([6_000]);
    expect(calls.length).toBe(6);
    expect(dp.pool('m', 'v1').workers.every((w) => w.adapters.has('a'))).toBe(true);
    await dp.close();
  });

  it('a model whose requests are held (asleep, a drain-first swap) is not prefetched', async () => {
    const { loader } = heldLoader();
    const { dp } = dataPlane(loader);
    for (let i = 0; i < 5; i++) dp.prefetcher.requested('a', 0);
    dp.hold('m');
    expect(dp.prefetcher.round(0, 0).loads).toEqual([]);
    dp.release('m');
    expect(dp.prefetcher.round(0, 0).loads.length).toBeGreaterThan(0);
    await dp.close();
  });

  it('a canary version the route sends requests to is prefetched too; one at weight 0 is not', async () => {
    const { loader } = heldLoader();
    const { dp } = dataPlane(loader);
    dp.addVersion('m', 'v2', 'c2', { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: 4 });
    dp.setWorkers('m', 'v2', [{ id: 'w2', url: 'http://127.0.0.1:3' }]);
    for (let i = 0; i < 5; i++) dp.prefetcher.requested('a', 0);
    expect(dp.prefetcher.round(0, 0).loads.map((l) => l.worker)).not.toContain('w2');
    dp.setRoute({ model: 'm', weights: { v1: 0.9, v2: 0.1 } });
    expect(dp.prefetcher.round(0, 0).loads.map((l) => `${l.worker} ${l.adapter}`)).toContain('w2 a');
    await dp.close();
  });

  it('rounds on its interval (a fake clock) from the data plane’s start, none after it closed', async () => {
    vi.useFakeTimers({ now: 0 });
    const { loader, calls } = heldLoader();
    const { dp } = dataPlane(loader, { adapter_prefetch: { interval_ms: 1000 } });
    for (let i = 0; i < 3; i++) dp.prefetcher.requested('a', 0);
    await vi.advanceTimersByTimeAsync(999);
    expect(calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    const loads = ['load a http://127.0.0.1:1', 'load a http://127.0.0.1:2']; // all of the demand: both workers
    expect(calls).toEqual(loads);
    await dp.close();
    dp.prefetcher.requested('b', 1000);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toEqual(loads);
  });

  it('does nothing with prefetch off: no demand kept, no timer', async () => {
    const { loader, calls } = heldLoader();
    const { dp } = dataPlane(loader, { adapter_prefetch: { enabled: false } });
    dp.prefetcher.requested('a', 0);
    expect(dp.prefetcher.demand.size).toBe(0);
    expect(dp.prefetcher.round(0, 0).loads).toEqual([]);
    expect(calls).toEqual([]);
    await dp.close();
  });
});

describe('adapter routing and prefetch config', () => {
  it('defaults: affinity, prefetch on with its defaults', () => {
    const g = parseConfig(minimal).gateway;
    expect(g.adapterRouting).toBe('affinity');
    expect(g.adapterPrefetch).toEqual({ enabled: true, topK: 8, intervalMs: 5000, halfLifeMs: 30_000 });
  });

  it('bad values are named with their paths, all at once', () => {
    let err: unknown;
    try {
      parseConfig({ ...minimal, gateway: { adapter_routing: 'nearest', adapter_prefetch: { top_k: 0, interval_ms: -5, every: 1 } } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`).sort();
    expect(issues).toEqual([
      expect.stringMatching(/^gateway\.adapter_prefetch\.every: unknown key/),
      expect.stringMatching(/^gateway\.adapter_prefetch\.interval_ms: .*positive integer/),
      expect.stringMatching(/^gateway\.adapter_prefetch\.top_k: .*positive integer/),
      expect.stringMatching(/^gateway\.adapter_routing: .*"affinity" or "random"/),
    ]);
  });
});
