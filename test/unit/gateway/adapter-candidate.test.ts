// What an adapter canary needs of the gateway, in process: the candidate's share of an adapter's
// requests (sticky by user, drawn without one), a version unloaded from a worker only once no request
// uses it (no request takes it meanwhile), and the model's name put back in what the client reads.
import { describe, expect, it } from 'vitest';
import { AdapterIndex, AdapterSlots } from '../../../src/gateway/adapters.js';
import type { AdapterLoader, AdapterSpec } from '../../../src/gateway/adapters.js';
import { ModelRename } from '../../../src/gateway/downstream.js';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';

const SQL: AdapterSpec = { name: 'sql', model: 'm', source: '/a/sql', servedAs: 'sql' };
const V2: AdapterSpec = { name: 'sql', model: 'm', source: '/a/sql-2', version: '2', servedAs: 'sql--2' };

describe('AdapterIndex candidates', () => {
  it('the candidate gets its share of the adapter’s requests: by user (the same side every time), drawn for requests without one', () => {
    const ix = new AdapterIndex();
    ix.set('m', [SQL, { ...SQL, name: 'fr', servedAs: 'fr' }], new Set(['m']));
    expect(ix.variant(SQL, 'u1', () => 0)).toBe(SQL);
    ix.setCandidate('sql', { spec: V2, share: 0.3, salt: 'c1' });
    const users = Array.from({ length: 2000 }, (_, i) => `user-${i}`);
    const onV2 = users.filter((u) => ix.variant(SQL, u, () => 0.99).servedAs === 'sql--2');
    expect(onV2.length / users.length).toBeGreaterThan(0.26);
    expect(onV2.length / users.length).toBeLessThan(0.34);
    for (const u of users.slice(0, 50)) expect(ix.variant(SQL, u, () => 0)).toBe(ix.variant(SQL, u, () => 0.99));
    // a larger share keeps everyone already on the candidate there
    ix.setCandidate('sql', { spec: V2, share: 0.6, salt: 'c1' });
    for (const u of onV2) expect(ix.variant(SQL, u, () => 0.99)).toBe(V2);
    expect(ix.variant(SQL, undefined, () => 0.59)).toBe(V2);
    expect(ix.variant(SQL, undefined, () => 0.6)).toBe(SQL);
    // another adapter has no candidate
    const fr = ix.get('fr') as AdapterSpec;
    expect(ix.variant(fr, undefined, () => 0)).toBe(fr);
  });

  it('a candidate must be the same adapter under another name; it goes with its adapter, or once the adapter is served under its name', () => {
    const ix = new AdapterIndex();
    expect(() => ix.setCandidate('sql', { spec: V2, share: 1, salt: '' })).toThrow(/no adapter sql is registered/);
    ix.set('m', [SQL], new Set(['m']));
    expect(() => ix.setCandidate('sql', { spec: { ...V2, servedAs: 'sql' }, share: 1, salt: '' })).toThrow(/served under another name/);
    expect(() => ix.setCandidate('sql', { spec: { ...V2, model: 'other' }, share: 1, salt: '' })).toThrow(/same adapter of m/);
    ix.setCandidate('sql', { spec: V2, share: 1, salt: '' });
    expect(ix.isServed('sql--2')).toBe(true);
    // promoted: the adapter is now served as the candidate's name
    ix.set('m', [{ ...V2 }], new Set(['m']));
    expect(ix.candidate('sql')).toBeUndefined();
    expect(ix.isServed('sql')).toBe(false);
    ix.setCandidate('sql', { spec: { ...V2, servedAs: 'sql--3', source: '/a/3' }, share: 1, salt: '' });
    ix.set('m', [], new Set(['m']));
    expect(ix.candidate('sql')).toBeUndefined();
  });
});

