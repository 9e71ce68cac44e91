// Persisted rollout state: one discriminated union by kind with a schema version, validated when it
// is read back from the store. Records written before versioning still load; anything unreadable is
// an error that names the rollout; reading one kind never yields another.
import { describe, expect, it } from 'vitest';
import { storeRollouts } from '../../../src/control/ports.js';
import { CanaryController } from '../../../src/rollout/canary-controller.js';
import type { CanaryState } from '../../../src/rollout/canary-state.js';
import { ExperimentController } from '../../../src/rollout/experiment-controller.js';
import type { ExperimentState } from '../../../src/rollout/experiment-state.js';
import { ROLLOUT_SCHEMA_VERSION, parseRolloutState, toStoredState } from '../../../src/rollout/rollout-record.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const T = 1_700_000_000_000;

function canary(o: Partial<CanaryState> = {}): CanaryState {
  return {
    kind: 'canary',
    id: 'canary-1',
    model: 'llama',
    stable: 'v1',
    canary: 'v2',
    stages: [5, 50, 100],
    stageIndex: 1,
    stageDurationMs: 60_000,
    phase: 'progressing',
    createdAt: T,
    startedAt: T,
    stageStartedAt: T + 60_000,
    updatedAt: T + 61_000,
    look: 3,
    previous: { 'latency.location': 0.4, 'errors.rate': Number.NaN },
    verdicts: [],
    loadedByRollout: true,
    actor: 'ops',
    shadowShare: 0,
    ...o,
  };
}

function experiment(o: Partial<ExperimentState> = {}): ExperimentState {
  return {
    kind: 'experiment',
    id: 'exp-1',
    model: 'llama',
    a: 'v1',
    b: 'v2',
    split: 0.5,
    metric: 'latency',
    alpha: 0.05,
    power: 0.8,
    phase: 'running',
    createdAt: T,
    updatedAt: T,
    actor: 'ops',
    previousWeights: { v1: 1 },
    previousStable: 'v1',
    ...o,
  };
}

const row = { id: 'canary-1', model: 'llama' };

