// The GPU inventory's time-share slots over a real store: a group holds its slots (taken once, found
// again after a restart), every version of its models places its workers there without taking GPUs
// (a second worker of a version never on a slot it already has), other models cannot take them, and
// a version's release leaves the group's GPUs held.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { ConflictError } from '../../../src/errors.js';
import { GpuInventory } from '../../../src/fleet/inventory.js';
import { Registry } from '../../../src/store/registry.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';
import { rejected } from '../../helpers/errors.js';

const v = (id: string) => ({ id, replicas: 2, provider: { kind: 'sim' } });
const raw = {
  gpus: { count: 5, memory_gb: 80 },
  time_sharing: [{ name: 'g', models: ['a', 'b'] }],
  models: [
    { name: 'a', versions: [v('v1'), v('v2')] },
    { name: 'b', versions: [v('v1')] },
    { name: 'c', versions: [{ ...v('v1'), replicas: 4 }] },
  ],
};
const cfg = parseConfig(raw);
const version = (model: string, id: string) =>
  cfg.models.find((m) => m.name === model)?.versions.find((x) => x.id === id) as (typeof cfg.models)[number]['versions'][number];

async function setup() {
  const store = openMemoryStore();
  await new Registry(store, () => 0).seedFromConfig(cfg);
  const inv = new GpuInventory(cfg.gpus, store, cfg.timeSharing);
  return { store, inv };
}

describe('time-share slots', () => {
  it('a group holds its slots once; its versions place there; nobody else takes them', async () => {
    const { store, inv } = await setup();
    expect(await inv.reserveSlots(1)).toEqual(['@g: holds GPU(s) 0, 1 for a, b']);
    expect(await inv.reserveSlots(2)).toEqual([]);
    expect(await inv.slots(cfg.timeSharing[0]!)).toEqual([['0'], ['1']]);
    const holder = (model: string, id: string) => (i: number) => ({ model, versionId: id, workerId: `${model}/${id}/${i}` });
    // every version of a member gets both slots, none taken
    expect(await inv.place(version('a', 'v1'), 2, 'a/v1', holder('a', 'v1'), [], 3)).toEqual([['0'], ['1']]);
    expect(await inv.place(version('b', 'v1'), 2, 'b/v1', holder('b', 'v1'), [], 3)).toEqual([['0'], ['1']]);
    // a replacement goes to the slot its version has no worker on
    expect(await inv.place(version('a', 'v2'), 1, 'a/v2', holder('a', 'v2'), ['0'], 3)).toEqual([['1']]);
    const full = await rejected(inv.place(version('a', 'v2'), 1, 'a/v2', holder('a', 'v2'), ['0', '1'], 3));
    expect(full).toBeInstanceOf(ConflictError);
    expect((full as Error).message).toBe('a/v2 needs 1 slot(s) of time-share group g but 0 of its 2 have no worker of a/v2');
    // the other model has the three GPUs left, not the slots
    expect((await inv.free()).map((g) => g.id)).toEqual(['2', '3', '4']);
    const c = await rejected(inv.place(version('c', 'v1'), 4, 'c/v1', holder('c', 'v1'), [], 3));
    expect((c as Error).message).toContain('only 3 suitable of 3 free');
    // releasing a member's version leaves the group's GPUs held
    await inv.releaseVersion('a', 'v1');
    expect((await store.listGpuAssignments()).map((a) => `${a.gpuId}:${a.model}/${a.versionId}`)).toEqual(['0:@g/slot-0', '1:@g/slot-1']);
  });

  it('a version that does not fit the slots is refused at placement (one registered through the API)', async () => {
    const { inv } = await setup();
    await inv.reserveSlots(1);
    const wide = { ...version('a', 'v1'), tp: 2 };
    const err = await rejected(inv.place(wide, 1, 'a/v9', () => ({ model: 'a', versionId: 'v1' }), [], 2));
    expect(err.code).toBe('time_share_mismatch');
    expect(err.message).toBe('a/v9 has TP 2, the slots 1: the versions of a take turns on the slots of @g');
  });

  it('slots no longer configured are let go at the next start, unless a worker still runs there', async () => {
    const { store, inv } = await setup();
    await inv.reserveSlots(1);
    // the group shrinks to one slot and another group's holder is left from an older config
    await store.assignGpus(['4'], { model: '@old', versionId: 'slot-0' }, 1);
    await store.upsertWorker({
      id: 'b/v1/9',
      model: 'b',
      versionId: 'v1',
      endpoint: 'http://127.0.0.1:9',
      provider: 'sim',
      pid: 1,
      state: 'ready',
      gpus: ['4'],
      startedAt: 1,
      updatedAt: 1,
      info: {},
    });
    const one = parseConfig({
      ...raw,
      time_sharing: [{ name: 'g', models: ['a', 'b'] }],
      models: raw.models.map((m) => ({ ...m, versions: m.versions.map((x) => ({ ...x, replicas: 1 })) })),
    });
    const again = new GpuInventory(one.gpus, store, one.timeSharing);
    expect(await again.reserveSlots(2)).toEqual([
      '@g slot-1: GPU(s) 1 no longer configured, released',
      '@old slot-0: GPU(s) 4 no longer configured, kept while a worker runs there',
    ]);
    expect(await again.slots(one.timeSharing[0]!)).toEqual([['0']]);
  });
});
