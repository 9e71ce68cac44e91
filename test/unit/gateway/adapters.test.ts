// One worker's LoRA slots with a scripted loader: one load per adapter whoever asks meanwhile, the
// least recently used adapter no request uses evicted (its unload answered before the next load
// goes), a slot in use never evicted, a failed load counting nothing; and the adapter picker's
// bounded-load affinity, and the random baseline; the prefetcher's load through the same path.
import { describe, expect, it } from 'vitest';
import { AdapterPicker, AdapterSlots, RandomAdapterPicker } from '../../../src/gateway/adapters.js';
import type { AdapterLoader, AdapterSpec } from '../../../src/gateway/adapters.js';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';

const W = { id: 'w0', url: 'http://127.0.0.1:9' };
const spec = (name: string): AdapterSpec => ({ name, model: 'm', source: `/a/${name}`, servedAs: name });

/** A loader whose calls wait until the test lets them go, in order. */
function scripted() {
  const log: string[] = [];
  const pending: { what: string; go: () => void; fail: (e: Error) => void }[] = [];
  const call = (what: string) =>
    new Promise<void>((go, fail) => {
      log.push(`${what} asked`);
      pending.push({
        what,
        go: () => {
          log.push(`${what} done`);
          go();
        },
        fail,
      });
    });
  const loader: AdapterLoader = { load: (_u, name) => call(`load ${name}`), unload: (_u, name) => call(`unload ${name}`) };
  const next = async () => {
    await new Promise((r) => setImmediate(r));
    const p = pending.shift();
    if (p === undefined) throw new Error('nothing asked');
    return p;
  };
  const slots = new AdapterSlots();
  const metrics = new GatewayMetrics();
  /** `name` acquired on a worker of `max` slots, its load let go at once; `release`: its request done too. */
  const load = async (name: string, max: number, release = false) => {
    const p = slots.acquire(W, spec(name), max, loader, metrics);
    (await next()).go();
    await p;
    if (release) slots.done(name);
  };
  return { loader, log, next, slots, metrics, load };
}

/** A worker for the picker, holding `has` loaded, each with a request of it in flight. */
const worker = (id: string, outstanding: number, has: string[]) => {
  const adapters = new AdapterSlots();
  for (const n of has)
    void adapters.acquire({ id, url: '' }, spec(n), 8, { load: () => Promise.resolve(), unload: () => Promise.resolve() }, new GatewayMetrics());
  return { id, outstanding, ejectedUntil: 0, routable: true, weight: 1, budget: Infinity, adapters };
};

describe('AdapterSlots', () => {
  it('loads an adapter once for everyone who asks meanwhile; then every request is a hit', async () => {
    const { loader, log, next, slots, metrics } = scripted();
    const a = slots.acquire(W, spec('a'), 2, loader, metrics);
    const b = slots.acquire(W, spec('a'), 2, loader, metrics);
    (await next()).go();
    expect(await Promise.all([a, b])).toEqual(['miss', 'miss']);
    expect(await slots.acquire(W, spec('a'), 2, loader, metrics)).toBe('hit');
    expect(log).toEqual(['load a asked', 'load a done']);
    expect(slots.loaded()).toEqual([{ name: 'a', inUse: 3, loaded: true }]);
  });

  it('a full worker evicts its least recently used adapter not in use, and loads only once the unload answered', async () => {
    const { loader, log, next, slots, metrics, load } = scripted();
    for (const n of ['a', 'b']) await load(n, 2, true);
    await slots.acquire(W, spec('a'), 2, loader, metrics); // a used last: b goes
    slots.done('a');
    const c = slots.acquire(W, spec('c'), 2, loader, metrics);
    const unload = await next();
    expect(log.slice(-1)).toEqual(['unload b asked']);
    unload.go();
    (await next()).go();
    await c;
    expect(log.slice(-3)).toEqual(['unload b done', 'load c asked', 'load c done']);
    expect(slots.names()).toEqual(['a', 'c']);
  });

  it('never evicts an adapter in use: a full worker of busy adapters refuses (retryable), and a failed load counts nothing', async () => {
    const { loader, next, slots, metrics, load } = scripted();
    await load('a', 1);
    await expect(slots.acquire(W, spec('b'), 1, loader, metrics)).rejects.toMatchObject({ code: 'adapter_slots_busy', status: 503 });
    slots.done('a');
    const q = slots.acquire(W, spec('b'), 1, loader, metrics);
    (await next()).go(); // the unload of a
    (await next()).fail(new Error('400: no such file'));
    await expect(q).rejects.toMatchObject({ code: 'adapter_load_failed' });
    expect(slots.loaded()).toEqual([]);
  });
});

describe('AdapterPicker', () => {
  it('prefers the least busy worker that has the adapter, unless it is more than the slack above the least busy', async () => {
    const ws = [worker('w0', 3, []), worker('w1', 5, ['a']), worker('w2', 9, ['a'])];
    await new Promise((r) => setImmediate(r));
    const p = new AdapterPicker(new RoundRobinPicker(), 'a', 8);
    expect(p.pick(ws, 0)?.id).toBe('w1');
    ws[1]!.outstanding = 8; // 5 above w0's 3: the pool's own pick
    expect(p.pick(ws, 0)?.id).toBe('w0');
  });
});

