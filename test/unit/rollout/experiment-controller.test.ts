// A/B experiments over the fake ports: the sticky split, samples from telemetry, analysis, and
// stopping (restore the route, or promote a winner); resumed after a restart.
import { describe, expect, it } from 'vitest';
import { ExperimentController } from '../../../src/rollout/experiment-controller.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const M = 'llama';
const OPS = { name: 'ops' };

async function world(): Promise<{ f: FakeFleet; exp: ExperimentController }> {
  const f = await FakeFleet.create({ models: [{ name: M, versions: [{ id: 'v1' }, { id: 'v2' }], route: { weights: { v1: 1 } } }] });
  const p = f.ports();
  await p.versions.transition(M, 'v2', 'loading');
  await p.versions.transition(M, 'v2', 'ready');
  const exp = new ExperimentController(p);
  exp.run();
  return { f, exp };
}

describe('ExperimentController (fake ports)', () => {
  it('splits sticky traffic, collects the metric per version, analyses, and restores the route at stop', async () => {
    const { f, exp } = await world();
    const s = await exp.create(M, { a: 'v1', b: 'v2', split: 0.3, metric: 'latency' }, OPS);
    expect(f.weights(M)).toEqual({ v2: 0.3, v1: 0.7 });
    expect(f.spec(M).stickySalt).toBe(`experiment:${s.id}`);
    // b is 40 % slower, clearly
    f.records(M, 'v1', 60, (i) => ({ latencyMs: 100 + (i % 20) }));
    f.records(M, 'v2', 60, (i) => ({ latencyMs: 140 + (i % 20) }));
    expect(exp.values(M).b).toHaveLength(60);
    const a = await exp.analyze(M);
    expect(a.result).toMatchObject({ status: 'analyzed', n_a: 60, n_b: 60, decision: 'a_better', significant: true });
    expect((await exp.get(M)).result?.decision).toBe('a_better');
    const stopped = await exp.stopExperiment(M, {}, OPS);
    expect(stopped).toMatchObject({ phase: 'stopped', stoppedReason: 'stopped; previous route restored' });
    expect(f.weights(M)).toEqual({ v1: 1 });
    await expect(exp.analyze(M)).rejects.toMatchObject({ code: 'no_experiment' });
    expect(await f.ports().rollouts.inProgress(M)).toBeUndefined();
  });

  it('stop with promote makes the winner active', async () => {
    const { f, exp } = await world();
    await exp.create(M, { a: 'v1', b: 'v2', metric: 'quality' }, OPS);
    await exp.stopExperiment(M, { promote: 'b' }, OPS);
    expect(f.weights(M)).toEqual({ v2: 1, v1: 0 });
    expect((await f.ports().versions.active(M))?.id).toBe('v2');
  });

  it('refuses a version that is not loaded, equal versions and a bad split', async () => {
    const f = await FakeFleet.create({ models: [{ name: M, versions: [{ id: 'v1' }, { id: 'v2' }], route: { weights: { v1: 1 } } }] });
    const exp = new ExperimentController(f.ports());
    await expect(exp.create(M, { a: 'v1', b: 'v2', metric: 'latency' }, OPS)).rejects.toMatchObject({ code: 'not_loaded' });
    await expect(exp.create(M, { a: 'v1', b: 'v1', metric: 'latency' }, OPS)).rejects.toMatchObject({ code: 'same_versions' });
    await expect(exp.create(M, { a: 'v1', b: 'v2', split: 1, metric: 'latency' }, OPS)).rejects.toMatchObject({ code: 'invalid_split' });
    expect(f.log).toEqual([]);
  });

  it('a restarted controller resumes a running experiment and can stop it', async () => {
    const { f, exp } = await world();
    const s = await exp.create(M, { a: 'v1', b: 'v2', metric: 'latency' }, OPS);
    exp.shutdown();
    const again = new ExperimentController(f.ports());
    const { rollouts } = await f.ports().rollouts.unfinished();
    again.recover(rollouts.flatMap((r) => (r.state.kind === 'experiment' ? [{ ...r, state: r.state }] : [])));
    again.run();
    expect((await again.get(M)).id).toBe(s.id);
    f.records(M, 'v2', 3);
    expect(again.values(M).b).toHaveLength(3);
    await again.stopExperiment(M, {}, OPS);
    expect(f.weights(M)).toEqual({ v1: 1 });
  });
});
