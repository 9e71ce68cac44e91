// The adapter canary's stage machine, in process: the real controller and the real sequential judge
// over the in-memory fake ports (fake-adapters.ts for the registry and the data plane's split), the
// loop driven by a fake clock. The end-to-end run (test/e2e/adapter-canary.test.ts) takes the same
// paths with a real gateway, simulated workers and the simulator's judge.
import { describe, expect, it } from 'vitest';
import { AdapterCanaryController } from '../../../src/rollout/adapter-canary.js';
import type { AdapterCanaryState } from '../../../src/rollout/adapter-canary-state.js';
import { CanaryController } from '../../../src/rollout/canary-controller.js';
import type { StoredRollout } from '../../../src/rollout/rollout-record.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import type { FakeFleet } from '../../helpers/fake-ports.js';
import { CANARY_MODEL, CANARY_STAGE_MS, canaryFleet } from '../../helpers/canary-fleet.js';

const M = CANARY_MODEL;
const OPS = { name: 'ops' };
const STAGE_MS = CANARY_STAGE_MS;
const TICK_MS = 1_000;

async function fleet(): Promise<FakeFleet> {
  const f = await canaryFleet();
  f.adapters.add({ name: 'sql', model: M, source: '/adapters/sql-v1', version: 'v1' });
  f.adapters.add({ name: 'chat-fr', model: M, source: '/adapters/fr' });
  return f;
}

function controller(f: FakeFleet): AdapterCanaryController {
  const c = new AdapterCanaryController(f.ports(), { tickMs: TICK_MS });
  c.run();
  return c;
}

async function advance(f: FakeFleet, c: AdapterCanaryController, ms: number): Promise<void> {
  await f.clock.advance(ms, () => c.whenIdle());
}

/** `n` requests of an adapter served as `servedAs`, on base version v1, with a deterministic spread of timings (× `slower`). */
function traffic(f: FakeFleet, servedAs: string | undefined, n: number, slower = 1, o: Partial<RequestRecord> = {}): void {
  f.records(M, 'v1', n, (i) => ({ adapter: servedAs, latencyMs: (100 + (i % 10)) * slower, ttftMs: (20 + (i % 5)) * slower, tpotMs: 5 + (i % 3), ...o }));
}

async function unfinished(f: FakeFleet): Promise<StoredRollout<AdapterCanaryState>[]> {
  const { rollouts, unreadable } = await f.ports().rollouts.unfinished();
  expect(unreadable).toEqual([]);
  return rollouts.flatMap((r) => (r.state.kind === 'adapter_canary' ? [{ ...r, state: r.state }] : []));
}

