// A follower's mirror of the leader's adapter canaries (src/control/mirror-adapter-canary.ts), over a real
// simulator as the worker: the candidate's share taken from each persisted step (an older record never
// undoes a newer one), taken away on rollback and the candidate unloaded from the worker this replica loaded
// it on; a canary that ended while the replica was away from the store leaves no candidate after a sync;
// a promotion recorded before its registration reached the replica unloads the old version, not the new.
// Its races: a promotion while the replica was away from etcd (the old version unloaded at the next
// sync), a sync's stale read against a canary the watch just started, a registration heard first.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { parseConfig } from '../../../src/config/load.js';
import { buildDataPlane } from '../../../src/control/app.js';
import { Mirror } from '../../../src/control/mirror.js';
import type { AdapterCanaryState } from '../../../src/rollout/adapter-canary-state.js';
import { rowPhase, toStoredState } from '../../../src/rollout/rollout-record.js';
import { createDataServer, startListening } from '../../../src/gateway/server.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import { Registry } from '../../../src/store/registry.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';
import type { RolloutRecord, Store } from '../../../src/store/types.js';

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

function state(over: Partial<AdapterCanaryState> = {}): AdapterCanaryState {
  return {
    kind: 'adapter_canary',
    id: 'ac-1',
    model: 'm',
    adapter: 'fr',
    stable: { source: '/adapters/fr', version: '1', servedAs: 'fr' },
    candidate: { source: '/adapters/fr?error_rate=0', version: '2', servedAs: 'fr--2' },
    stages: [50, 100],
    stageIndex: 0,
    stageDurationMs: 1000,
    phase: 'progressing',
    createdAt: 1,
    startedAt: 1,
    stageStartedAt: 1,
    updatedAt: 1,
    look: 0,
    previous: {},
    verdicts: [],
    actor: 'test',
    ...over,
  };
}

/** The record as the leader's store keeps it (and as the watch delivers it). */
function put(store: Store, s: AdapterCanaryState): Promise<RolloutRecord> {
  return store.putRollout({ id: s.id, model: s.adapter, ...rowPhase(s), state: toStoredState(s) }, s.createdAt);
}

interface Follower {
  sim: SimHandle;
  store: Store;
  mirror: Mirror;
  errors: string[];
  dp: ReturnType<typeof buildDataPlane>['dp'];
  /** A request for adapter `fr` as user `u` through this replica's data plane (its status). */
  ask(u: string): Promise<number>;
  /** A rollout record put in the store and delivered as the watch does. */
  step(s: AdapterCanaryState): Promise<void>;
}

