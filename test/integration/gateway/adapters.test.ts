// LoRA adapters at the gateway, against simulators (vLLM's load/unload endpoints, max_loras slots, a
// load time): a request naming an adapter goes to its model's workers and is loaded there on demand,
// once; a full worker evicts its least recently used adapter that no request uses; concurrent
// requests over more adapters than slots lose nothing to an eviction; /v1/models lists adapters; the
// prefetcher loads the most wanted ahead of their requests; random routing ignores where adapters are.
import { afterEach, describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { httpAdapterLoader } from '../../../src/providers/lora.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import type { GatewayConfig } from '../../../src/config/types.js';
import { chatReq, gatewayFixtures, httpCall, oneModel, post } from '../../helpers/gateway.js';

const { gateway } = gatewayFixtures();
const sims: SimHandle[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

async function setup(workers: number, slots: number, adapters: number, over: Partial<GatewayConfig> = {}, rand?: () => number) {
  for (let i = 0; i < workers; i++)
    sims.push(await startSim({ model: 'm', version: 'v1', seed: i, interTokenMs: 2, jitter: 0, maxLoras: slots, loraLoadMs: 20 }));
  const gw = await gateway(oneModel(sims.map((s) => s.url)), over, {
    picker: new RoundRobinPicker(),
    adapterLoader: httpAdapterLoader,
    ...(rand === undefined ? {} : { rand }),
  });
  gw.dp.addVersion('m', 'v1', gw.dp.pool('m', 'v1').cardChecksum, { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: slots });
  gw.dp.setAdapters(
    'm',
    Array.from({ length: adapters }, (_, i) => ({ name: `a${i}`, model: 'm', source: `/adapters/a${i}`, servedAs: `a${i}` })),
  );
  return gw;
}

/** The adapters each simulator holds, as it says in /v1/models. */
async function held(): Promise<string[][]> {
  return Promise.all(
    sims.map(async (s) => {
      const r = (await httpCall(s.url, '/v1/models')).json() as { data: { id: string; parent: string | null }[] };
      return r.data
        .filter((x) => x.parent !== null)
        .map((x) => x.id)
        .sort();
    }),
  );
}

const metric = async (url: string, name: string) =>
  (await httpCall(url, '/metrics')).body
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');

describe('LoRA adapters at the gateway', () => {
  it('a request naming an adapter is served by its model’s workers, loaded there once; /v1/models lists it with its parent', async () => {
    const gw = await setup(2, 2, 3);
    const first = await post(gw.url, chatReq({ model: 'a1', max_tokens: 4 }));
    expect(first.status).toBe(200);
    expect((first.json() as { model: string }).model).toBe('a1');
    // the second goes where a1 is (affinity), which already has it
    expect((await post(gw.url, chatReq({ model: 'a1', max_tokens: 4 }))).status).toBe(200);
    expect((await held()).flat()).toEqual(['a1']);
    const m = await metric(gw.url, 'glidepath_adapter_requests_total');
    expect(m).toMatch(/result="miss"} 1/);
    expect(m).toMatch(/result="hit"} 1/);
    const models = (await httpCall(gw.url, '/v1/models')).json() as { data: { id: string; parent: string | null }[] };
    expect(models.data.filter((x) => x.parent === 'm').map((x) => x.id)).toEqual(['a0', 'a1', 'a2']);
  });

  it('a full worker unloads its least recently used adapter that no request uses', async () => {
    const gw = await setup(1, 2, 3);
    for (const a of ['a0', 'a1', 'a0', 'a2']) expect((await post(gw.url, chatReq({ model: a, max_tokens: 2 }))).status).toBe(200);
    // a1 was used least recently when a2 came
    expect(await held()).toEqual([['a0', 'a2']]);
    expect(await metric(gw.url, 'glidepath_adapter_evictions_total')).toMatch(/} 1$/);
  });

  it('concurrent streams over more adapters than slots: every request served or refused with a retryable 503, none broken by an eviction', async () => {
    const gw = await setup(2, 2, 6);
    const results = await Promise.all(Array.from({ length: 48 }, (_, i) => post(gw.url, chatReq({ model: `a${i % 6}`, max_tokens: 12, stream: true }))));
    const broken = results.filter((r) => r.status === 200 && !r.body.includes('data: [DONE]'));
    const refused = results.filter((r) => r.status !== 200);
    expect(broken).toEqual([]);
    for (const r of refused) {
      expect(r.status).toBe(503);
      expect(r.headers['retry-after']).toBeDefined();
      expect((r.json() as { error: { code: string } }).error.code).toMatch(/^adapter_(slots_busy|load_failed)$/);
    }
    expect(results.length - refused.length).toBeGreaterThan(24);
    // no slot is left counted as in use
    const pool = gw.dp.pool('m', 'v1');
    expect(pool.workers.flatMap((w) => w.adapters.loaded().map((s) => s.inUse))).toEqual(pool.workers.flatMap((w) => w.adapters.loaded().map(() => 0)));
  });

  it('an unknown name is a 404 naming the models; a version without LoRA slots refuses an adapter with a 503 that says why', async () => {
    const gw = await setup(1, 2, 1);
    expect((await post(gw.url, chatReq({ model: 'nope' }))).status).toBe(404);
    gw.dp.addVersion('m', 'v1', gw.dp.pool('m', 'v1').cardChecksum, { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: 0 });
    const r = await post(gw.url, chatReq({ model: 'a0' }));
    expect(r.status).toBe(503);
    expect((r.json() as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'adapter_unsupported',
      message: expect.stringContaining('max_loras is 0') as string,
    });
  });

  it('the prefetcher loads the most wanted adapter onto more workers ahead of its requests: the next one is a hit (x-glidepath-adapter)', async () => {
    const gw = await setup(2, 4, 3);
    const first = await post(gw.url, chatReq({ model: 'a0', max_tokens: 2 }));
    expect(first.headers['x-glidepath-adapter']).toBe('miss');
    for (let i = 0; i < 4; i++) expect((await post(gw.url, chatReq({ model: 'a0', max_tokens: 2 }))).headers['x-glidepath-adapter']).toBe('hit');
    expect((await post(gw.url, chatReq({ model: 'a1', max_tokens: 2 }))).status).toBe(200);
    // a0 is 5/6 of the demand: on both workers; a1 is where its request loaded it
    const round = gw.dp.prefetcher.round(Date.now(), performance.now());
    expect(round.loads.map((l) => l.adapter)).toEqual(['a0']);
    await round.settled;
    expect((await held()).map((h) => h.includes('a0'))).toEqual([true, true]);
    expect(gw.dp.prefetcher.round(Date.now(), performance.now()).loads).toEqual([]);
    expect(await metric(gw.url, 'glidepath_adapter_loads_total')).toMatch(/outcome="loaded",trigger="prefetch"} 1/);
  });

  it('adapter_routing random: requests of one adapter go wherever the draw says, loading it on each worker', async () => {
    const draws = [0, 0.99, 0, 0.99];
    const gw = await setup(
      2,
      4,
      1,
      { adapterRouting: 'random', adapterPrefetch: { enabled: false, topK: 1, intervalMs: 1000, halfLifeMs: 1000 } },
      () => draws.shift() ?? 0,
    );
    const heads = [];
    for (let i = 0; i < 4; i++) heads.push((await post(gw.url, chatReq({ model: 'a0', max_tokens: 2 }))).headers['x-glidepath-adapter']);
    expect(heads).toEqual(['miss', 'miss', 'hit', 'hit']);
    expect(await held()).toEqual([['a0'], ['a0']]);
  });
});
