import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GlidepathConfig, ModelConfig, VersionConfig } from '../../../src/config/types.js';
import { Registry } from '../../../src/store/registry.js';
import { openMemoryStore, openStore } from '../../../src/store/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { versionConfig } from '../../unit/domain/version-fixture.js';
import { rejected } from '../../helpers/errors.js';

const T0 = 1_700_000_000_000;

/** A registry with a fake clock that advances 1 ms per read. */
function setup(store: Store = openMemoryStore()): { reg: Registry; store: Store } {
  let t = T0;
  return { reg: new Registry(store, () => ++t), store };
}

/** register → loading → ready */
async function loaded(reg: Registry, id: string, model = 'llama'): Promise<void> {
  await reg.register(versionConfig(id, model));
  await reg.transition(model, id, 'loading', {}, { actor: 'controller' });
  await reg.transition(model, id, 'ready', { loadTimeMs: 900, gpus: [id] }, { actor: 'controller' });
}

function config(...versions: VersionConfig[]): Pick<GlidepathConfig, 'models'> {
  const byModel = new Map<string, VersionConfig[]>();
  for (const v of versions) byModel.set(v.model, [...(byModel.get(v.model) ?? []), v]);
  const models: ModelConfig[] = [...byModel].map(([name, vs]) => ({
    name,
    priority: 'high',
    slo: {},
    minReplicas: 1,
    maxReplicas: 1,
    versions: vs,
    route: { weights: { [vs[0]!.id]: 1 }, overrides: {} },
  }));
  return { models };
}

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

