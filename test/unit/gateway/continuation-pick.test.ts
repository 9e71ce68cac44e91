// Where a broken stream's continuation goes (attempts.ts, readyFor): to a worker with an idle connection
// open when the pick has none, so that it is written at once rather than after its connect.
import { describe, expect, it } from 'vitest';
import { Attempts, readyFor } from '../../../src/gateway/attempts.js';
import type { AdapterUse } from '../../../src/gateway/attempts.js';
import { AdapterSlots } from '../../../src/gateway/adapters.js';
import type { AdapterSpec } from '../../../src/gateway/adapters.js';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import type { VersionPool, Worker } from '../../../src/gateway/pool.js';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';

interface Fake {
  id: string;
  weight: number;
  outstanding: number;
  routable: boolean;
  ejectedUntil: number;
  budget: number;
  upstream: { idle: number; busy: number; limit: number };
}
function worker(id: string, o: Partial<Omit<Fake, 'upstream'>> & Partial<Fake['upstream']> = {}): Worker {
  const f: Fake = {
    id,
    weight: o.weight ?? 1,
    outstanding: o.outstanding ?? 0,
    routable: o.routable ?? true,
    ejectedUntil: o.ejectedUntil ?? 0,
    budget: Infinity,
    upstream: { idle: o.idle ?? 0, busy: o.busy ?? 0, limit: o.limit ?? 128 },
  };
  return f as unknown as Worker;
}
const NOW = 1_000_000;

describe('a continuation goes where a connection is open', () => {
  it('keeps the pick when it has an idle connection', () => {
    const a = worker('a', { idle: 1, outstanding: 30 });
    const b = worker('b', { idle: 5, outstanding: 1 });
    expect(readyFor([a, b], a, NOW, undefined)).toBe(a);
  });

  it('moves from a pick with none to the least busy worker that has one', () => {
    const fresh = worker('fresh'); // the replacement of the worker that died: nothing open to it yet
    const b = worker('b', { idle: 3, outstanding: 30, busy: 30 });
    const c = worker('c', { idle: 2, outstanding: 26, busy: 26 });
    expect(readyFor([fresh, b, c], fresh, NOW, undefined)).toBe(c);
  });

  it('never to a worker that is tried, ejected, out of rotation, at reduced weight or without a free slot', () => {
    const picked = worker('p');
    const tried = worker('tried', { idle: 4 });
    const ejected = worker('ejected', { idle: 4, ejectedUntil: NOW + 1 });
    const out = worker('out', { idle: 4, routable: false });
    const suspicious = worker('suspicious', { idle: 4, weight: 0.5 });
    const full = worker('full', { idle: 4, busy: 8, limit: 8 });
    expect(readyFor([picked, tried, ejected, out, suspicious, full], picked, NOW, new Set([tried]))).toBe(picked);
  });

  it('keeps a half-open trial pick (its trial is spent on it)', () => {
    const trial = worker('trial', { weight: 0.1 });
    const b = worker('b', { idle: 4 });
    expect(readyFor([trial, b], trial, NOW, undefined)).toBe(trial);
  });
});

const spec: AdapterSpec = { name: 'lora-a', model: 'm', source: '/a', servedAs: 'lora-a' };
function holding(id: string, idle: number, has: string[], outstanding = 0): Worker {
  const adapters = new AdapterSlots();
  for (const n of has)
    void adapters.acquire(
      { id, url: '' },
      { ...spec, name: n, servedAs: n },
      2,
      { load: () => Promise.resolve(), unload: () => Promise.resolve() },
      new GatewayMetrics(),
    );
  return {
    id,
    outstanding,
    ejectedUntil: 0,
    routable: true,
    weight: 1,
    budget: Infinity,
    adapters,
    upstream: { idle, busy: outstanding, limit: 128 },
  } as unknown as Worker;
}

describe('the continuation of a LoRA adapter request', () => {
  it('stays on a worker that holds the adapter (it is not moved to one that must load it)', async () => {
    await new Promise((r) => setImmediate(r)); // (the fake loads settle)
    const holder = holding('holder', 0, ['lora-a'], 3);
    // the other worker has an idle connection, and both its LoRA slots hold other adapters
    const other = holding('other', 2, ['x', 'y'], 1);
    await new Promise((r) => setImmediate(r));
    const pool = { candidates: [holder, other], maxLoras: 2, disaggregated: false } as unknown as VersionPool;
    const use: AdapterUse = {
      spec,
      loader: { load: () => Promise.resolve(), unload: () => Promise.resolve() },
      metrics: new GatewayMetrics(),
      timeoutMs: 1000,
      keep: new Set(),
      random: undefined,
      retired: () => false,
    };
    const first = new Attempts(new RoundRobinPicker(), pool, use);
    expect(first.next(false)?.id).toBe('holder'); // the adapter picker's choice
    const cont = new Attempts(new RoundRobinPicker(), pool, use);
    expect(cont.next(true)?.id).toBe('holder'); // not 'other', which has a connection open but would load the adapter (seconds) and evict another
  });
});
