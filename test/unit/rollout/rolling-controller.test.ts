// The rolling controller over the fake ports: budgets kept at every step, the route following ready
// capacity, pause and partition, failures by on_failure, abort, undo, and a restart mid-way that
// adopts the fleet and carries on without a duplicate worker.
import { describe, expect, it } from 'vitest';
import { BlueGreen } from '../../../src/rollout/bluegreen.js';
import { RollingController } from '../../../src/rollout/rolling-controller.js';
import type { RollingStartOptions } from '../../../src/rollout/rolling-controller.js';
import type { RollingState } from '../../../src/rollout/rolling-state.js';
import { ROLLING_TERMINAL } from '../../../src/rollout/rolling-state.js';
import { ratioKept } from '../../../src/rollout/rolling-plan.js';
import { FakeFleet } from '../../helpers/fake-ports.js';
import { ConflictError } from '../../../src/errors.js';

const M = 'llama';
const OPS = { name: 'ops' };

async function world(
  opts: { replicas?: number; roles?: { prefill: number; decode: number }; health?: boolean; gpus?: number; rolling?: Record<string, unknown> } = {},
): Promise<{ f: FakeFleet; rc: RollingController }> {
  const replicas = opts.replicas ?? 4;
  const version = (id: string) => ({ id, provider: { kind: 'sim' }, ...(opts.roles ? { roles: opts.roles } : { replicas }) });
  const f = await FakeFleet.create({
    gpus: opts.gpus ?? 16,
    models: [
      {
        name: M,
        versions: [version('v1'), version('v2'), { id: 'v3', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } }],
        route: { weights: { v1: 1 } },
        health: { enabled: opts.health ?? false },
        ...(opts.rolling ? { rolling: opts.rolling } : {}),
      },
    ],
  });
  return { f, rc: new RollingController(f.ports(), { tickMs: 1_000 }) };
}

/** What serves now: old workers still taking traffic and new ones ready (after the step's stops and starts settled). */
function fleet(f: FakeFleet, from = 'v1', to = 'v2'): { old: number; ready: number; total: number } {
  const old = f.live(M, from).filter((w) => w.weight > 0).length;
  const ready = f.live(M, to).filter((w) => w.health === undefined || w.health.state === 'healthy').length;
  return { old, ready, total: f.live(M, from).length + f.live(M, to).length };
}

/** `n` ticks, each with the starts and stops it began settled. */
async function steps(rc: RollingController, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await rc.tick();
    await rc.whenIdle();
  }
}

