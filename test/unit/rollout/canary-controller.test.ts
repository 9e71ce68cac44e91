// The canary controller's stage machine, in process and in milliseconds: the real controller and the
// real sequential judge over the in-memory fake ports, the loop driven by a fake clock. Beside the
// end-to-end runs (test/e2e/canary*.test.ts), which take the same paths with real workers.
import { describe, expect, it } from 'vitest';
import { newHealth } from '../../../src/health/machine.js';
import { CanaryController } from '../../../src/rollout/canary-controller.js';
import type { CanaryState } from '../../../src/rollout/canary-state.js';
import type { StoredRollout } from '../../../src/rollout/rollout-record.js';
import type { FakeFleet } from '../../helpers/fake-ports.js';
import { CANARY_MODEL, CANARY_STAGE_MS, canaryFleet } from '../../helpers/canary-fleet.js';

const M = CANARY_MODEL;
const OPS = { name: 'ops' };
const STAGE_MS = CANARY_STAGE_MS;
const TICK_MS = 1_000;

const fleet = canaryFleet;

/** A controller as the composition root builds one: over the ports, ticking on the (fake) clock. */
function controller(f: FakeFleet): CanaryController {
  const c = new CanaryController(f.ports(), { tickMs: TICK_MS });
  c.run();
  return c;
}

/** Both versions serve `n` requests with the same deterministic spread of timings: an equal canary. */
function equalTraffic(f: FakeFleet, n: number): void {
  for (const v of ['v1', 'v2']) f.records(M, v, n, (i) => ({ latencyMs: 100 + (i % 10), ttftMs: 20 + (i % 5), tpotMs: 5 + (i % 3) }));
}

async function advance(f: FakeFleet, c: CanaryController, ms: number): Promise<void> {
  await f.clock.advance(ms, () => c.whenIdle());
}

async function startCanary(f: FakeFleet, c: CanaryController): Promise<CanaryState> {
  const s = await c.start(M, { version: 'v2' }, OPS);
  await c.whenIdle();
  return c.get(M, s.id);
}

/** The unfinished canaries a restarted control plane reads back from the store. */
async function unfinishedCanaries(f: FakeFleet): Promise<StoredRollout<CanaryState>[]> {
  const { rollouts, unreadable } = await f.ports().rollouts.unfinished();
  expect(unreadable).toEqual([]);
  return rollouts.flatMap((r) => (r.state.kind === 'canary' ? [{ ...r, state: r.state }] : []));
}

/** A canary started by one controller whose process then died with the rollout persisted as `patch` says. */
async function crashedCanary(f: FakeFleet, patch: Partial<CanaryState>): Promise<void> {
  const before = controller(f);
  await startCanary(f, before);
  before.shutdown();
  const [rec] = await unfinishedCanaries(f);
  if (!rec) throw new Error('no unfinished canary');
  await f.ports().rollouts.save({ ...rec.state, ...patch }, rec.revision);
}

/** The restarted process's controller, once it has recovered the unfinished canaries and settled. */
async function restarted(f: FakeFleet): Promise<CanaryController> {
  const after = controller(f);
  await after.recover(await unfinishedCanaries(f));
  await after.whenIdle();
  return after;
}