describe('Registry', () => {
  it('registers, refuses duplicates, and names known versions when one is missing', async () => {
    const { reg } = setup();
    const v = await reg.register(versionConfig('v1'));
    expect(v.status).toBe('registered');
    expect(await reg.get('llama', 'v1')).toEqual(v);
    const dup = await rejected(reg.register(versionConfig('v1')));
    expect([dup.code, dup.status]).toEqual(['version_exists', 409]);
    const nf = await rejected(reg.get('llama', 'v9'));
    expect([nf.code, nf.status]).toEqual(['version_not_found', 404]);
    expect(nf.message).toContain('known: v1');
    expect(await reg.find('llama', 'v9')).toBeUndefined();
  });

  it('computes the card checksum when the input has none', async () => {
    const { reg } = setup();
    const v = await reg.register({ ...versionConfig('v1'), cardChecksum: '' });
    expect(v.cardChecksum).toMatch(/^[0-9a-f]{16}$/);
    expect(v.cardChecksum).toBe(versionConfig('v1').cardChecksum);
  });

  it('refuses an illegal transition with 409 naming both states, and changes nothing', async () => {
    const { reg } = setup();
    await reg.register(versionConfig('v1'));
    const before = await reg.get('llama', 'v1');
    const e = await rejected(reg.transition('llama', 'v1', 'active'));
    expect([e.code, e.status]).toEqual(['illegal_transition', 409]);
    expect(e.message).toContain('registered → active');
    expect(e.details).toEqual({ from: 'registered', to: 'active' });
    expect(await reg.get('llama', 'v1')).toEqual(before);
    expect(await reg.transitions('llama', 'v1')).toEqual([]);
  });

  it('records every transition with actor and reason', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    expect((await reg.transitions('llama', 'v1')).map((t) => [t.from, t.to, t.actor])).toEqual([
      ['registered', 'loading', 'controller'],
      ['loading', 'ready', 'controller'],
    ]);
    const v = await reg.get('llama', 'v1');
    expect(v).toMatchObject({ status: 'ready', loadTimeMs: 900, gpus: ['v1'] });
    expect(v.loadedAt).toBeDefined();
  });

  it('keeps at most one active version: transition refuses, promote swaps', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    await loaded(reg, 'v2');
    await reg.transition('llama', 'v1', 'active', {}, { actor: 'alice' });
    const e = await rejected(reg.transition('llama', 'v2', 'active'));
    expect(e.code).toBe('active_exists');
    expect(e.message).toContain('v1');
    expect((await reg.get('llama', 'v2')).status).toBe('ready'); // rolled back as a whole

    const { active, previous } = await reg.promote('llama', 'v2', { actor: 'alice', reason: 'deploy green' });
    expect(active.status).toBe('active');
    expect(previous?.status).toBe('standby');
    expect(previous?.rollbackEligible).toBe(true);
    expect((await reg.active('llama'))?.id).toBe('v2');
    expect((await reg.standby('llama'))?.id).toBe('v1');
    // idempotent
    expect((await reg.promote('llama', 'v2')).previous).toBeUndefined();
    // a registered version cannot be promoted
    await reg.register(versionConfig('v3'));
    const e3 = await rejected(reg.promote('llama', 'v3'));
    expect(e3.code).toBe('illegal_transition');
    expect(e3.message).toContain('registered → active');
  });

  it('promote can retire the previous active version in the same transaction', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    await loaded(reg, 'v2');
    await reg.promote('llama', 'v1');
    const { previous } = await reg.promote('llama', 'v2', { demoteTo: 'retired' });
    expect(previous).toMatchObject({ id: 'v1', status: 'retired', gpus: [] });
    expect((await reg.transitions('llama', 'v1')).map((t) => t.to)).toEqual(['loading', 'ready', 'active', 'standby', 'retired']);
    expect(await reg.standby('llama')).toBeUndefined();
  });

  it('rolls back to the standby, blocks the bad version, and refuses a second rollback', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    await loaded(reg, 'v2');
    await reg.promote('llama', 'v1');
    await reg.promote('llama', 'v2');
    const { active, previous } = await reg.rollback('llama', { actor: 'controller', reason: 'error rate 2.1% > 0.1%' });
    expect(active.id).toBe('v1');
    expect(previous).toMatchObject({ id: 'v2', status: 'standby', rollbackEligible: false });
    expect(previous?.rollbackBlockedReason).toMatch(/^rolled back to v1 at /);
    const e = await rejected(reg.rollback('llama'));
    expect([e.code, e.status]).toEqual(['no_standby', 409]);
    expect(e.message).toContain('v2 — rolled back to v1');
    // swap again (issue 4's acceptance): a deliberate promote still works and clears the block
    const again = await reg.promote('llama', 'v2');
    expect(again.active.rollbackBlockedReason).toBeUndefined();
    expect((await reg.standby('llama'))?.id).toBe('v1');

    expect((await reg.history('llama')).map((p) => [p.versionId, p.until === undefined])).toEqual([
      ['v2', true],
      ['v1', false],
      ['v2', false],
      ['v1', false],
    ]);
    const h = await reg.history('llama');
    expect(h[2]!.actor).toBeUndefined();
    expect(h[1]!.actor).toBe('controller');
    expect(h[1]!.reason).toBe('error rate 2.1% > 0.1%');
    // periods are contiguous: each one ends when the next begins
    for (let i = 0; i + 1 < h.length; i++) expect(h[i + 1]!.until).toBe(h[i]!.since);
  });

  it('rollback without blocking toggles, and picks the most recently active standby', async () => {
    const { reg } = setup();
    for (const id of ['v1', 'v2', 'v3']) await loaded(reg, id);
    await reg.promote('llama', 'v1');
    await reg.promote('llama', 'v2');
    await reg.promote('llama', 'v3');
    expect((await reg.standbys('llama')).map((v) => v.id)).toEqual(['v2', 'v1']);
    expect((await reg.rollback('llama', { blockRolledBack: false })).active.id).toBe('v2');
    expect((await reg.standby('llama'))?.id).toBe('v3');
    expect((await reg.rollback('llama', { blockRolledBack: false })).active.id).toBe('v3');
  });

  it('an unhealthy standby is no rollback target', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    await loaded(reg, 'v2');
    await reg.promote('llama', 'v1');
    await reg.promote('llama', 'v2');
    await reg.update('llama', 'v1', { health: { state: 'unhealthy', detail: 'probe: garbled output' } });
    expect(await reg.standby('llama')).toBeUndefined();
    expect((await rejected(reg.rollback('llama'))).code).toBe('no_standby');
    expect((await rejected(reg.update('llama', 'v1', { loadTimeMs: Number.NaN }))).code).toBe('invalid_patch');
  });

  it('lists by model and status', async () => {
    const { reg } = setup();
    await loaded(reg, 'v1');
    await reg.register(versionConfig('v2'));
    await reg.register(versionConfig('a', 'mistral'));
    expect((await reg.list()).map((v) => `${v.model}/${v.id}`)).toEqual(['llama/v1', 'llama/v2', 'mistral/a']);
    expect((await reg.list('llama', ['registered'])).map((v) => v.id)).toEqual(['v2']);
  });
});