/** Let promises already settled run on (a start refused, a log written) without waiting for a drain or a start held open. */
function settle(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** Tick until the update ends or pauses, checking `each` after every settled step. */
async function drive(f: FakeFleet, rc: RollingController, each: () => void = () => undefined, limit = 50): Promise<RollingState> {
  for (let i = 0; i < limit; i++) {
    await steps(rc, 1);
    each();
    const s = await rc.get(M);
    if (ROLLING_TERMINAL.includes(s.phase) || s.phase === 'paused') return s;
    f.clock.t += 1_000;
  }
  throw new Error('the update did not end');
}

/** v1 → v2 aborted while step 2's new worker is still loading; `loaded` lets that start finish. */
async function abortMidStart(f: FakeFleet, rc: RollingController): Promise<{ loaded: () => void; aborted: RollingState }> {
  await rc.start(M, { to: 'v2' }, OPS);
  await steps(rc, 1);
  let loaded = (): void => undefined;
  f.startGate = new Promise<void>((r) => (loaded = r));
  f.clock.t += 1_000;
  await rc.tick();
  await settle();
  f.startGate = undefined;
  return { loaded, aborted: await rc.abort(M, OPS) };
}

/** abortMidStart, then `fail` set up before that start ends (it is no longer wanted and is stopped): the update's error events. */
async function unwantedStartErrors(f: FakeFleet, rc: RollingController, fail: () => void): Promise<(string | undefined)[]> {
  const { loaded, aborted } = await abortMidStart(f, rc);
  fail();
  loaded();
  await rc.whenIdle();
  return (await f.ports().rollouts.events(aborted.id)).filter((e) => e.kind === 'error').map((e) => e.message);
}

const status = async (f: FakeFleet, id: string) => (await f.ports().versions.get(M, id)).status;

describe('RollingController (fake ports)', () => {
  it('surge 1, unavailable 0: one new worker at a time, capacity never below 4, the route at ready capacity, then v2 alone and active', async () => {
    const { f, rc } = await world();
    const start: RollingStartOptions = { to: 'v2' };
    await rc.start(M, start, OPS);
    expect(await status(f, 'v2')).toBe('loading');
    const shares: number[] = [];
    const s = await drive(f, rc, () => {
      const n = fleet(f);
      expect(n.old + n.ready).toBeGreaterThanOrEqual(4);
      expect(n.total).toBeLessThanOrEqual(5);
      const w = f.weights(M);
      shares.push(w.v2 ?? 0);
      // the route follows ready capacity: v2's share is its ready workers over both pools' serving ones
      if (n.old > 0) expect(w.v2 ?? 0).toBeCloseTo(n.ready / (n.old + n.ready), 9);
    });
    expect(s.phase).toBe('succeeded');
    expect(shares).toEqual([...shares].sort((a, b) => a - b));
    expect(f.weights(M)).toEqual({ v2: 1 });
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['retired', 'active']);
    expect(f.live(M, 'v1')).toHaveLength(0);
    expect(f.live(M, 'v2')).toHaveLength(4);
    expect(s.trace.map((t) => t.roles.aggregated?.old)).toEqual([4, 3, 2, 1, 0]);
    // each old worker was taken out of the route, drained, then stopped
    const stops = f.log.filter((x) => /^(weight|drain|stop) llama\/v1/.test(x));
    // a planned removal: streams past the drain go on on another worker of v1 (gateway resume)
    expect(stops.slice(0, 3)).toEqual(['weight llama/v1/3=0', 'drain llama/v1/3 wait (removed)', 'stop llama/v1/3']);
    expect(f.ports().workers.claimedBy(M, 'v1')).toBeUndefined();
    expect(f.audit.find((a) => a.action === 'rolling_start')).toMatchObject({ actor: 'ops', result: 'ok' });
  });

  it('surge 0, unavailable 1 (no spare GPU): an old worker goes before each new one starts, never more than 4 workers', async () => {
    const { f, rc } = await world({ gpus: 4 });
    await rc.start(M, { to: 'v2', maxSurge: 0, maxUnavailable: 1 }, OPS);
    const s = await drive(f, rc, () => {
      const n = fleet(f);
      expect(n.old + n.ready).toBeGreaterThanOrEqual(3);
      expect(n.total).toBeLessThanOrEqual(4);
    });
    expect(s.phase).toBe('succeeded');
    expect(f.live(M, 'v2')).toHaveLength(4);
  });

  it('--partition 2 stops with two old workers serving beside the new ones; a resume with partition 0 finishes', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2', partition: 2 }, OPS);
    let s = await drive(f, rc);
    expect(s.phase).toBe('paused');
    expect(s.pausedReason).toMatch(/partition: 2 old worker\(s\) left/);
    expect(fleet(f)).toMatchObject({ old: 2, ready: 2 });
    expect(f.weights(M)).toEqual({ v1: 0.5, v2: 0.5 });
    await rc.resume(M, OPS, { partition: 0 });
    s = await drive(f, rc);
    expect(s.phase).toBe('succeeded');
  });

  it('a pause holds every worker where it is; resume carries on', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    await rc.pause(M, OPS);
    const before = f.log.length;
    for (let i = 0; i < 3; i++) {
      f.clock.t += 1_000;
      await rc.tick();
      await rc.whenIdle();
    }
    expect(f.log.slice(before).filter((x) => x.startsWith('start') || x.startsWith('stop'))).toEqual([]);
    await expect(rc.pause(M, OPS)).rejects.toMatchObject({ code: 'already_paused' });
    await rc.resume(M, OPS);
    expect((await drive(f, rc)).phase).toBe('succeeded');
  });

  it('a new worker that fails to start pauses the update (on_failure pause): traffic stays on v1, the failure recorded', async () => {
    const { f, rc } = await world();
    f.failStarts.push('CUDA out of memory');
    await rc.start(M, { to: 'v2' }, OPS);
    const s = await drive(f, rc);
    expect(s.phase).toBe('paused');
    expect(s.failures[0]?.reason).toMatch(/starting a new worker of v2 failed: CUDA out of memory/);
    expect(f.weights(M)).toEqual({ v1: 1 });
    expect(f.live(M, 'v1')).toHaveLength(4);
    expect(f.notified.map((n) => n.kind)).toContain('rolling_failure');
  });

  it('a start refused for want of a GPU while an old worker drains (it holds its GPU until stopped) waits for it as the same step: no step more, no failure', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    // the next step stops an old worker, whose drain lasts, and starts a new one at once: no GPU free yet
    let drained = (): void => undefined;
    f.drainGate = new Promise<void>((r) => (drained = r));
    f.failStarts.push(new ConflictError('insufficient_gpus', 'llama/v2 needs 1 GPU(s) but only 0 suitable of 0 free (16 total)'));
    f.clock.t += 1_000;
    await rc.tick();
    await settle();
    const step = (await rc.get(M)).step;
    const starts = () => f.log.filter((x) => x.startsWith('start llama/v2')).length;
    const startsBefore = starts();
    // ticks while the drain lasts: the refused start is still the step's, counted as starting; nothing more is started
    for (let i = 0; i < 3; i++) {
      f.clock.t += 1_000;
      await rc.tick();
      await settle();
      expect((await rc.get(M)).step).toBe(step);
      expect(rc.liveCounts(M)?.roles.aggregated).toEqual({ old: 3, ready: 1, starting: 1 });
    }
    expect(starts()).toBe(startsBefore);
    // the drain ends and its worker stops: the start is made again, within the same step
    drained();
    f.drainGate = undefined;
    await rc.whenIdle();
    await steps(rc, 1);
    expect(starts()).toBe(startsBefore + 1);
    expect((await rc.get(M)).step).toBe(step);
    const s = await drive(f, rc);
    expect(s.phase).toBe('succeeded');
    expect(s.failures).toEqual([]);
    expect(s.trace.map((t) => t.roles.aggregated?.old)).toEqual([4, 3, 2, 1, 0]);
    expect(f.failStarts).toEqual([]);
  });

  it('going back, a start refused for want of a GPU an abandoned start still holds waits for that start to end: the abort ends, not paused', async () => {
    const { f, rc } = await world();
    const { loaded } = await abortMidStart(f, rc);
    // going back, v1's start finds the GPU the abandoned start holds
    f.failStarts.push(new ConflictError('insufficient_gpus', 'llama/v1 needs 1 GPU(s) but only 0 suitable of 0 free (16 total)'));
    f.clock.t += 1_000;
    await rc.tick();
    await settle();
    expect((await rc.get(M)).phase).toBe('rolling_back');
    // the abandoned start ends (its worker stopped at once): v1's start is made again
    loaded();
    const s = await drive(f, rc);
    expect(s.phase).toBe('aborted');
    expect(s.failures).toEqual([]);
    expect(f.live(M, 'v1')).toHaveLength(4);
    expect(f.live(M, 'v2')).toHaveLength(0);
  });

  it('going back, a start no longer wanted whose stop fails is an error event, not a failed start; the worker is stopped later as an old one', async () => {
    const { f, rc } = await world();
    expect(await unwantedStartErrors(f, rc, () => f.failStops.push('the provider did not answer'))).toEqual([
      'stopping llama/v2/1 failed: the provider did not answer',
    ]);
    expect(f.live(M, 'v2').map((w) => w.id)).toContain('llama/v2/1');
    const s = await drive(f, rc);
    expect(s.phase).toBe('aborted');
    expect(s.failures).toEqual([]);
    expect(f.live(M, 'v2')).toHaveLength(0);
    expect(f.live(M, 'v1')).toHaveLength(4);
  });

  it('a start no longer wanted is stopped even when its weight cannot be set (the data plane no longer lists it): an error event, no worker left', async () => {
    const { f, rc } = await world();
    expect(await unwantedStartErrors(f, rc, () => f.failWeights.push('no worker llama/v2/1 in the data plane'))).toEqual([
      'draining llama/v2/1 failed (stopped all the same): no worker llama/v2/1 in the data plane',
    ]);
    expect(f.live(M, 'v2').map((w) => w.id)).not.toContain('llama/v2/1');
  });

  it('a start still under way when the controller shuts down (leadership lost) is stopped once it exists, not left running', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    let loaded = (): void => undefined;
    f.startGate = new Promise<void>((r) => (loaded = r));
    await rc.tick();
    await settle();
    rc.shutdown();
    loaded();
    await rc.whenIdle();
    expect(f.log.filter((x) => /^(start|stop) llama\/v2/.test(x))).toEqual(['start llama/v2/0 serving', 'stop llama/v2/0']);
    expect(f.live(M, 'v2')).toHaveLength(0);
  });

  it('a write the store refuses changes nothing in memory: the step is taken again under its number, the end is made again, the update ends', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    // a step whose write fails is not taken (nothing started or stopped) and keeps no number
    const before = await rc.get(M);
    f.failSaves = 1;
    f.clock.t += 1_000;
    await steps(rc, 1);
    expect((await rc.get(M)).step).toBe(before.step);
    expect((await rc.get(M)).trace).toHaveLength(before.trace.length);
    expect(f.events.some((e) => e.kind === 'rolling_error' && /store_unavailable|deadline exceeded/.test(e.message))).toBe(true);
    // a pause whose write fails is refused, and the update is not paused
    f.failSaves = 1;
    await expect(rc.pause(M, OPS)).rejects.toMatchObject({ code: 'store_unavailable' });
    expect((await rc.get(M)).phase).toBe('progressing');
    // on to the last old worker's stop; the end's write then fails once: still running, then ended by the next tick
    for (let i = 0; i < 20 && f.live(M, 'v1').length > 0; i++) {
      f.clock.t += 1_000;
      await steps(rc, 1);
    }
    f.failSaves = 1;
    f.clock.t += 1_000;
    await steps(rc, 1);
    expect((await rc.get(M)).phase).toBe('progressing');
    const s = await drive(f, rc);
    expect(s.phase).toBe('succeeded');
    expect(s.trace.map((t) => t.step)).toEqual(s.trace.map((_, i) => i + 1));
    expect(rc.liveCounts(M)).toBeUndefined();
    expect(f.ports().workers.claimedBy(M, 'v2')).toBeUndefined();
    expect(f.weights(M)).toEqual({ v2: 1 });
    // and the model takes a new update
    await expect(rc.undo(M, OPS)).resolves.toMatchObject({ from: 'v2', to: 'v1' });
  });

  it('a start refused for want of a GPU with no old worker draining is a failure: the update pauses', async () => {
    const { f, rc } = await world();
    f.failStarts.push(new ConflictError('insufficient_gpus', 'needs 1 GPU(s) but only 0 suitable of 0 free'));
    await rc.start(M, { to: 'v2' }, OPS);
    const s = await drive(f, rc);
    expect(s.phase).toBe('paused');
    expect(s.failures[0]?.reason).toMatch(/starting a new worker of v2 failed: needs 1 GPU/);
  });

  it('on_failure rollback: the update goes back with the same budgets, v2 ends retired and v1 serves alone', async () => {
    const { f, rc } = await world({ rolling: { on_failure: 'rollback' } });
    await rc.start(M, { to: 'v2' }, OPS);
    // two steps forward, then every start fails
    await steps(rc, 2);
    f.failStarts.push('bad weights');
    const s = await drive(f, rc, () => {
      const n = fleet(f);
      expect(n.old + n.ready).toBeGreaterThanOrEqual(4);
    });
    expect(s.phase).toBe('rolled_back');
    expect(s.rollbackReason).toMatch(/bad weights/);
    expect(f.weights(M)).toEqual({ v1: 1 });
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['active', 'retired']);
    expect(f.live(M, 'v1')).toHaveLength(4);
    expect(f.live(M, 'v2')).toHaveLength(0);
  });

  it('abort mid-way rolls back to the old pool within the same budgets', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 3);
    expect(fleet(f).ready).toBeGreaterThan(0);
    await rc.abort(M, OPS);
    await expect(rc.abort(M, OPS)).rejects.toMatchObject({ code: 'already_rolling_back' });
    const s = await drive(f, rc, () => {
      const n = fleet(f, 'v2', 'v1');
      // going back: v2 is the pool that leaves, v1 the one that grows
      expect(n.old + n.ready).toBeGreaterThanOrEqual(4);
      expect(n.total).toBeLessThanOrEqual(5);
    });
    expect(s.phase).toBe('aborted');
    expect(s.trace.some((t) => t.direction === 'back')).toBe(true);
    expect(f.weights(M)).toEqual({ v1: 1 });
  });

  it('a new worker not ready within the step timeout fails the update; it is stopped', async () => {
    const { f, rc } = await world({ health: true });
    await rc.start(M, { to: 'v2', stepTimeoutMs: 5_000 }, OPS);
    await steps(rc, 1);
    const [w] = f.live(M, 'v2');
    expect(w?.health?.state).toBe('pending');
    expect(f.weights(M)).toEqual({ v1: 1 });
    f.clock.t += 6_000;
    const s = await drive(f, rc);
    expect(s.phase).toBe('paused');
    expect(s.failures[0]?.reason).toBe(`new worker ${w?.id} was not ready within the step timeout (5 s)`);
    expect(w?.alive).toBe(false);
  });

  it('a worker admitted by health is ready: the route gives it its share only then', async () => {
    const { f, rc } = await world({ health: true });
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    const [w] = f.live(M, 'v2');
    if (!w?.health) throw new Error('no new worker');
    await rc.tick();
    expect(f.weights(M)).toEqual({ v1: 1 });
    await f.ports().workers.saveHealth(w.info(), { ...w.health, state: 'healthy' });
    await steps(rc, 1);
    expect(f.weights(M).v2).toBeCloseTo(1 / 4, 9);
  });

  it('going back, new workers still waiting for admission leave before admitted ones: serving capacity stays within the budget', async () => {
    const { f, rc } = await world({ health: true, rolling: { max_surge: 2 } });
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    // v2/0 never admitted, v2/1 admitted: the next step stops one v1 and starts v2/2
    const admit = async (id: string) => {
      const w = f.workers.get(id);
      if (!w?.health) throw new Error(`no worker ${id}`);
      await f.ports().workers.saveHealth(w.info(), { ...w.health, state: 'healthy' });
    };
    await admit('llama/v2/1');
    f.clock.t += 1_000;
    await steps(rc, 1);
    expect(f.live(M, 'v2').map((w) => w.id)).toEqual(['llama/v2/0', 'llama/v2/1', 'llama/v2/2']);
    await rc.abort(M, OPS);
    const ready = (v: string) => f.live(M, v).filter((w) => w.health === undefined || w.health.state === 'healthy');
    for (let i = 0; i < 20 && (await rc.get(M)).phase !== 'aborted'; i++) {
      f.clock.t += 1_000;
      await steps(rc, 1);
      expect(ready('v1').length + ready('v2').length).toBeGreaterThanOrEqual(4);
      for (const w of f.live(M, 'v1')) if (w.health?.state === 'pending') await admit(w.id);
    }
    expect((await rc.get(M)).phase).toBe('aborted');
    expect(ready('v1')).toHaveLength(4);
  });

  it('a restart mid-way adopts the fleet and carries on from the store: no duplicate worker, none lost', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 3);
    const before = fleet(f);
    rc.shutdown();
    // a new process: new ports, the same persisted world
    const ports = f.ports();
    const again = new RollingController(ports, { tickMs: 1_000 });
    const { rollouts } = await ports.rollouts.unfinished();
    await again.recover(rollouts.map((r) => ({ ...r, state: r.state as RollingState })));
    expect(ports.workers.claimedBy(M, 'v1')).toBe(rollouts[0]?.state.id);
    expect(fleet(f)).toEqual(before);
    const s = await drive(f, again, () => {
      const n = fleet(f);
      expect(n.old + n.ready).toBeGreaterThanOrEqual(4);
      expect(n.total).toBeLessThanOrEqual(5);
    });
    expect(s.phase).toBe('succeeded');
    expect(f.live(M, 'v2')).toHaveLength(4);
    expect((await ports.rollouts.events(s.id)).map((e) => e.kind)).toContain('resumed');
  });

  it('undo rolls a finished update back to the version it replaced', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2', maxSurge: '50%' }, OPS);
    expect((await drive(f, rc)).phase).toBe('succeeded');
    const u = await rc.undo(M, OPS);
    expect(u).toMatchObject({ from: 'v2', to: 'v1', maxSurge: { percent: 50 } });
    expect((await drive(f, rc)).phase).toBe('succeeded');
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['active', 'retired']);
    await rc.start(M, { to: 'v2' }, OPS);
    await expect(rc.undo(M, OPS)).rejects.toMatchObject({ code: 'rollout_in_progress' });
  });

  it('4 prefill + 2 decode: each role within its budgets, both pools within one worker of the ratio, no pool serving without a role', async () => {
    const { f, rc } = await world({ roles: { prefill: 4, decode: 2 } });
    await rc.start(M, { to: 'v2' }, OPS);
    const desired = { prefill: 4, decode: 2 };
    const byRole = (version: string, ready: boolean) => {
      const c: Record<string, number> = { prefill: 0, decode: 0 };
      for (const w of f.live(M, version)) if (!ready || w.weight > 0) c[w.kvRole ?? '?'] = (c[w.kvRole ?? '?'] ?? 0) + 1;
      return c;
    };
    const s = await drive(f, rc, () => {
      const old = byRole('v1', true);
      const neu = byRole('v2', true);
      for (const r of ['prefill', 'decode'] as const) {
        const d = desired[r];
        expect((old[r] ?? 0) + (neu[r] ?? 0), `${r} serving`).toBeGreaterThanOrEqual(d);
        expect(f.live(M, 'v1').filter((w) => w.kvRole === r).length + f.live(M, 'v2').filter((w) => w.kvRole === r).length, `${r} workers`).toBeLessThanOrEqual(
          d + 1,
        );
      }
      for (const pool of [old, neu]) {
        expect(ratioKept(pool, desired)).toBe(true);
        // a pool that takes traffic has both roles
        const w = f.weights(M);
        if (pool === old && (w.v1 ?? 0) > 0) expect(Math.min(pool.prefill ?? 0, pool.decode ?? 0)).toBeGreaterThan(0);
        if (pool === neu && (w.v2 ?? 0) > 0) expect(Math.min(pool.prefill ?? 0, pool.decode ?? 0)).toBeGreaterThan(0);
      }
    });
    expect(s.phase).toBe('succeeded');
    expect(byRole('v2', false)).toEqual({ prefill: 4, decode: 2 });
    expect(f.log.filter((x) => x.startsWith('start llama/v2'))).toHaveLength(6);
  });

  it('refuses to roll between an aggregated and a disaggregated version', async () => {
    const f = await FakeFleet.create({
      models: [
        {
          name: M,
          versions: [
            { id: 'v1', provider: { kind: 'sim' }, replicas: 4 },
            { id: 'v2', provider: { kind: 'sim' }, roles: { prefill: 2, decode: 2 } },
          ],
          route: { weights: { v1: 1 } },
          health: { enabled: false },
        },
      ],
    });
    const rc = new RollingController(f.ports(), { tickMs: 1_000 });
    await expect(rc.start(M, { to: 'v2' }, OPS)).rejects.toThrow(
      /v1 runs aggregated workers and v2 runs decode and prefill workers: a rolling update replaces workers role by role/,
    );
  });

  it('restart in place: every serving worker replaced by a fresh one of the same version, capacity kept, the route untouched', async () => {
    const { f, rc } = await world();
    const before = f.live(M, 'v1').map((w) => w.id);
    await rc.restart(M, {}, OPS);
    expect(await status(f, 'v1')).toBe('active');
    const s = await drive(f, rc, () => {
      const live = f.live(M, 'v1');
      expect(live.filter((w) => w.weight > 0).length).toBeGreaterThanOrEqual(4);
      expect(live.length).toBeLessThanOrEqual(5);
      expect(f.weights(M)).toEqual({ v1: 1 });
    });
    expect(s).toMatchObject({ phase: 'succeeded', from: 'v1', to: 'v1', inPlace: { oldWorkers: before } });
    const after = f.live(M, 'v1').map((w) => w.id);
    expect(after).toHaveLength(4);
    expect(after.filter((id) => before.includes(id))).toEqual([]);
    expect(await status(f, 'v1')).toBe('active');
    expect(f.log.filter((x) => x.startsWith('publish'))).toEqual([]);
    await expect(rc.undo(M, OPS)).rejects.toThrow(/was a restart in place/);
  });

  it('a restart in place stopped half-way ends there: fresh and old workers of the one version serve side by side', async () => {
    const { f, rc } = await world();
    await rc.restart(M, {}, OPS);
    await steps(rc, 3);
    const s = await rc.abort(M, OPS);
    expect(s.phase).toBe('aborted');
    expect(f.live(M, 'v1').filter((w) => w.weight > 0).length).toBeGreaterThanOrEqual(4);
    await expect(rc.restart(M, {}, OPS)).resolves.toMatchObject({ phase: 'progressing' });
  });

  it('a finish cut short by a restart (the registry already switched) is done again, not stuck on an illegal transition', async () => {
    const { f, rc } = await world();
    await rc.start(M, { to: 'v2' }, OPS);
    const done = await drive(f, rc);
    expect(done.phase).toBe('succeeded');
    // as if the process died after the registry's switch but before the end was persisted
    const ports = f.ports();
    const stored = await ports.rollouts.get(done.id);
    if (!stored) throw new Error('no record');
    await ports.rollouts.save({ ...(stored.state as RollingState), phase: 'progressing', finishedAt: undefined }, stored.revision);
    const again = new RollingController(ports, { tickMs: 1_000 });
    await again.recover((await ports.rollouts.unfinished()).rollouts.map((r) => ({ ...r, state: r.state as RollingState })));
    const s = await drive(f, again);
    expect(s.phase).toBe('succeeded');
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['retired', 'active']);
    expect(f.events.filter((e) => e.kind === 'rolling_error')).toEqual([]);
  });

  it('hot spares of the version going back are not counted as its replicas: an abort ends', async () => {
    const f = await FakeFleet.create({
      gpus: 16,
      models: [
        {
          name: M,
          versions: [
            { id: 'v1', provider: { kind: 'sim' }, replicas: 4, spares: 1 },
            { id: 'v2', provider: { kind: 'sim' }, replicas: 4 },
          ],
          route: { weights: { v1: 1 } },
          health: { enabled: false },
        },
      ],
    });
    const rc = new RollingController(f.ports(), { tickMs: 1_000 });
    await rc.start(M, { to: 'v2' }, OPS);
    await steps(rc, 1);
    await rc.abort(M, OPS);
    const s = await drive(f, rc);
    expect(s.phase).toBe('aborted');
    expect(f.live(M, 'v1').filter((w) => w.role === 'serving')).toHaveLength(4);
    expect(f.live(M, 'v2')).toHaveLength(0);
  });

  it('refuses what cannot work, naming it, before anything starts', async () => {
    const { f, rc } = await world();
    await expect(rc.start(M, { to: 'v2', maxSurge: 0, maxUnavailable: 0 }, OPS)).rejects.toMatchObject({ code: 'invalid_rollout' });
    await expect(rc.start(M, { to: 'v2', maxSurge: 'lots' }, OPS)).rejects.toThrow(/max surge: expected a count of workers/);
    await expect(rc.start(M, { to: 'v1' }, OPS)).rejects.toMatchObject({ code: 'already_active' });
    await expect(rc.start(M, { to: 'v3' }, OPS)).rejects.toThrow(/static endpoints/);
    await expect(rc.start(M, { to: 'v2', stepTimeoutMs: 0 }, OPS)).rejects.toThrow(/step timeout: expected milliseconds/);
    await expect(rc.start(M, { to: 'v2', partition: 4 }, OPS)).rejects.toThrow(/partition 4: it must keep fewer old workers than the 4 the version runs/);
    await expect(rc.start(M, { to: 'nope' }, OPS)).rejects.toMatchObject({ code: 'version_not_found' });
    await expect(rc.resume(M, OPS)).rejects.toMatchObject({ code: 'no_rolling_update' });
    expect(await status(f, 'v2')).toBe('registered');
    await rc.start(M, { to: 'v2' }, OPS);
    await expect(rc.start(M, { to: 'v2' }, OPS)).rejects.toMatchObject({ code: 'rollout_in_progress' });
    // a swap or instant rollback would fight the update's route
    await expect(new BlueGreen(f.ports()).rollback(M, OPS)).rejects.toMatchObject({ code: 'rollout_in_progress' });
  });

  it('the progress deadline fails an update that stopped moving', async () => {
    const { f, rc } = await world({ health: true });
    await rc.start(M, { to: 'v2', stepTimeoutMs: 60_000, progressDeadlineMs: 30_000 }, OPS);
    await steps(rc, 1);
    f.clock.t += 31_000;
    const s = await drive(f, rc);
    expect(s.phase).toBe('paused');
    expect(s.deadlineExceededAt).toBeDefined();
    expect(s.pausedReason).toMatch(/progress deadline exceeded/);
  });
});
