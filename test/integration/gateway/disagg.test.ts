// Disaggregated serving through the gateway: each request is prefilled on a prefill worker of its
// version's pool and decoded on a decode worker of the same pool (never across pools), with the
// answer a whole request gives; a prefill worker that fails is replaced by another; no prefill
// worker, or a prefill worker refusing the request, is a clear answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import { httpCall, sseData, startGateway } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

const MODEL = 'pd';
const sims: SimHandle[] = [];
let whole: SimHandle;
let prefill1: SimHandle;
let gw: Gateway;

const sim = async (o: Parameters<typeof startSim>[0] = {}) => {
  const s = await startSim({ model: MODEL, version: 'v1', seed: 11, interTokenMs: 0, jitter: 0, ...o });
  sims.push(s);
  return s;
};

beforeAll(async () => {
  whole = await sim();
  const [p0, p1, d0, d1] = await Promise.all([
    sim({ kvRole: 'prefill', kvLayout: 'card-a' }),
    sim({ kvRole: 'prefill', kvLayout: 'card-a' }),
    sim({ kvRole: 'decode', kvLayout: 'card-a' }),
    sim({ kvRole: 'decode', kvLayout: 'card-a' }),
  ]);
  prefill1 = p1!;
  gw = await startGateway([
    {
      name: MODEL,
      versions: [
        {
          id: 'v1',
          card: 'card-a',
          workers: [
            { id: 'p0', url: p0.url, kvRole: 'prefill' },
            { id: 'p1', url: p1.url, kvRole: 'prefill' },
            { id: 'd0', url: d0.url, kvRole: 'decode' },
            { id: 'd1', url: d1.url, kvRole: 'decode' },
          ],
        },
      ],
      route: { weights: { v1: 1 } },
    },
  ]);
});
afterAll(async () => {
  await gw.close();
  for (const s of sims) await s.close();
});

const chat = (extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'How do the blocks travel between the workers?' }],
  max_tokens: 24,
  temperature: 0,
  ignore_eos: true,
  ...extra,
});
const contentOf = (body: string) =>
  sseData(body)
    .filter((d) => d !== '[DONE]')
    .map((d) => (JSON.parse(d) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '')
    .join('');

describe('prefill and decode through the gateway', () => {
  it('streams and whole answers: prefilled on a prefill worker, decoded on a decode worker, the text a whole request gives', async () => {
    const reference = await httpCall(whole.url, '/v1/chat/completions', chat());
    const refText = (JSON.parse(reference.body) as { choices: { message: { content: string } }[] }).choices[0]?.message.content;
    const pairs = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const s = await httpCall(gw.url, '/v1/chat/completions', chat({ stream: true, stream_options: { include_usage: true } }));
      expect(s.status).toBe(200);
      expect(contentOf(s.body)).toBe(refText);
      expect(s.headers['x-glidepath-worker']).toMatch(/^d[01]$/);
      expect(s.headers['x-glidepath-prefill-worker']).toMatch(/^p[01]$/);
      pairs.add(`${String(s.headers['x-glidepath-prefill-worker'])}+${String(s.headers['x-glidepath-worker'])}`);
    }
    // both prefill workers take their share (picked at random between equals: all 24 on one is 2 in 2^24)
    expect(new Set([...pairs].map((p) => p.split('+')[0])).size).toBe(2);
    const w = await httpCall(gw.url, '/v1/chat/completions', chat());
    expect(w.status).toBe(200);
    expect((JSON.parse(w.body) as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(refText);
    expect(w.headers['x-glidepath-prefill-worker']).toMatch(/^p[01]$/);
    // every worker let go of every request: the prefill workers too, once their blocks were pulled
    const pool = gw.dp.model(MODEL).pools.get('v1');
    expect(pool?.workers.map((x) => [x.id, x.outstanding])).toEqual([
      ['p0', 0],
      ['p1', 0],
      ['d0', 0],
      ['d1', 0],
    ]);
  });

  it('a prefill worker that fails is passed over for another; a request the prefill worker refuses gets its answer', async () => {
    gw.dp.setWorkerHealth(MODEL, 'v1', 'p1', 1);
    await prefill1.close(); // p1 is gone
    for (let i = 0; i < 4; i++) {
      const s = await httpCall(gw.url, '/v1/chat/completions', chat());
      expect(s.status).toBe(200);
      expect(s.headers['x-glidepath-prefill-worker']).toBe('p0');
    }
    const bad = await httpCall(gw.url, '/v1/chat/completions', chat({ n: 3 }));
    expect(bad.status).toBe(400);
    expect(bad.headers['x-glidepath-worker']).toBe('p0');
  });

  it('no prefill worker taking traffic: a 5xx that says the prefill leg failed', async () => {
    gw.dp.setWorkerHealth(MODEL, 'v1', 'p0', 0);
    gw.dp.setWorkerHealth(MODEL, 'v1', 'p1', 0);
    const s = await httpCall(gw.url, '/v1/chat/completions', chat());
    expect(s.status).toBeGreaterThanOrEqual(500);
    expect(s.body).toMatch(/the prefill leg of pd\/v1 failed: no prefill worker of the version takes traffic/);
  });
});