describe('Registry.seedFromConfig and restarts', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'glidepath-registry-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('adds unknown versions, never overwrites persisted status, refreshes operational fields, reports checksum drift', async () => {
    const cfg = config(versionConfig('v1'), versionConfig('v2'), versionConfig('a', 'mistral'));
    let store = openStore(dir);
    let { reg } = setup(store);
    const first = await reg.seedFromConfig(cfg);
    expect(first.added.map((v) => `${v.model}/${v.id}`)).toEqual(['llama/v1', 'llama/v2', 'mistral/a']);
    await loaded(reg, 'v3'); // registered through the API, not in the config
    await reg.transition('llama', 'v1', 'loading');
    await reg.transition('llama', 'v1', 'ready');
    await reg.promote('llama', 'v1');
    await reg.update('llama', 'v1', { metadata: { deployedBy: 'alice' } });
    await store.close();

    // restart: same config plus an operational change and a drifted card
    store = openStore(dir);
    stores.push(store);
    ({ reg } = setup(store));
    const changed = config(
      versionConfig('v1', 'llama', { provider: { kind: 'static', endpoints: ['http://10.0.0.1:8000'] }, warmup: { requests: 2, maxTokens: 8 } }),
      versionConfig('v2', 'llama', { weightHash: 'sha256:other' }),
      versionConfig('a', 'mistral'),
      versionConfig('v4'),
    );
    const second = await reg.seedFromConfig(changed);
    expect(second.added.map((v) => v.id)).toEqual(['v4']);
    expect(second.unchanged.map((v) => v.id)).toEqual(['a']);
    expect(second.updated.map((v) => v.id)).toEqual(['v1']);
    expect(second.conflicts).toEqual([
      { model: 'llama', id: 'v2', stored: versionConfig('v2').cardChecksum, config: versionConfig('v2', 'llama', { weightHash: 'sha256:other' }).cardChecksum },
    ]);
    const v1 = await reg.get('llama', 'v1');
    expect(v1.status).toBe('active');
    expect(v1.provider).toEqual({ kind: 'static', endpoints: ['http://10.0.0.1:8000'] });
    expect(v1.warmupTokens).toBe(16);
    expect(v1.metadata).toEqual({ owner: 'ml-platform', deployedBy: 'alice' }); // runtime keys survive
    expect((await reg.get('llama', 'v2')).weightHash).toBe('sha256:v2');
    expect((await reg.get('llama', 'v3')).status).toBe('ready');
    expect((await reg.active('llama'))?.id).toBe('v1');
    expect(await reg.history('llama')).toHaveLength(1);
    expect((await reg.transitions('llama', 'v1')).map((t) => t.to)).toEqual(['loading', 'ready', 'active']);
    // a third start with the same config changes nothing
    const third = await reg.seedFromConfig(changed);
    expect([third.added.length, third.updated.length, third.unchanged.length, third.conflicts.length]).toEqual([0, 0, 3, 1]);
  });
});