describe('AdapterSlots after an adversarial review', () => {
  it('an adapter registered again with another source is unloaded and loaded from the new one (not served as a hit)', async () => {
    const { loader, log, next, slots, metrics, load } = scripted();
    await load('a', 2);
    const v2 = { ...spec('a'), source: '/a/a-v2' };
    // in use: not replaced under the request (retried elsewhere)
    await expect(slots.acquire(W, v2, 2, loader, metrics)).rejects.toMatchObject({ code: 'adapter_load_failed' });
    slots.done('a');
    const q = slots.acquire(W, v2, 2, loader, metrics);
    (await next()).go();
    (await next()).go();
    expect(await q).toBe('miss');
    expect(log.slice(-4)).toEqual(['unload a asked', 'unload a done', 'load a asked', 'load a done']);
    expect(await slots.acquire(W, v2, 2, loader, metrics)).toBe('hit');
  });

  it('an unload that fails puts its adapter back: the slot map keeps agreeing with the engine', async () => {
    const { loader, next, slots, metrics, load } = scripted();
    for (const n of ['a', 'b']) await load(n, 2, true);
    const c = slots.acquire(W, spec('c'), 2, loader, metrics);
    (await next()).fail(new Error('500: engine busy'));
    await expect(c).rejects.toMatchObject({ code: 'adapter_load_failed' });
    expect(slots.names().sort()).toEqual(['a', 'b']);
  });

  it('the picker never sends a request where the adapter cannot be loaded when the holder can take it', async () => {
    const ws = [worker('holder', 6, ['a']), worker('full1', 1, ['x', 'y']), worker('full2', 1, ['x', 'y'])];
    await new Promise((r) => setImmediate(r));
    for (const w of ws.slice(1))
      for (const n of ['x', 'y'])
        void w.adapters.acquire({ id: w.id, url: '' }, spec(n), 2, { load: () => Promise.resolve(), unload: () => Promise.resolve() }, new GatewayMetrics());
    await new Promise((r) => setImmediate(r));
    expect(new AdapterPicker(new RoundRobinPicker(), 'a', 2).pick(ws, 0)?.id).toBe('holder');
  });
});

describe('AdapterSlots.prefetch', () => {
  it('loads into a free slot without counting a request; nothing when the worker has it', async () => {
    const { loader, log, next, slots, metrics } = scripted();
    const p = slots.prefetch(W, spec('a'), 2, loader, metrics, new Set(['a']));
    expect(slots.prefetch(W, spec('a'), 2, loader, metrics, new Set(['a']))).toBeUndefined();
    (await next()).go();
    await p;
    expect(slots.loaded()).toEqual([{ name: 'a', inUse: 0, loaded: true }]);
    expect(log).toEqual(['load a asked', 'load a done']);
    expect(await metrics.registry.metrics()).toMatch(/glidepath_adapter_loads_total{model="m",outcome="loaded",trigger="prefetch"} 1/);
  });

  it('never evicts an adapter in use or one of the top-k; over the least recently used of the others, unloaded first', async () => {
    const { loader, log, next, slots, metrics, load } = scripted();
    await load('busy', 3); // in use
    await load('top', 3, true);
    await load('old', 3, true);
    const keep = new Set(['top', 'new', 'newer']);
    const p = slots.prefetch(W, spec('new'), 3, loader, metrics, keep);
    expect(log.slice(-1)).toEqual(['unload old asked']);
    (await next()).go();
    (await next()).go();
    await p;
    // full again: busy in use, top and new in the top-k: nothing goes
    expect(slots.prefetch(W, spec('newer'), 3, loader, metrics, keep)).toBeUndefined();
    expect(slots.names()).toEqual(['busy', 'top', 'new']);
    expect(await metrics.registry.metrics()).toMatch(/glidepath_adapter_evictions_total{model="m",trigger="prefetch"} 1/);
  });

  it('a request goes to a holder that has it loaded before one where a prefetch still loads it (a hit, not a wait)', async () => {
    const ok: AdapterLoader = { load: () => Promise.resolve(), unload: () => Promise.resolve() };
    const { loader } = scripted();
    const metrics = new GatewayMetrics();
    const w = (id: string, outstanding: number) => ({
      id,
      url: `http://${id}`,
      outstanding,
      ejectedUntil: 0,
      routable: true,
      weight: 1,
      budget: Infinity,
      adapters: new AdapterSlots(),
    });
    const w1 = w('w1', 2);
    const w2 = w('w2', 0);
    await w1.adapters.acquire(w1, spec('a'), 8, ok, metrics);
    w1.adapters.done('a');
    expect(w2.adapters.prefetch(w2, spec('a'), 8, loader, metrics, new Set(['a']))).toBeDefined();
    expect(new AdapterPicker(new RoundRobinPicker(), 'a', 8).pick([w1, w2], 0)?.id).toBe('w1');
  });

  it('registered again from another source while a prefetch loads the old one: the request waits for it, then loads the new one', async () => {
    const { loader, log, next, slots, metrics } = scripted();
    const p = slots.prefetch(W, spec('a'), 4, loader, metrics, new Set(['a']));
    const req = slots.acquire(W, { ...spec('a'), source: '/a/a-v2' }, 4, loader, metrics);
    (await next()).go(); // the old source's load
    await p;
    (await next()).go(); // its unload
    (await next()).go(); // the new source's load
    expect(await req).toBe('miss');
    expect(log).toEqual(['load a asked', 'load a done', 'unload a asked', 'unload a done', 'load a asked', 'load a done']);
  });
});

describe('RandomAdapterPicker', () => {
  it('draws among the workers that have the adapter or can load it, blind to which has it', async () => {
    const ws = [worker('holder', 0, ['a']), worker('other', 9, []), worker('full', 0, ['x', 'y'])];
    await new Promise((r) => setImmediate(r));
    const draws = [0, 0.99];
    const p = new RandomAdapterPicker(new RoundRobinPicker(), 'a', 2, () => draws.shift() as number);
    // full holds x and y in use (the helper counts a request of each): it cannot load a
    expect([p.pick(ws, 0)?.id, p.pick(ws, 0)?.id]).toEqual(['holder', 'other']);
  });
});