describe('parseRolloutState', () => {
  it('round-trips a canary through JSON, NaN statistics included (JSON writes them as null)', () => {
    const s = canary();
    const back = parseRolloutState(JSON.parse(JSON.stringify(toStoredState(s))), row);
    expect(back).toEqual(s);
    expect(JSON.parse(JSON.stringify(toStoredState(s)))).toMatchObject({ schemaVersion: ROLLOUT_SCHEMA_VERSION });
  });

  it('round-trips an experiment with its analysis', () => {
    const e = experiment({ phase: 'stopped', stoppedReason: 'stopped; previous route restored', minDetectableEffect: 5 });
    expect(parseRolloutState(JSON.parse(JSON.stringify(toStoredState(e))), { id: 'exp-1', model: 'llama' })).toEqual(e);
  });

  it('reads a record in the old shape (written before the schema version) as the current one', () => {
    // exactly what a store of the previous release holds: the state object, no schemaVersion
    const old = JSON.parse(
      '{"kind":"canary","id":"canary-1","model":"llama","stable":"v1","canary":"v2","stages":[2,5,10,25,50,100],"stageIndex":2,"stageDurationMs":300000,"phase":"paused","createdAt":1700000000000,"startedAt":1700000000000,"stageStartedAt":1700000600000,"updatedAt":1700000700000,"look":41,"previous":{"latency.location":0.61,"errors.rate":null},"verdicts":[{"at":1700000600000,"stage":1,"percent":5,"look":20,"outcome":"pass","action":"advance","score":100,"reasons":["score 100 >= 95"],"metrics":[{"name":"errors","outcome":"pass","reason":"ok","stable":{"n":400},"canary":{"n":21},"checks":[{"id":"errors.rate","outcome":"pass","pValue":null,"pValueSequential":1,"effect":0,"threshold":0.5}]}],"decisive":true}],"pausedReason":"inconclusive (score 85)","loadedByRollout":true,"actor":"admin","shadowShare":0}',
    ) as unknown;
    const s = parseRolloutState(old, row);
    expect(s.kind).toBe('canary');
    if (s.kind !== 'canary') return;
    expect(s).toMatchObject({ phase: 'paused', stageIndex: 2, look: 41, pausedReason: 'inconclusive (score 85)' });
    expect(s.previous['errors.rate']).toBeNaN();
    expect(s.verdicts[0]?.metrics[0]?.checks[0]?.pValue).toBeNaN();
  });

  it('a corrupted record is an error naming the rollout and the bad fields, never a cast', () => {
    const bad = { ...toStoredState(canary()), stageIndex: 'two', phase: 'flying' };
    let err: unknown;
    try {
      parseRolloutState(bad, row);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'rollout_state_invalid', status: 500, details: { rollout: 'canary-1', model: 'llama' } });
    expect((err as Error).message).toMatch(/^rollout canary-1 of model llama has an unreadable stored state: .*stageIndex: .*phase: /);
    expect(() => parseRolloutState('{"kind":"canary"', row)).toThrow(
      /rollout canary-1 of model llama has an unreadable stored state: expected an object, got string/,
    );
    expect(() => parseRolloutState(null, row)).toThrow(/expected an object, got null/);
  });

  it('an unknown kind and a newer schema version are refused by name', () => {
    expect(() => parseRolloutState({ ...toStoredState(canary()), kind: 'surge' }, row)).toThrow(
      /unknown kind "surge" \(known: canary, experiment, rolling, adapter_canary\)/,
    );
    expect(() => parseRolloutState({ ...canary(), kind: undefined }, row)).toThrow(/unknown kind null/);
    expect(() => parseRolloutState({ ...toStoredState(canary()), schemaVersion: 2 }, row)).toThrow(/schemaVersion 2 is not one this Glidepath reads/);
  });

  it('a state that names another rollout than its row is refused', () => {
    expect(() => parseRolloutState(toStoredState(canary({ id: 'canary-2' })), row)).toThrow(/the state names rollout canary-2 of model llama/);
  });
});

describe('the rollouts port over the store', () => {
  it('unfinished(): readable rollouts of every kind, and the unreadable ones as errors naming them', async () => {
    const store = openMemoryStore();
    const port = storeRollouts(store, { now: () => T });
    await port.create(canary());
    await store.putRollout({ id: 'exp-broken', model: 'mistral', phase: 'running', state: { kind: 'experiment', id: 'exp-broken', model: 'mistral' } }, T);
    await store.putRollout({ id: 'roll-1', model: 'qwen', phase: 'running', state: { kind: 'surge', id: 'roll-1', model: 'qwen' } }, T);
    await store.putRollout({ id: 'roll-2', model: 'gemma', phase: 'progressing', state: { kind: 'rolling', id: 'roll-2', model: 'gemma' } }, T);
    const { rollouts, unreadable } = await port.unfinished();
    expect(rollouts.map((r) => [r.state.kind, r.state.id])).toEqual([['canary', 'canary-1']]);
    expect(unreadable.map((e) => e.message)).toEqual([
      expect.stringMatching(/^rollout exp-broken of model mistral has an unreadable stored state: a: /),
      'rollout roll-1 of model qwen has an unreadable stored state: unknown kind "surge" (known: canary, experiment, rolling, adapter_canary)',
      expect.stringMatching(/^rollout roll-2 of model gemma has an unreadable stored state: from: /),
    ]);
    await expect(port.get('exp-broken')).rejects.toMatchObject({ code: 'rollout_state_invalid' });
    expect(await port.inProgress('qwen')).toEqual({ id: 'roll-1', kind: 'surge' });
  });

  it('an old-shape row in the store loads through the port and is written back versioned', async () => {
    const store = openMemoryStore();
    const old = canary();
    await store.putRollout({ id: old.id, model: old.model, phase: old.phase, state: old }, T);
    const port = storeRollouts(store, { now: () => T + 1 });
    const r = await port.get('canary-1');
    expect(r?.state).toEqual(canary());
    await port.save({ ...canary(), stageIndex: 2 }, r?.revision ?? 0);
    expect((await store.getRollout('canary-1'))?.state).toMatchObject({ schemaVersion: ROLLOUT_SCHEMA_VERSION, stageIndex: 2 });
  });
});

