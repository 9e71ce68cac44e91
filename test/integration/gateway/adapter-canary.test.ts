// An adapter canary's data path, against simulators: a candidate version of an adapter loaded beside
// the registered one under its own name (`sql--v2`), given a share of the adapter's requests by user
// (the same user always on the same side), its answers named as the client asked (`sql`) in whole
// answers and in every stream event, its records told apart by the name each side is served as; and
// unloading a version from every worker once its last request in flight has ended.
import { afterEach, describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { httpAdapterLoader } from '../../../src/providers/lora.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { chatReq, gatewayFixtures, httpCall, oneModel, openStream, post, sseData, until } from '../../helpers/gateway.js';

const { gateway } = gatewayFixtures();
const sims: SimHandle[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

const SQL = { name: 'sql', model: 'm', source: '/adapters/sql-v1', version: 'v1', servedAs: 'sql' };
const V2 = { name: 'sql', model: 'm', source: '/adapters/sql-v2?latency_multiplier=1.5', version: 'v2', servedAs: 'sql--v2' };

async function setup() {
  for (let i = 0; i < 2; i++) sims.push(await startSim({ model: 'm', version: 'v1', seed: i, interTokenMs: 2, jitter: 0, maxLoras: 4, loraLoadMs: 5 }));
  const gw = await gateway(oneModel(sims.map((s) => s.url)), {}, { picker: new RoundRobinPicker(), adapterLoader: httpAdapterLoader });
  gw.dp.addVersion('m', 'v1', gw.dp.pool('m', 'v1').cardChecksum, { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: 4 });
  gw.dp.setAdapters('m', [SQL]);
  const records: RequestRecord[] = [];
  gw.dp.telemetry.subscribe((r) => records.push(r));
  return { gw, records };
}

/** The adapters each simulator holds, by the names they were loaded under. */
async function held(): Promise<string[]> {
  const lists = await Promise.all(
    sims.map(async (s) =>
      ((await httpCall(s.url, '/v1/models')).json() as { data: { id: string; parent: string | null }[] }).data
        .filter((x) => x.parent !== null)
        .map((x) => x.id),
    ),
  );
  return [...new Set(lists.flat())].sort();
}

describe('adapter canary: the data path', () => {
  it('a share of the adapter’s requests goes to the candidate by user, answered under the name the client asked for', async () => {
    const { gw, records } = await setup();
    gw.dp.adapters.setCandidate('sql', { spec: V2, share: 0.5, salt: 'canary-1' });
    const side = new Map<string, string | undefined>();
    for (let i = 0; i < 40; i++) {
      const stream = i % 2 === 0;
      const r = await post(gw.url, chatReq({ model: 'sql', max_tokens: 4, user: `u${i % 20}`, stream }));
      expect(r.status).toBe(200);
      const rec = records.at(-1) as RequestRecord;
      expect(rec.adapter === 'sql' || rec.adapter === 'sql--v2').toBe(true);
      // the same user stays on the same side
      if (side.has(`u${i % 20}`)) expect(rec.adapter).toBe(side.get(`u${i % 20}`));
      side.set(`u${i % 20}`, rec.adapter);
      if (stream) for (const d of sseData(r.body).filter((x) => x !== '[DONE]')) expect((JSON.parse(d) as { model: string }).model).toBe('sql');
      else expect((r.json() as { model: string }).model).toBe('sql');
      expect(r.body).not.toContain('sql--v2');
    }
    const onCandidate = [...side.values()].filter((a) => a === 'sql--v2').length;
    expect(onCandidate).toBeGreaterThan(3);
    expect(onCandidate).toBeLessThan(17);
    // both versions are loaded beside each other, each under its own name
    expect(await held()).toEqual(['sql', 'sql--v2']);
    // the simulator's knob in the candidate's source: it is slower
    const mean = (a: string) => {
      const l = records.filter((r) => r.adapter === a && !r.stream).map((r) => r.latencyMs);
      return l.reduce((x, y) => x + y, 0) / l.length;
    };
    expect(mean('sql--v2')).toBeGreaterThan(mean('sql'));
    // share 0: every request to the registered version
    gw.dp.adapters.setCandidate('sql', undefined);
    for (let i = 0; i < 10; i++) await post(gw.url, chatReq({ model: 'sql', max_tokens: 2, user: `u${i}` }));
    expect(records.slice(-10).map((r) => r.adapter)).toEqual(Array(10).fill('sql'));
  });

  it('retiring a version unloads it from every worker once its streams in flight have ended; none is cut, no new request takes it', async () => {
    const { gw } = await setup();
    gw.dp.adapters.setCandidate('sql', { spec: V2, share: 1, salt: 'c' });
    const s = openStream(gw.url, chatReq({ model: 'sql', max_tokens: 40, stream: true }));
    await s.firstChunk;
    expect(await held()).toEqual(['sql--v2']);
    gw.dp.adapters.setCandidate('sql', undefined);
    let retired = false;
    const retire = gw.dp.retireAdapter('m', 'sql--v2', 60_000).then((r) => {
      retired = true;
      return r;
    });
    // meanwhile the adapter's requests go to the registered version
    expect((await post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }))).status).toBe(200);
    const body = (await s.done).toString();
    expect(body).toContain('data: [DONE]');
    expect(body).not.toContain('error');
    await until(() => retired, 'the retire');
    expect(await retire).toEqual({ unloaded: 1, failed: [], pending: [] });
    expect(await held()).toEqual(['sql']);
  });

  it('the wait is bounded: a worker still serving the version is named, and unloads it once its stream ends', async () => {
    const { gw } = await setup();
    gw.dp.adapters.setCandidate('sql', { spec: V2, share: 1, salt: 'c' });
    const s = openStream(gw.url, chatReq({ model: 'sql', max_tokens: 40, stream: true }));
    await s.firstChunk;
    gw.dp.adapters.setCandidate('sql', undefined);
    const r = await gw.dp.retireAdapter('m', 'sql--v2', 0);
    expect(r.unloaded).toBe(0);
    expect(r.pending).toHaveLength(1);
    expect((await s.done).toString()).toContain('data: [DONE]');
    await until(() => gw.dp.pool('m', 'v1').workers.every((w) => !w.adapters.has('sql--v2')), 'the unload after the stream');
    expect(await held()).toEqual([]);
  });

  it('a request held while a promotion happens is served by the version promoted, not the one retired (regression)', async () => {
    const { gw, records } = await setup();
    expect((await post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }))).status).toBe(200);
    gw.dp.hold('m');
    const p = post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }));
    await until(() => gw.dp.model('m').hold?.depth === 1, 'the request held');
    // the promotion: the registry serves sql--v2, sql retired
    gw.dp.setAdapters('m', [V2]);
    expect(await gw.dp.retireAdapter('m', 'sql', 60_000)).toEqual({ unloaded: 1, failed: [], pending: [] });
    gw.dp.release('m');
    const r = await p;
    expect(r.status).toBe(200);
    expect((r.json() as { model: string }).model).toBe('sql');
    expect(records.at(-1)?.adapter).toBe('sql--v2');
    expect(await held()).toEqual(['sql--v2']);
  });

  it('a candidate stream that breaks during its rollback is resumed on the version it began with, which that worker then unloads (regression)', async () => {
    for (const s of sims.splice(0)) await s.close();
    sims.push(await startSim({ model: 'm', version: 'v1', seed: 1, interTokenMs: 30, jitter: 0, maxLoras: 4, loraLoadMs: 5, faults: { crashAfterTokens: 5 } }));
    sims.push(await startSim({ model: 'm', version: 'v1', seed: 2, interTokenMs: 2, jitter: 0, maxLoras: 4, loraLoadMs: 5 }));
    const gw = await gateway(oneModel(sims.map((s) => s.url)), {}, { picker: new RoundRobinPicker(), adapterLoader: httpAdapterLoader });
    gw.dp.addVersion('m', 'v1', gw.dp.pool('m', 'v1').cardChecksum, { resume: 'continue_final_message', tokenIdPrompts: false, maxLoras: 4 });
    gw.dp.setAdapters('m', [SQL]);
    gw.dp.adapters.setCandidate('sql', { spec: V2, share: 1, salt: 'c' });
    const s = openStream(gw.url, chatReq({ model: 'sql', max_tokens: 30, stream: true }));
    await s.firstChunk;
    gw.dp.adapters.setCandidate('sql', undefined);
    const retired = gw.dp.retireAdapter('m', 'sql--v2', 60_000);
    const body = (await s.done).toString();
    expect(body).toContain('data: [DONE]');
    for (const d of sseData(body).filter((x) => x !== '[DONE]')) expect((JSON.parse(d) as { model?: string }).model).toBe('sql');
    await retired;
    await until(() => gw.dp.pool('m', 'v1').workers.every((w) => !w.adapters.has('sql--v2')), 'the resumed worker unloads it');
    expect(await held()).toEqual([]);
  });

  it('an engine that lost an adapter the gateway had loaded there (a 404 naming it) is not the client’s fault: forgotten there, retried, loaded again', async () => {
    const { gw, records } = await setup();
    expect((await post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }))).status).toBe(200);
    const w = gw.dp.pool('m', 'v1').workers.find((x) => x.adapters.has('sql'));
    const sim = sims.find((x) => x.url === w?.url) as SimHandle;
    // an operator unloads it behind the gateway's back
    expect((await httpCall(sim.url, '/v1/unload_lora_adapter', { lora_name: 'sql' })).status).toBe(200);
    const r = await post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }));
    expect(r.status).toBe(200);
    expect(records.at(-1)).toMatchObject({ status: 200, retries: 1, adapter: 'sql' });
    expect(w?.adapters.has('sql')).toBe(false);
  });

  it('a simulator refuses an unknown knob or a bad value in lora_path by name; the request is a retryable 503 that says so', async () => {
    const { gw } = await setup();
    const bad = await httpCall(sims[0]!.url, '/v1/load_lora_adapter', { lora_name: 'x', lora_path: '/a?hallucination_rate=2' });
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('hallucination_rate must be a number from 0 to 1, got \\"2\\"');
    gw.dp.adapters.setCandidate('sql', { spec: { ...V2, source: '/a?speed=3' }, share: 1, salt: 'c' });
    const r = await post(gw.url, chatReq({ model: 'sql', max_tokens: 2 }));
    expect(r.status).toBe(503);
    expect(r.body).toContain('unknown simulator knob');
  });
});