async function follower(): Promise<Follower> {
  const sim = await startSim({ port: 0, host: '127.0.0.1', seed: 1, interTokenMs: 0, jitter: 0, loadTimeMs: 0 });
  closers.push(() => sim.close());
  const cfg = parseConfig({
    models: [
      {
        name: 'm',
        adapters: [{ name: 'fr', source: '/adapters/fr', version: '1' }],
        versions: [{ id: 'v1', provider: { kind: 'static', endpoints: [sim.url] }, engine: { max_loras: 4 } }],
        route: { weights: { v1: 1 } },
      },
    ],
  });
  const store = openMemoryStore();
  await new Registry(store).seedFromConfig(cfg);
  await store.putRoute({ model: 'm', revision: 1, weights: { v1: 1 } }, 0);
  await store.upsertWorker({
    id: 'm/v1/0',
    model: 'm',
    versionId: 'v1',
    endpoint: sim.url,
    provider: 'static',
    state: 'ready',
    gpus: [],
    startedAt: 0,
    updatedAt: 0,
  });
  const { dp } = buildDataPlane(cfg);
  const front = await startListening(createDataServer(dp), '127.0.0.1', 0);
  closers.push(() => dp.close());
  closers.push(() => front.close());
  const errors: string[] = [];
  const mirror = new Mirror(cfg, store, dp, (e) => errors.push(e));
  closers.push(() => mirror.stop());
  await mirror.syncAll();
  return {
    sim,
    store,
    mirror,
    errors,
    dp,
    async ask(u) {
      const res = await request(`${front.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user-id': u },
        body: JSON.stringify({ model: 'fr', messages: [{ role: 'user', content: 'bonjour' }], max_tokens: 2 }),
      });
      await res.body.text();
      return res.statusCode;
    },
    async step(s) {
      const rec = await put(store, s);
      mirror.changed({ area: 'rollouts', key: `rollouts/${s.id}`, value: rec });
    },
  };
}

/** The adapters the engine has loaded now. */
async function loaded(sim: SimHandle): Promise<string[]> {
  const res = await request(`${sim.url}/v1/models`);
  return ((await res.body.json()) as { data: { parent: string | null; id: string }[] }).data.filter((m) => m.parent !== null).map((m) => m.id);
}

/** Requests from 40 users: at a half share, both versions are loaded on the worker by this replica. */
async function traffic(f: Follower): Promise<void> {
  const st = await Promise.all(Array.from({ length: 40 }, (_, i) => f.ask(`u${i}`)));
  expect(st.filter((x) => x !== 200)).toEqual([]);
}

describe("a follower's mirror of the adapter canaries", () => {
  it('follows the share step by step, never back to an older record; on rollback takes the candidate away and unloads it here', async () => {
    const f = await follower();
    await f.step(state());
    expect(f.dp.adapters.candidate('fr')).toMatchObject({ share: 0.5, salt: 'ac-1', spec: { servedAs: 'fr--2' } });
    const older = await put(f.store, state({ phase: 'paused' }));
    await f.step(state({ stageIndex: 0, updatedAt: 2 }));
    f.mirror.changed({ area: 'rollouts', key: 'rollouts/ac-1', value: { ...older, phase: 'rolled_back', terminal: true } }); // an older revision
    expect(f.dp.adapters.candidate('fr')?.share).toBe(0.5);
    await traffic(f);
    expect((await loaded(f.sim)).sort()).toEqual(['fr', 'fr--2']);
    await f.step(state({ phase: 'rolling_back', rollbackReason: 'errors', rollbackTo: 'rolled_back' }));
    expect(f.dp.adapters.candidate('fr')).toBeUndefined();
    await f.step(state({ phase: 'rolled_back' }));
    await expect.poll(() => loaded(f.sim)).toEqual(['fr']);
    await traffic(f); // the candidate's users are served by the registered version
    expect(await loaded(f.sim)).toEqual(['fr']);
    expect(f.errors).toEqual([]);
  });

  it('a canary that ended while the replica was away from the store leaves no candidate after the sync', async () => {
    const f = await follower();
    await f.step(state());
    await traffic(f);
    await put(f.store, state({ phase: 'aborted' })); // never heard by watch
    await f.mirror.syncAll(true);
    expect(f.dp.adapters.candidate('fr')).toBeUndefined();
    await expect.poll(() => loaded(f.sim)).toEqual(['fr']);
  });

  it('a promotion heard before its registration unloads the old version here, not the promoted one', async () => {
    const f = await follower();
    await f.step(state());
    await traffic(f);
    // the leader registers the promotion, then records the canary's success; this replica hears the
    // record first (the two are different watches)
    await f.store.setSetting(
      'adapters.promoted',
      { fr: { model: 'm', source: '/adapters/fr?error_rate=0', version: '2', servedAs: 'fr--2', replaces: '/adapters/fr' } },
      0,
    );
    await f.step(state({ phase: 'succeeded' }));
    await expect.poll(() => loaded(f.sim)).toEqual(['fr--2']);
    expect(f.dp.adapters.get('fr')?.servedAs).toBe('fr--2');
    expect(f.dp.adapters.candidate('fr')).toBeUndefined();
    await traffic(f);
    expect(await loaded(f.sim)).toEqual(['fr--2']);
    expect(f.errors).toEqual([]);
  });
});

describe('the adapter canary mirror, its races', () => {
  it('a promotion that happened while the replica was away from etcd: the old version is unloaded at the next sync (docs/cluster.md)', async () => {
    const f = await follower();
    await f.step(state());
    await traffic(f);
    expect((await loaded(f.sim)).sort()).toEqual(['fr', 'fr--2']);
    // while away: the leader promoted (registration, then the record) — neither heard by watch
    await f.store.setSetting(
      'adapters.promoted',
      { fr: { model: 'm', source: '/adapters/fr?error_rate=0', version: '2', servedAs: 'fr--2', replaces: '/adapters/fr' } },
      0,
    );
    await put(f.store, state({ phase: 'promoting' }));
    await put(f.store, state({ phase: 'succeeded' }));
    await f.mirror.syncAll(true);
    expect(f.dp.adapters.get('fr')?.servedAs).toBe('fr--2');
    expect(f.dp.adapters.candidate('fr')).toBeUndefined();
    // the retired version (fr) should be unloaded from the worker this replica loaded it on
    await expect.poll(() => loaded(f.sim), { timeout: 3_000 }).toEqual(['fr--2']);
  });

  it("a sync's stale read of the active rollouts does not take away a canary the watch just started", async () => {
    const f = await follower();
    await traffic(f);
    // the sync reads the active rollouts (none yet); while that read is on its way back, the leader
    // starts a canary and its first step arrives by watch
    const real = f.store.listActiveRollouts.bind(f.store);
    f.store.listActiveRollouts = async () => {
      const stale = await real();
      await f.step(state({ id: 'ac-2' }));
      expect(f.dp.adapters.candidate('fr')?.salt).toBe('ac-2'); // the watch applied it
      return stale;
    };
    await f.mirror.syncAll(true);
    f.store.listActiveRollouts = real;
    // the canary is still running on the leader: this replica should give its candidate the share
    expect(f.dp.adapters.candidate('fr')).toMatchObject({ share: 0.5, salt: 'ac-2' });
  });

  it("a promotion whose registration is heard before its 'promoting' record logs no bogus error", async () => {
    const f = await follower();
    await f.step(state());
    await traffic(f);
    const promoted = { fr: { model: 'm', source: '/adapters/fr?error_rate=0', version: '2', servedAs: 'fr--2', replaces: '/adapters/fr' } };
    // leader: 'promoting' persisted, then the registration; this replica hears the settings watch first
    const promoting = await put(f.store, state({ phase: 'promoting' }));
    await f.store.setSetting('adapters.promoted', promoted, 0);
    f.mirror.changed({ area: 'settings', key: 'settings/adapters.promoted', value: promoted });
    await expect.poll(() => f.dp.adapters.get('fr')?.servedAs).toBe('fr--2');
    f.mirror.changed({ area: 'rollouts', key: 'rollouts/ac-1', value: promoting });
    await f.step(state({ phase: 'succeeded' }));
    await expect.poll(() => loaded(f.sim)).toEqual(['fr--2']);
    expect(f.errors).toEqual([]);
  });
});