describe('a step and its log entry', () => {
  it('are written together: a save whose compare-and-set fails leaves no entry either', async () => {
    const store = openMemoryStore();
    const port = storeRollouts(store, { now: () => T });
    const rev = await port.create(canary());
    const next = await port.save({ ...canary(), stageIndex: 1 }, rev, { at: T, kind: 'advance', message: 'stage 2' });
    await expect(port.save({ ...canary(), stageIndex: 2 }, rev, { at: T, kind: 'advance', message: 'stage 3' })).rejects.toMatchObject({
      code: 'rollout_conflict',
    });
    expect((await port.events('canary-1')).map((e) => e.message)).toEqual(['stage 2']);
    expect((await port.get('canary-1'))?.revision).toBe(next);
  });
});

describe('regression: canary and experiment share a table, and "the newest rollout" may be the other kind', () => {
  it('reading the canary of a model never returns an experiment, nor the experiment a canary', async () => {
    const f = await FakeFleet.create({
      models: [
        { name: 'llama', versions: [{ id: 'v1' }, { id: 'v2' }], route: { weights: { v1: 1 } }, canary: { stages: [10, 100], ignore_first_requests: 0 } },
      ],
    });
    const ports = f.ports();
    const canaryCtl = new CanaryController(ports, { tickMs: 1_000 });
    const expCtl = new ExperimentController(ports);
    const ops = { name: 'ops' };
    // Given a canary that ended (aborted: v2 stays loaded) …
    const c = await canaryCtl.start('llama', { version: 'v2' }, ops);
    await canaryCtl.whenIdle();
    await canaryCtl.abort('llama', ops, 'not today');
    await ports.versions.transition('llama', 'v2', 'loading');
    await ports.versions.transition('llama', 'v2', 'ready');
    // … and then an experiment, the model's newest rollout
    f.clock.t += 1_000;
    const e = await expCtl.create('llama', { a: 'v1', b: 'v2', metric: 'latency' }, ops);
    await expCtl.stopExperiment('llama', {}, ops);
    expect((await f.store.listRollouts({ model: 'llama', limit: 1 }))[0]?.id).toBe(e.id);

    // Then "the canary" is still the canary
    const seen = await canaryCtl.get('llama');
    expect(seen.kind).toBe('canary');
    expect(seen.id).toBe(c.id);
    expect((await canaryCtl.history('llama', 10)).map((r) => r.state.id)).toEqual([c.id]);
    await expect(canaryCtl.get('llama', e.id)).rejects.toMatchObject({ code: 'rollout_not_found' });
    // and the experiment is the experiment, whichever came last
    expect((await expCtl.get('llama')).id).toBe(e.id);
    await expect(expCtl.get('llama', c.id)).rejects.toMatchObject({ code: 'experiment_not_found' });
  });

  it('an experiment refused because a canary runs leaves the route alone (regression: its split was published first)', async () => {
    const f = await FakeFleet.create({
      models: [{ name: 'llama', versions: [{ id: 'v1' }, { id: 'v2' }], route: { weights: { v1: 1 } }, canary: { stages: [10, 100] } }],
    });
    const ports = f.ports();
    await ports.versions.transition('llama', 'v2', 'loading');
    await ports.versions.transition('llama', 'v2', 'ready');
    const canaryCtl = new CanaryController(ports, { tickMs: 1_000 });
    await canaryCtl.start('llama', { version: 'v2' }, { name: 'ops' });
    await canaryCtl.whenIdle();
    const before = f.weights('llama');
    await expect(new ExperimentController(ports).create('llama', { a: 'v1', b: 'v2', metric: 'latency' }, { name: 'ops' })).rejects.toMatchObject({
      code: 'rollout_in_progress',
    });
    expect(f.weights('llama')).toEqual(before);
  });
});
