// Where an attempt goes after the picker's choice (attempts.ts, startsNow): to a worker with a slot free
// to its lane when the pick has none; a broken stream's continuation also to one with an idle
// connection open when the pick has none, so that it is written at once rather than after its connect.
import { describe, expect, it } from 'vitest';
import { Attempts, startsNow } from '../../../src/gateway/attempts.js';
import type { AdapterUse, Prioritised } from '../../../src/gateway/attempts.js';
import { AdapterSlots } from '../../../src/gateway/adapters.js';
import type { AdapterSpec } from '../../../src/gateway/adapters.js';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import type { VersionPool, Worker } from '../../../src/gateway/pool.js';
import { TOP_LANE } from '../../../src/gateway/upstream-queue.js';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';

interface Slots {
  idle: number;
  busy: number;
  limit: number;
  /** Slots the lanes below the top tier may fill (a degradation level's share). */
  shared: number;
}
interface Fake {
  id: string;
  weight: number;
  outstanding: number;
  routable: boolean;
  ejectedUntil: number;
  budget: number;
  upstream: Slots & { roomFor(h: Prioritised): boolean };
}
/** The pool's rule (UpstreamPool.roomFor, tested against a real pool in upstream-queue.test.ts). */
function slots(s: Slots): Fake['upstream'] {
  return { ...s, roomFor: (h) => s.busy < s.shared || (s.busy < s.limit && (h.priority?.() ?? TOP_LANE) <= TOP_LANE) };
}
function worker(id: string, o: Partial<Omit<Fake, 'upstream'>> & Partial<Slots> = {}): Worker {
  const limit = o.limit ?? 128;
  const f: Fake = {
    id,
    weight: o.weight ?? 1,
    outstanding: o.outstanding ?? o.busy ?? 0,
    routable: o.routable ?? true,
    ejectedUntil: o.ejectedUntil ?? 0,
    budget: o.budget ?? Infinity,
    upstream: slots({ idle: o.idle ?? 0, busy: o.busy ?? 0, limit, shared: o.shared ?? limit }),
  };
  return f as unknown as Worker;
}
const NOW = 1_000_000;
const lane = (n: number): Prioritised => ({ priority: () => n });
const CONT = lane(0);
const continuationTo = (ws: Worker[], picked: Worker, tried?: Set<Worker>) => startsNow(ws, picked, CONT, true, NOW, tried);

describe('a continuation goes where a connection is open', () => {
  it('keeps the pick when it has an idle connection', () => {
    const a = worker('a', { idle: 1, outstanding: 30 });
    const b = worker('b', { idle: 5, outstanding: 1 });
    expect(continuationTo([a, b], a)).toBe(a);
  });

  it('moves from a pick with none to the least busy worker that has one', () => {
    const fresh = worker('fresh'); // the replacement of the worker that died: nothing open to it yet
    const b = worker('b', { idle: 3, outstanding: 30, busy: 30 });
    const c = worker('c', { idle: 2, outstanding: 26, busy: 26 });
    expect(continuationTo([fresh, b, c], fresh)).toBe(c);
  });

  it('never to a worker that is tried, ejected, out of rotation, at reduced weight or without a free slot', () => {
    const picked = worker('p');
    const tried = worker('tried', { idle: 4 });
    const ejected = worker('ejected', { idle: 4, ejectedUntil: NOW + 1 });
    const out = worker('out', { idle: 4, routable: false });
    const suspicious = worker('suspicious', { idle: 4, weight: 0.5 });
    const full = worker('full', { idle: 4, busy: 8, limit: 8 });
    expect(continuationTo([picked, tried, ejected, out, suspicious, full], picked, new Set([tried]))).toBe(picked);
  });

  it('keeps a half-open trial pick (its trial is spent on it)', () => {
    const trial = worker('trial', { weight: 0.1, budget: 2 });
    const b = worker('b', { idle: 4 });
    expect(continuationTo([trial, b], trial)).toBe(trial);
    const full = worker('full trial', { weight: 0.1, budget: 2, busy: 4, limit: 4 });
    expect(startsNow([full, b], full, lane(1), false, NOW, undefined)).toBe(full);
  });

  it('moves from a suspicious pick (half weight, no trial) whose every slot is busy to a healthy worker with one free', () => {
    const suspicious = worker('suspicious', { weight: 0.5, busy: 4, limit: 4 });
    const b = worker('b', { busy: 1, limit: 4 });
    expect(startsNow([suspicious, b], suspicious, lane(1), false, NOW, undefined)).toBe(b);
  });

  it('a pick whose every slot is busy: to a worker with a free one, an open connection first', () => {
    const full = worker('full', { idle: 2, busy: 4, limit: 4 });
    const free = worker('free', { busy: 1, limit: 4 });
    const open = worker('open', { idle: 1, busy: 3, limit: 4 });
    expect(continuationTo([full, free], full)).toBe(free);
    expect(continuationTo([full, free, open], full)).toBe(open);
  });
});

describe('a request goes where a slot is free to its lane', () => {
  // the shedding e2e's case: level 2 holds one slot of four back for the top tier on each worker left
  const held = (id: string, busy: number, queued: number) => worker(id, { busy, outstanding: busy + queued, limit: 4, shared: 3 });

  it('the top tier: from a worker with every slot busy to one with the slot held back for it, though more wait there', () => {
    const a = held('a', 4, 0);
    const b = held('b', 3, 2); // the picker's balance (outstanding, queued included) prefers a
    expect(startsNow([a, b], a, lane(1), false, NOW, undefined)).toBe(b);
  });

  it("a lower tier stays with the pick when no worker has a slot for it (it waits in the pick's queue)", () => {
    const a = held('a', 4, 0);
    const b = held('b', 3, 2);
    expect(startsNow([a, b], a, lane(2), false, NOW, undefined)).toBe(a);
  });

  it('asks the lane once however many workers it looks at', () => {
    let asked = 0;
    const h = { priority: () => (asked++, 1) };
    const ws = Array.from({ length: 5 }, (_, i) => held(`w${i}`, 3, 2));
    const full = held('full', 4, 0);
    expect(startsNow([full, ...ws], full, h, false, NOW, undefined).id).toBe('w0');
    expect(asked).toBe(1);
  });

  it('keeps a pick with room, and asks the lane only when the pick has none below its share', () => {
    let asked = 0;
    const h = { priority: () => (asked++, 2) };
    const a = worker('a', { busy: 1, limit: 4 });
    const b = worker('b');
    expect(startsNow([a, b], a, h, false, NOW, undefined)).toBe(a);
    expect(asked).toBe(0);
  });

  it('the least busy of those with room; none that is excluded', () => {
    const a = held('a', 4, 3);
    const b = held('b', 2, 0);
    const c = worker('c', { busy: 1, outstanding: 1, limit: 4 });
    const d = worker('d', { limit: 4, ejectedUntil: NOW + 5 });
    expect(startsNow([a, b, c, d], a, lane(2), false, NOW, undefined)).toBe(c);
    expect(startsNow([a, b, c, d], a, lane(2), false, NOW, new Set([c]))).toBe(b);
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
    upstream: slots({ idle, busy: outstanding, limit: 128, shared: 128 }),
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
    expect(first.next(CONT, false)?.id).toBe('holder'); // the adapter picker's choice
    const cont = new Attempts(new RoundRobinPicker(), pool, use);
    expect(cont.next(CONT, true)?.id).toBe('holder'); // not 'other', which has a connection open but would load the adapter (seconds) and evict another
  });
});