describe('canary stage machine (fake clock, fake ports)', () => {
  it('a canary whose worker turns unhealthy is rolled back at the next tick as a critical failure, whatever its statistics', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    equalTraffic(f, 40);
    // a stable worker's trouble is not the canary's: nothing happens
    await f.ports().workers.saveHealth(f.live(M, 'v1')[0]!.info(), { ...newHealth('healthy', 0), state: 'unhealthy', breaker: 'open' });
    await advance(f, c, TICK_MS);
    expect((await c.get(M)).phase).toBe('progressing');
    // the health controller saves a canary worker's new health: draining, for silent corruption
    const corrupt = { ...newHealth('healthy', 0), state: 'draining' as const, breaker: 'open' as const, corrupt: true };
    await f.ports().workers.saveHealth(f.live(M, 'v2')[0]!.info(), {
      ...corrupt,
      lastFailure: { reason: 'token_mismatch', detail: 'token 1 is "x"', at: 0, source: 'probe' },
    });
    await advance(f, c, TICK_MS);
    const s = await c.get(M);
    expect(s.phase).toBe('rolled_back');
    expect(s.rollback?.reason).toMatch(/^critical: canary worker llama\/v2\/0 turned draining \(token_mismatch: token 1 is "x"\)/);
    expect(f.weights(M)).toEqual({ v1: 1 });
  });

  it('loads the candidate, enters stage 1, holds the stage, advances through the stages and promotes at the end', async () => {
    const f = await fleet();
    const c = controller(f);
    const s0 = await startCanary(f, c);
    // Given a canary of a registered version: the rollout loaded it and routed 10 % to it
    expect(s0).toMatchObject({ phase: 'progressing', stageIndex: 0, loadedByRollout: true, stable: 'v1', canary: 'v2' });
    expect(f.log).toEqual(['load llama/v2', 'publish llama v2=0.1,v1=0.9']);
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('ready');

    // When equal traffic arrives before the stage has lasted its duration: the stage holds
    equalTraffic(f, 40);
    await advance(f, c, TICK_MS);
    let s = await c.get(M);
    expect(s.stageIndex).toBe(0);
    expect(s.look).toBe(1);
    expect(s.message).toMatch(/^stage holds \d+ s more$/);
    expect(s.verdicts).toEqual([]);

    // Then once the stage has lasted: pass → stage 2 at 50 %
    await advance(f, c, STAGE_MS);
    s = await c.get(M);
    expect(s.stageIndex).toBe(1);
    expect(f.weights(M)).toEqual({ v2: 0.5, v1: 0.5 });
    expect(s.verdicts.map((v) => [v.percent, v.outcome, v.decisive])).toEqual([[10, 'pass', true]]);

    // And after the last stage below 100 %: promoted, v1 kept loaded as the standby
    equalTraffic(f, 40);
    await advance(f, c, STAGE_MS);
    s = await c.get(M);
    expect(s.phase).toBe('succeeded');
    expect(s.verdicts.map((v) => v.percent)).toEqual([10, 50]);
    expect(f.weights(M)).toEqual({ v2: 1, v1: 0 });
    expect(f.route(M).stable).toBe('v2');
    expect((await f.ports().versions.active(M))?.id).toBe('v2');
    expect((await f.ports().versions.standby(M))?.id).toBe('v1');
    expect(f.notified.map((n) => n.kind)).toEqual(['canary_succeeded']);
    // the notification's data in the API's names: no rollback, the last verdict as GET …/canary shows it
    expect(f.notified[0]?.data).toEqual({ id: s.id, rollback: null, last: expect.objectContaining({ percent: 50, outcome: 'pass' }) as unknown });
    expect(f.eventKinds('canary_')).toEqual([
      'canary_started',
      'canary_loading',
      'canary_progress',
      'canary_progressing',
      'canary_advance',
      'canary_promoting',
      'canary_succeeded',
    ]);
    // the loop goes on ticking with nothing to do
    expect(f.clock.pending()).toEqual([TICK_MS]);
    c.shutdown();
    expect(f.clock.pending()).toEqual([]);
  });

  it('a write the store refuses at a decision leaves the canary as the store has it; the next look decides again', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    equalTraffic(f, 40);
    await advance(f, c, STAGE_MS);
    expect((await c.get(M)).stageIndex).toBe(1);
    // the promotion's first write fails (an etcd blip): still at stage 2 in memory as in the store
    equalTraffic(f, 40);
    await advance(f, c, STAGE_MS - 2 * TICK_MS);
    expect((await c.get(M)).phase).toBe('progressing');
    f.failSaves = 1;
    const failed = () => f.events.some((e) => e.kind === 'canary_error' && /deadline exceeded/.test(e.message));
    for (let i = 0; i < 5 && !failed(); i++) await advance(f, c, TICK_MS);
    expect(failed()).toBe(true);
    const at = await c.get(M);
    const stored = (await unfinishedCanaries(f)).find((r) => r.state.id === at.id)?.state;
    expect({ phase: at.phase, stage: at.stageIndex, look: at.look }).toEqual({ phase: stored?.phase, stage: stored?.stageIndex, look: stored?.look });
    await advance(f, c, 2 * TICK_MS);
    const s = await c.get(M);
    expect(s.phase).toBe('succeeded');
    expect(s.verdicts.map((v) => v.percent)).toEqual([10, 50]);
    expect(f.weights(M)).toEqual({ v2: 1, v1: 0 });
    c.shutdown();
  });

  it('waits for samples: a stage that has lasted but has too few samples is not judged passed', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    equalTraffic(f, 5);
    await advance(f, c, STAGE_MS + TICK_MS);
    let s = await c.get(M);
    expect(s).toMatchObject({ phase: 'progressing', stageIndex: 0 });
    expect(s.message).toMatch(/^waiting for data: /);
    expect(s.last?.outcome).toBe('nodata');
    // the samples arrive: the next look advances
    equalTraffic(f, 40);
    await advance(f, c, TICK_MS);
    s = await c.get(M);
    expect(s.stageIndex).toBe(1);
    expect(c.sampleCounts(M)).toEqual({ stable: 45, canary: 45, min_samples: 20 });
  });

  it('pause holds the stage whatever the samples say; resume counts the stage as passed', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    const paused = await c.pause(M, OPS, 'looking at dashboards');
    expect(paused).toMatchObject({ phase: 'paused', pausedReason: 'looking at dashboards (ops)' });
    equalTraffic(f, 40);
    await advance(f, c, 2 * STAGE_MS);
    let s = await c.get(M);
    expect(s).toMatchObject({ phase: 'paused', stageIndex: 0 });
    expect(s.message).toBe('paused: looking at dashboards (ops)');
    await expect(c.pause(M, OPS)).rejects.toMatchObject({ code: 'not_progressing' });

    s = await c.resume(M, OPS);
    expect(s).toMatchObject({ phase: 'progressing', stageIndex: 1, pausedReason: undefined });
    expect(f.weights(M)).toEqual({ v2: 0.5, v1: 0.5 });
    await expect(c.resume(M, OPS)).rejects.toMatchObject({ code: 'not_paused' });
    expect(f.audit.filter((a) => a.action.startsWith('canary_')).map((a) => [a.action, a.result])).toEqual([
      ['canary_start', 'ok'],
      ['canary_pause', 'ok'],
      ['canary_pause', 'error'],
      ['canary_resume', 'ok'],
      ['canary_resume', 'error'],
    ]);
  });

  it('a failing verdict rolls back at once, before the stage has lasted: traffic to stable, drain, unload, retire, notify', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    f.records(M, 'v1', 60, (i) => ({ latencyMs: 100 + (i % 10) }));
    f.records(M, 'v2', 60, () => ({ status: 500, errorCode: 'upstream_error', completionTokens: 0 }));
    await advance(f, c, TICK_MS);
    const s = await c.get(M);
    expect(s.phase).toBe('rolled_back');
    expect(s.rollback).toMatchObject({ percentAtRollback: 10, canaryRequests: 60, drained: 0, aborted: 0 });
    expect(s.rollback?.reason).toMatch(/critical metric errors failed/);
    expect(s.verdicts.map((v) => [v.outcome, v.action])).toEqual([['fail', 'rollback']]);
    // the canary this rollout loaded is gone from the route, drained, unloaded and retired
    expect(f.weights(M)).toEqual({ v1: 1 });
    expect(f.log.slice(2)).toEqual(['publish llama v1=1', 'drain llama/v2', 'unload llama/v2']);
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('retired');
    expect(f.notified.map((n) => [n.kind, n.version])).toEqual([['canary_rolled_back', 'v2']]);
    expect(f.notified[0]?.data).toMatchObject({
      id: s.id,
      rollback: { percent_at_rollback: 10, canary_requests: 60, drained: 0, timing: { total_ms: expect.any(Number) as number } },
      last: { outcome: 'fail', action: 'rollback', metrics: expect.arrayContaining([expect.objectContaining({ name: 'errors' })]) as unknown },
    });
    expect(await f.ports().rollouts.inProgress(M)).toBeUndefined();
  });

  it('abort of a canary of a loaded version moves the traffic back and keeps the version loaded', async () => {
    const f = await fleet();
    await f.ports().versions.transition(M, 'v2', 'loading');
    await f.ports().versions.transition(M, 'v2', 'ready');
    const c = controller(f);
    const s0 = await startCanary(f, c);
    expect(s0.loadedByRollout).toBe(false);
    const s = await c.abort(M, OPS, 'wrong version');
    expect(s).toMatchObject({ phase: 'aborted', rollback: { reason: 'wrong version' } });
    expect(f.weights(M)).toEqual({ v1: 1, v2: 0 });
    expect(f.log).not.toContain('unload llama/v2');
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('ready');
  });

  it('a canary whose version fails to load ends failed, and the model is free again', async () => {
    const f = await fleet();
    f.failLoad.set('llama/v2', 'out of GPU memory');
    const c = controller(f);
    const s = await startCanary(f, c);
    expect(s).toMatchObject({ phase: 'failed', message: 'could not start the canary: out of GPU memory' });
    expect(f.weights(M)).toEqual({ v1: 1 });
    expect(await f.ports().rollouts.inProgress(M)).toBeUndefined();
  });

  it('resumes after a restart: a new controller over the same persisted state continues at the stage where the old one stopped', async () => {
    const f = await fleet();
    const before = controller(f);
    const started = await startCanary(f, before);
    equalTraffic(f, 40);
    await advance(f, before, STAGE_MS + TICK_MS);
    const atCrash = await before.get(M);
    expect(atCrash).toMatchObject({ phase: 'progressing', stageIndex: 1 });
    // the process dies: nothing of the old controller survives but the store and the data plane
    before.shutdown();

    const after = controller(f);
    await after.recover(await unfinishedCanaries(f));
    let s = await after.get(M);
    expect(s).toMatchObject({ id: started.id, phase: 'progressing', stageIndex: 1, look: 0, previous: {} });
    // as JSON keeps them (NaN statistics read back as NaN where the schema knows the field, null inside free-form summaries)
    expect(JSON.stringify(s.verdicts)).toBe(JSON.stringify(atCrash.verdicts));
    expect(f.events.at(-1)?.message).toBe(`${started.id}: resumed after a restart at stage 2 (50 %), phase progressing`);
    // the stage clock is the persisted one: the rest of stage 2, then promotion
    equalTraffic(f, 40);
    await advance(f, after, STAGE_MS);
    s = await after.get(M);
    expect(s.phase).toBe('succeeded');
    expect(s.verdicts.map((v) => v.percent)).toEqual([10, 50]);
    expect((await f.ports().versions.active(M))?.id).toBe('v2');
  });

  it('a restart while promoting completes the promotion (regression: it stayed "promoting" forever)', async () => {
    const f = await fleet();
    // the crash came between persisting "promoting" and the registry switch
    await crashedCanary(f, { phase: 'promoting' });
    const after = await restarted(f);
    expect((await after.get(M)).phase).toBe('succeeded');
    expect(f.route(M).stable).toBe('v2');
    expect((await f.ports().versions.active(M))?.id).toBe('v2');
  });

  it('a restart while rolling back finishes the drain and unload', async () => {
    const f = await fleet();
    await crashedCanary(f, { phase: 'rolling_back', rollbackReason: 'errors', rollbackTo: 'rolled_back' });
    const after = await restarted(f);
    expect(await after.get(M)).toMatchObject({ phase: 'rolled_back', rollback: { reason: 'errors' } });
    expect(f.loaded.has('llama/v2')).toBe(false);
    expect(f.weights(M)).toEqual({ v1: 1 });
  });

  it('a restart while loading fails the canary and unloads the candidate it had loaded (regression: it was left loaded, holding its GPUs)', async () => {
    const f = await fleet();
    // the crash came after the load and the first stage's weights, before "progressing" was persisted
    await crashedCanary(f, { phase: 'loading' });
    expect(f.weights(M)).toEqual({ v1: 0.9, v2: 0.1 });
    const after = await restarted(f);
    expect(await after.get(M)).toMatchObject({ phase: 'failed', message: 'glidepath restarted while the canary was loading; start it again' });
    expect(f.weights(M)).toEqual({ v1: 1 });
    expect(f.log.slice(-3)).toEqual(['publish llama v1=1', 'drain llama/v2', 'unload llama/v2']);
    expect(f.loaded.has('llama/v2')).toBe(false);
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('retired');
  });

  it('a restart while loading, the load itself cut short (boot failed the version): the canary fails and nothing is routed or retired', async () => {
    const f = await fleet();
    await crashedCanary(f, { phase: 'loading' });
    await f.ports().workers.unload(M, 'v2');
    await f.ports().routes.publish({ model: M, weights: { v1: 1 }, stable: 'v1' });
    await f.ports().versions.transition(M, 'v2', 'failed', { failure: { code: 'interrupted', message: 'restarted' } }, { actor: 'controller' });
    const published = f.log.length;
    const after = await restarted(f);
    expect((await after.get(M)).phase).toBe('failed');
    // no route publish: the canary had no traffic to take back
    expect(f.log.slice(published)).toEqual(['unload llama/v2']);
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('failed');
  });

  it('a restart before the first stage of a canary of a loaded version: its traffic goes back to stable and the version stays loaded', async () => {
    const f = await fleet();
    await f.ports().versions.transition(M, 'v2', 'loading');
    await f.ports().versions.transition(M, 'v2', 'ready');
    // the crash came after the first stage's weights, before "progressing" was persisted
    await crashedCanary(f, { phase: 'pending' });
    expect(f.weights(M)).toEqual({ v1: 0.9, v2: 0.1 });
    const after = await restarted(f);
    expect((await after.get(M)).phase).toBe('failed');
    expect(f.weights(M)).toEqual({ v1: 1, v2: 0 });
    expect(f.log).not.toContain('unload llama/v2');
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('ready');
  });

  it("a canary whose load is refused because a deploy loads the version fails and leaves that deploy's version alone", async () => {
    const f = await fleet();
    const c = controller(f);
    const started = await c.start(M, { version: 'v2' }, OPS);
    // an operator's deploy took the version's load first
    await f.ports().versions.transition(M, 'v2', 'loading');
    await c.whenIdle();
    expect(await c.get(M, started.id)).toMatchObject({ phase: 'failed', message: expect.stringMatching(/^could not start the canary: /) as unknown });
    expect(f.log).not.toContain('unload llama/v2');
    expect((await f.ports().versions.get(M, 'v2')).status).toBe('loading');
  });

  it('refuses a second canary, an unknown model and bad stages with clear codes', async () => {
    const f = await fleet();
    const c = controller(f);
    await startCanary(f, c);
    await expect(c.start(M, { version: 'v2' }, OPS)).rejects.toMatchObject({ code: 'rollout_in_progress' });
    await expect(c.start('nope', { version: 'v2' }, OPS)).rejects.toMatchObject({ code: 'model_not_found' });
    await expect(c.start(M, { version: 'v2', stages: [50, 10] }, OPS)).rejects.toMatchObject({ code: 'invalid_stages' });
    await expect(c.get(M, 'canary-nope')).rejects.toMatchObject({ code: 'rollout_not_found' });
  });
});