describe('adapter canary (fake clock, fake ports)', () => {
  it('an equal candidate gets 10 % then 50 % of the adapter’s requests and is promoted: the registry serves it, the old version is unloaded', async () => {
    const f = await fleet();
    const c = controller(f);
    const s = await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    expect(s).toMatchObject({ phase: 'progressing', stable: { servedAs: 'sql', version: 'v1' }, candidate: { servedAs: 'sql--v2', version: 'v2' } });
    expect(f.adapters.candidates.get('sql')).toMatchObject({ share: 0.1, spec: { name: 'sql', servedAs: 'sql--v2', source: '/adapters/sql-v2', model: M } });
    for (let stage = 0; stage < 2; stage++) {
      traffic(f, 'sql', 40);
      traffic(f, 'sql--v2', 40);
      // neither another adapter's requests nor the base model's own count
      traffic(f, 'chat-fr', 40, 5);
      traffic(f, undefined, 40, 5);
      await advance(f, c, STAGE_MS + TICK_MS);
    }
    const done = await c.get('sql');
    expect(done.phase).toBe('succeeded');
    expect(f.adapters.shares.map((x) => x.share)).toEqual([0.1, 0.5]);
    expect(f.adapters.get('sql')).toEqual({ name: 'sql', model: M, source: '/adapters/sql-v2', version: 'v2', servedAs: 'sql--v2' });
    expect(f.adapters.retired).toEqual([{ model: M, servedAs: 'sql' }]);
    expect(done.message).toBe('sql is v2 (served as sql--v2); sql unloaded from 2 worker(s)');
    expect(f.notified.map((n) => n.kind)).toContain('adapter_canary_succeeded');
    expect(await unfinished(f)).toEqual([]);
  });

  it('a slower candidate is rolled back at its first stage: all requests back to the registered version at once, the candidate unloaded', async () => {
    const f = await fleet();
    const c = controller(f);
    await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    expect(await f.metricsText()).toContain('glidepath_adapter_canary_running{model="llama",adapter="sql",canary="v2",phase="progressing"} 1');
    traffic(f, 'sql', 60);
    traffic(f, 'sql--v2', 60, 1.6);
    await advance(f, c, TICK_MS);
    const s = await c.get('sql');
    expect(s.phase).toBe('rolled_back');
    const metrics = await f.metricsText();
    expect(metrics).toContain('glidepath_adapter_canary_verdicts_total{model="llama",adapter="sql",outcome="fail",action="rollback"} 1');
    expect(metrics).toContain('glidepath_adapter_canary_percent{model="llama",adapter="sql"} 0');
    expect(metrics).not.toContain('glidepath_adapter_canary_running{');
    expect(s.rollback).toMatchObject({ percentAtRollback: 10, candidateRequests: 60, unloaded: 2, unloadFailed: [] });
    expect(s.rollback?.reason).toMatch(/latency|ttft/);
    expect(f.adapters.candidates.has('sql')).toBe(false);
    expect(f.adapters.shares.at(-1)).toEqual({ name: 'sql', share: undefined });
    expect(f.adapters.retired).toEqual([{ model: M, servedAs: 'sql--v2' }]);
    expect(f.adapters.get('sql')?.servedAs).toBe('sql');
  });

  it('the judge’s quality scores count for the side that answered: a candidate that answers worse is rolled back on quality', async () => {
    const f = await fleet();
    const c = controller(f);
    await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    traffic(f, 'sql', 40);
    traffic(f, 'sql--v2', 40);
    for (let i = 0; i < 60; i++) {
      c.quality(M, 'v1', 0.8 + (i % 5) * 0.02, 'sql');
      c.quality(M, 'v1', 0.45 + (i % 5) * 0.02, 'sql--v2');
      // a base-model answer (no adapter) and another adapter's say nothing about this one
      c.quality(M, 'v1', 0, undefined);
      c.quality(M, 'v1', 0, 'chat-fr');
    }
    await advance(f, c, TICK_MS);
    const s = await c.get('sql');
    expect(s.phase).toBe('rolled_back');
    expect(s.rollback?.reason).toMatch(/quality/);
    expect(s.last?.metrics.find((m) => m.name === 'quality')?.outcome).toBe('fail');
  });

  it('runs beside the base model’s own canary; a second canary of the same adapter is refused; bad starts are refused by name', async () => {
    const f = await fleet();
    const c = controller(f);
    const versions = new CanaryController(f.ports(), { tickMs: TICK_MS });
    await versions.start(M, { version: 'v2' }, OPS);
    await versions.whenIdle();
    const s = await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    const running = (await f.ports().rollouts.unfinished()).rollouts.map((r) => [r.state.kind, r.state.id]);
    expect(running).toHaveLength(2);
    expect(running).toContainEqual(['adapter_canary', s.id]);
    expect(running.map((r) => r[0])).toContain('canary');
    await expect(c.start('sql', { source: '/adapters/sql-v3', version: 'v3' }, OPS)).rejects.toMatchObject({ code: 'rollout_in_progress' });
    // another adapter's canary is its own
    await c.start('chat-fr', { source: '/adapters/fr-2', version: '2' }, OPS);
    await expect(c.start('nope', { source: '/a', version: '2' }, OPS)).rejects.toMatchObject({ code: 'adapter_not_found' });
    await expect(c.start('sql', { source: '/a', version: 'v 3' }, OPS)).rejects.toMatchObject({ code: 'invalid_body', message: /version: "v 3"/ });
    await expect(c.start('sql', { source: ' ', version: 'v3' }, OPS)).rejects.toMatchObject({ code: 'invalid_body', message: /^source/ });
    await expect(c.start('sql', { source: '/a', version: 'v3', stages: [50, 10] }, OPS)).rejects.toMatchObject({ code: 'invalid_stages' });
    const other = await fleet();
    const c2 = controller(other);
    await expect(c2.start('sql', { source: '/adapters/sql-v1b', version: 'v1' }, OPS)).rejects.toMatchObject({ code: 'canary_is_active' });
    await expect(c2.start('sql', { source: '/adapters/sql-v1', version: 'v9' }, OPS)).rejects.toMatchObject({ code: 'canary_is_active' });
    await expect(c2.promote('sql', OPS)).rejects.toMatchObject({ code: 'no_canary' });
  });

  it('a restarted control plane puts the candidate back at its stage’s share and goes on; pause, resume and abort by the operator', async () => {
    const f = await fleet();
    const c = controller(f);
    await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    traffic(f, 'sql', 40);
    traffic(f, 'sql--v2', 40);
    await advance(f, c, STAGE_MS + TICK_MS);
    expect((await c.get('sql')).stageIndex).toBe(1);
    c.shutdown();
    // the data plane of the new process starts without a candidate
    f.adapters.candidates.clear();
    const again = new AdapterCanaryController(f.ports(), { tickMs: TICK_MS });
    again.run();
    await again.recover(await unfinished(f));
    expect(f.adapters.candidates.get('sql')?.share).toBe(0.5);
    await again.pause('sql', OPS, 'looking at it');
    expect((await again.get('sql')).phase).toBe('paused');
    await again.resume('sql', OPS);
    // resumed: its stage counts as passed, the next is 100 %: promoted
    expect((await again.get('sql')).phase).toBe('succeeded');

    const g = await fleet();
    const d = controller(g);
    await d.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    g.adapters.failUnloadOn = 'llama/v1/0';
    const aborted = await d.abort('sql', OPS, 'wrong adapter');
    expect(aborted).toMatchObject({ phase: 'aborted', rollback: { reason: 'wrong adapter', unloaded: 1, unloadFailed: ['llama/v1/0: 500: engine error'] } });
  });

  it('a start queued behind a promotion reads the adapter as promoted (regression: its stable side was the retired version)', async () => {
    const f = await fleet();
    const c = controller(f);
    await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    const promoting = c.promote('sql', OPS);
    const next = c.start('sql', { source: '/adapters/sql-v3', version: 'v3' }, OPS);
    await promoting;
    const s = await next;
    expect(s.stable).toEqual({ source: '/adapters/sql-v2', version: 'v2', servedAs: 'sql--v2' });
    // the version the registry serves is never the one a rollback unloads
    await c.abort('sql', OPS);
    expect(f.adapters.retired).toEqual([
      { model: M, servedAs: 'sql' },
      { model: M, servedAs: 'sql--v3' },
    ]);
  });

  it('a candidate whose engine-side name is taken (an adapter, a model, a version served so) is refused', async () => {
    const f = await fleet();
    f.adapters.add({ name: 'other', model: M, source: '/o', servedAs: 'sql--v7' });
    const c = controller(f);
    await expect(c.start('sql', { source: '/adapters/sql-v7', version: 'v7' }, OPS)).rejects.toMatchObject({ code: 'adapter_name_taken', message: /sql--v7/ });
    expect(await unfinished(f)).toEqual([]);
  });

  it('after a restart, a canary whose adapter is gone, or whose model left the config, ends failed; the others resume and the process goes on', async () => {
    const f = await fleet();
    const c = controller(f);
    await c.start('sql', { source: '/adapters/sql-v2', version: 'v2' }, OPS);
    await c.start('chat-fr', { source: '/adapters/fr-2', version: '2' }, OPS);
    c.shutdown();
    f.adapters.registered.delete('chat-fr');
    f.adapters.candidates.clear();
    const stored = await unfinished(f);
    const again = controller(f);
    // a third, of a model the config no longer has
    const ghost = {
      ...(stored[0] as StoredRollout<AdapterCanaryState>),
      state: { ...(stored[0] as StoredRollout<AdapterCanaryState>).state, id: 'adapter-canary-ghost', model: 'gone', adapter: 'ghost' },
    };
    await f.ports().rollouts.create(ghost.state);
    await again.recover([...stored, { ...ghost, revision: 1 }]);
    expect((await again.get('sql')).phase).toBe('progressing');
    expect(f.adapters.candidates.get('sql')?.share).toBe(0.1);
    expect((await again.get('chat-fr')).phase).toBe('failed');
    expect((await f.ports().rollouts.get('adapter-canary-ghost'))?.state).toMatchObject({ phase: 'failed', message: /not resumed after a restart: .*gone/ });
  });
});