describe('AdapterSlots.retire', () => {
  it('waits for the version’s last request on the worker, takes no new one meanwhile, then unloads it once', async () => {
    const calls: string[] = [];
    const loader: AdapterLoader = {
      load: (_u, n) => {
        calls.push(`load ${n}`);
        return Promise.resolve();
      },
      unload: (_u, n) => {
        calls.push(`unload ${n}`);
        return Promise.resolve();
      },
    };
    const w = { id: 'w0', url: 'http://127.0.0.1:9' };
    const slots = new AdapterSlots();
    const m = new GatewayMetrics();
    await slots.acquire(w, V2, 4, loader, m);
    await slots.acquire(w, V2, 4, loader, m);
    let done = false;
    const retired = slots.retire(w, 'sql--2', loader).then(() => (done = true));
    await expect(slots.acquire(w, V2, 4, loader, m)).rejects.toMatchObject({ code: 'adapter_load_failed', message: /unloading sql--2/ });
    // a retiring adapter is never another load's victim, nor room for one
    expect(slots.roomFor(1)).toBe(false);
    slots.done('sql--2');
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    slots.done('sql--2');
    await retired;
    expect(calls).toEqual(['load sql--2', 'unload sql--2']);
    expect(slots.has('sql--2')).toBe(false);
    // not there: nothing to do
    await slots.retire(w, 'sql--2', loader);
    expect(calls).toHaveLength(2);
  });
});

describe('AdapterSlots: a version being unloaded', () => {
  it('keeps its slot until the engine answered the unload: a load of the name meanwhile is refused (retryable), not raced', async () => {
    let finishUnload!: () => void;
    const calls: string[] = [];
    const loader: AdapterLoader = {
      load: (_u, n) => (calls.push(`load ${n}`), Promise.resolve()),
      unload: (_u, n) => (calls.push(`unload ${n}`), new Promise<void>((r) => (finishUnload = r))),
    };
    const w = { id: 'w0', url: 'http://127.0.0.1:9' };
    const slots = new AdapterSlots();
    const m = new GatewayMetrics();
    await slots.acquire(w, V2, 4, loader, m);
    slots.done('sql--2');
    const gone = slots.retire(w, 'sql--2', loader);
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(['load sql--2', 'unload sql--2']);
    expect(slots.has('sql--2')).toBe(true);
    await expect(slots.acquire(w, V2, 4, loader, m)).rejects.toMatchObject({ code: 'adapter_load_failed' });
    finishUnload();
    await gone;
    expect(slots.has('sql--2')).toBe(false);
    await slots.acquire(w, V2, 4, loader, m);
    expect(calls).toEqual(['load sql--2', 'unload sql--2', 'load sql--2']);
  });

  it('a retired version a late request loads again (a retry, a resumed stream) serves it, then is unloaded after it', async () => {
    const calls: string[] = [];
    const loader: AdapterLoader = {
      load: (_u, n) => (calls.push(`load ${n}`), Promise.resolve()),
      unload: (_u, n) => (calls.push(`unload ${n}`), Promise.resolve()),
    };
    const w = { id: 'w0', url: 'http://127.0.0.1:9' };
    const slots = new AdapterSlots();
    expect(await slots.acquire(w, V2, 4, loader, new GatewayMetrics(), new Set(), true)).toBe('miss');
    expect(slots.ready('sql--2')).toBe(true);
    slots.done('sql--2');
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(['load sql--2', 'unload sql--2']);
    expect(slots.has('sql--2')).toBe(false);
  });

  it('the index remembers retired names until one is served again', () => {
    const ix = new AdapterIndex();
    ix.set('m', [SQL], new Set(['m']));
    ix.retire('sql--2');
    expect(ix.isRetired('sql--2')).toBe(true);
    ix.setCandidate('sql', { spec: V2, share: 0.1, salt: '' });
    expect(ix.isRetired('sql--2')).toBe(false);
    // one name on the engines: an adapter may not be named as another's version is loaded
    expect(() => ix.set('m', [SQL, { ...SQL, name: 'x', servedAs: 'sql--2' }], new Set(['m']))).toThrow(/sql--2 is the name a version of sql is loaded under/);
  });
});

describe('ModelRename', () => {
  const r = new ModelRename('sql--2', 'sql');
  it('puts the asked name back in whole events and answers, with or without spaces; leaves other names and bytes alone', () => {
    const ev = 'data: {"id":"c1","model":"sql--2","choices":[{"delta":{"content":"é \\"model\\":\\"sql--2\\""}}]}\n\ndata: {"model" : "sql--2"}\n\n';
    expect(r.apply(Buffer.from(ev)).toString()).toBe(
      'data: {"id":"c1","model":"sql","choices":[{"delta":{"content":"é \\"model\\":\\"sql--2\\""}}]}\n\ndata: {"model" : "sql"}\n\n',
    );
    const other = Buffer.from('data: {"model":"sql--20"}\n\n');
    expect(r.apply(other)).toBe(other);
    const none = Buffer.from('data: [DONE]\n\n');
    expect(r.apply(none)).toBe(none);
  });
});
