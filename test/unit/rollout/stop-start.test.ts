// Stop-start over the fake ports: hold, drain, unload the old version, load the new one on its GPUs,
// route and promote, release — and when the new one fails to come up, the old one back.
import { describe, expect, it } from 'vitest';
import { StopStart } from '../../../src/rollout/stop-start.js';
import { FakeFleet } from '../../helpers/fake-ports.js';

const M = 'llama';
const OPS = { name: 'ops' };

async function world(): Promise<{ f: FakeFleet; ss: StopStart }> {
  const f = await FakeFleet.create({ models: [{ name: M, versions: [{ id: 'v1' }, { id: 'v2' }, { id: 'v3' }], route: { weights: { v1: 1 } } }] });
  return { f, ss: new StopStart(f.ports()) };
}

const status = async (f: FakeFleet, id: string) => (await f.ports().versions.get(M, id)).status;

describe('StopStart (fake ports)', () => {
  it('holds new requests while the old version drains and unloads and the new one loads, then routes to it and releases', async () => {
    const { f, ss } = await world();
    f.log.length = 0;
    const progress: string[] = [];
    const r = await ss.run(M, 'v2', {}, OPS, (m) => progress.push(m));
    expect(f.log).toEqual([
      'hold llama',
      'drain llama/v1',
      'undrain llama/v1',
      'unload llama/v1',
      'load llama/v2',
      'publish llama v2=1',
      'release llama',
      'unload llama/v1',
    ]);
    expect(r).toMatchObject({ model: M, from: 'v1', to: 'v2', freed_gpus: 1, drain: { drained: 0, aborted: 0, elapsed_ms: 0 } });
    expect(r.downtime_ms).toBeGreaterThanOrEqual(r.load_ms);
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['retired', 'active']);
    expect(f.weights(M)).toEqual({ v2: 1 });
    expect(progress[0]).toBe('llama: new requests held; draining v1');
    expect(f.eventKinds('stop_start')).toHaveLength(1);
    expect(f.audit.at(-1)).toEqual({ actor: 'ops', action: 'stop_start', target: M, result: 'ok' });
  });

  it('a new version that fails to come up: the old one is loaded again and serves; the error says so; requests are released', async () => {
    const { f, ss } = await world();
    f.failLoad.set(`${M}/v2`, 'out of memory on GPU 0');
    f.log.length = 0;
    const err = await ss.run(M, 'v2', {}, OPS).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'stop_start_failed', status: 503 });
    expect((err as Error).message).toBe('stop-start of llama to v2 failed (out of memory on GPU 0); v1 was loaded again and serves as before');
    expect(f.log).toEqual(['hold llama', 'drain llama/v1', 'undrain llama/v1', 'unload llama/v1', 'load llama/v1', 'publish llama v1=1', 'release llama']);
    expect([await status(f, 'v1'), await status(f, 'v2')]).toEqual(['active', 'failed']);
    expect(f.audit.at(-1)).toEqual({ actor: 'ops', action: 'stop_start', target: M, result: 'error' });
  });

  it('neither comes up: released all the same, and the error says no version serves', async () => {
    const { f, ss } = await world();
    f.failLoad.set(`${M}/v2`, 'bad weights');
    f.failLoad.set(`${M}/v1`, 'GPU fell off the bus');
    f.log.length = 0;
    const err = await ss.run(M, 'v2', {}, OPS).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(
      /failed \(bad weights\) and v1 could not be put back either \(GPU fell off the bus\): the model has no version serving$/,
    );
    expect(f.log.at(-1)).toBe('release llama');
    expect(f.eventKinds('error')).toHaveLength(1);
  });

  it('a failure before anything stopped (the drain): the old version stays active and serving, its route untouched', async () => {
    const { f } = await world();
    const ports = f.ports();
    const failing = new StopStart({ ...ports, routes: { ...ports.routes, drain: () => Promise.reject(new Error('drain lost its way')) } });
    f.log.length = 0;
    const err = await failing.run(M, 'v2', {}, OPS).catch((e: unknown) => e);
    expect((err as Error).message).toBe('stop-start of llama to v2 failed (drain lost its way); v1 was never stopped and serves as before');
    expect(f.log).toEqual(['hold llama', 'undrain llama/v1', 'release llama']);
    expect(await status(f, 'v1')).toBe('active');
    expect(f.weights(M)).toEqual({ v1: 1 });
  });

  it('refuses a model with a rollout in progress (a canary owns its traffic)', async () => {
    const { f } = await world();
    const ports = f.ports();
    const busy = new StopStart({ ...ports, rollouts: { ...ports.rollouts, inProgress: () => Promise.resolve({ id: 'r1', kind: 'canary' }) } });
    await expect(busy.run(M, 'v2', {}, OPS)).rejects.toMatchObject({
      code: 'rollout_in_progress',
      message: expect.stringContaining('a canary in progress (r1)') as unknown,
    });
  });

  it('refuses what it cannot do, changing nothing', async () => {
    const { f, ss } = await world();
    await expect(ss.run(M, 'v1', {}, OPS)).rejects.toMatchObject({ code: 'already_active' });
    await f.ports().workers.load(await f.ports().versions.get(M, 'v3'), OPS);
    await expect(ss.run(M, 'v3', {}, OPS)).rejects.toMatchObject({ code: 'already_loaded', message: expect.stringContaining('swap it in') as unknown });
    await expect(ss.run(M, 'nope', {}, OPS)).rejects.toMatchObject({ code: 'version_not_found' });
    expect(f.log.filter((l) => l.startsWith('hold'))).toEqual([]);
    expect(await status(f, 'v1')).toBe('active');
  });
});
