// Graceful degradation at the gateway: a model's level follows its healthy capacity (workers' health
// weights against the throughput it must serve); level 2 sheds the lowest tier with 429 and
// Retry-After, level 3 caps max_tokens below the top tier, level 4 refuses every new request with
// 503; accepted requests are served; the level returns to 0 when the workers come back.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { LevelChange } from '../../../src/gateway/degradation.js';
import { chatReq, gatewayFixtures, oneModel, post, until } from '../../helpers/gateway.js';
import { chatBody, deferred, json } from '../../helpers/upstream.js';

const { upstream, gateway } = gatewayFixtures();
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const TIERS = {
  order: ['premium', 'standard', 'best_effort'],
  default: 'standard',
  trustedSources: [],
  keys: new Map([
    [sha('sk-gold'), 'premium'],
    [sha('sk-free'), 'best_effort'],
  ]),
};
const as = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });

async function setup(recoverAfterMs = 0) {
  const ups = await Promise.all([0, 1, 2, 3].map(() => upstream()));
  for (const u of ups) u.setDefault(json(chatBody('ok')));
  const changes: LevelChange[] = [];
  const gw = await gateway(oneModel(ups.map((u) => u.url)), {}, { onDegradation: (_m, c) => changes.push(c) });
  // four workers of 100 tokens/s for a model that must serve 400
  gw.dp.setAdmission('m', TIERS, { requiredTokensPerS: 400, workerTokensPerS: 100, recoverAfterMs, maxTokensDegraded: 64, measureIntervalMs: 0 });
  const health = (n: number) => [0, 1, 2, 3].forEach((i) => gw.dp.setWorkerHealth('m', 'v1', `v1-w${i}`, i < n ? 1 : 0));
  return { gw, ups, changes, health };
}

describe('degradation', () => {
  it('sheds the lowest tier at level 2, caps max_tokens at level 3, refuses all at level 4, and recovers', async () => {
    const { gw, ups, changes, health } = await setup();
    expect(gw.dp.model('m').admission?.level).toBe(0);
    expect((await post(gw.url, chatReq(), as('sk-free'))).status).toBe(200);

    health(2); // capacity 0.5: level 2 (through level 1 as the workers go one by one)
    expect(changes).toEqual([
      { from: 0, to: 1, ratio: 0.75 },
      { from: 1, to: 2, ratio: 0.5 },
    ]);
    const shed = await post(gw.url, chatReq(), as('sk-free'));
    expect(shed.status).toBe(429);
    expect(shed.headers['retry-after']).toBe('5');
    expect(shed.json()).toMatchObject({ error: { code: 'tier_shed', type: 'rate_limit_error' } });
    expect((shed.json() as { error: { message: string } }).error.message).toContain('sheds tier best_effort');
    expect((await post(gw.url, chatReq())).status).toBe(200);
    expect((await post(gw.url, chatReq(), as('sk-gold'))).status).toBe(200);

    health(1); // 0.25: level 3
    expect(gw.dp.model('m').admission?.level).toBe(3);
    expect((await post(gw.url, chatReq({ max_tokens: 500 }))).status).toBe(200);
    expect((await post(gw.url, chatReq({ max_tokens: 500 }), as('sk-gold'))).status).toBe(200);
    // both limit fields are capped (an engine may read either), never raised
    expect((await post(gw.url, chatReq({ max_tokens: 10, max_completion_tokens: 4000 }))).status).toBe(200);
    // only w0 is left: standard's requests went with at most 64 tokens, premium's as it was
    const sent = (ups[0]?.requests ?? []).slice(-3).map((r) => [r.json?.max_tokens, r.json?.max_completion_tokens]);
    expect(sent).toEqual([
      [64, undefined],
      [500, undefined],
      [10, 64],
    ]);

    health(0); // level 4
    const refused = await post(gw.url, chatReq(), as('sk-gold'));
    expect(refused.status).toBe(503);
    expect(refused.json()).toMatchObject({ error: { code: 'degraded_unavailable' } });
    expect(refused.headers['retry-after']).toBe('5');

    health(4); // back (no recovery wait configured): 0.25, 0.5, 0.75 (not past 0.75 by the margin), 1
    expect(changes.slice(-3).map((c) => [c.from, c.to])).toEqual([
      [4, 3],
      [3, 2],
      [2, 0],
    ]);
    expect((await post(gw.url, chatReq(), as('sk-free'))).status).toBe(200);
    const metrics = await gw.telemetry.metrics.registry.metrics();
    expect(metrics).toMatch(/glidepath_degradation_level\{model="m"\} 0/);
    expect(metrics).toMatch(/glidepath_shed_total\{model="m",tier="best_effort",reason="level_2"\} 1/);
    expect(metrics).toMatch(/glidepath_shed_total\{model="m",tier="premium",reason="level_4"\} 1/);
  });

  it('improves only after the recovery time (a timer re-assesses: no traffic needed)', async () => {
    const { gw, changes, health } = await setup(150);
    health(2);
    health(4);
    expect(gw.dp.model('m').admission?.level).toBe(2);
    const until = Date.now() + 5_000;
    while (gw.dp.model('m').admission?.level !== 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    expect(changes.map((c) => [c.from, c.to])).toEqual([
      [0, 1],
      [1, 2],
      [2, 0],
    ]);
  });

  it('a suspicious worker counts at its health weight; spares and other versions at weight 0 do not count', async () => {
    const { gw, health } = await setup();
    health(3);
    gw.dp.setWorkerHealth('m', 'v1', 'v1-w2', 0.5); // 2.5 of 4 workers: 0.625
    expect(gw.dp.model('m').admission?.level).toBe(2);
    expect(gw.dp.model('m').admission?.ratio).toBe(0.625);
  });
});

describe("a worker's request slots and its queue by tier", () => {
  it("caps requests in flight at the engine's max_num_seqs, shares fewer out below the top tier when degraded, and serves the waiting by tier", async () => {
    const u = await upstream();
    const held = deferred();
    const arrivals: string[] = [];
    u.setDefault(async (c) => {
      const user = c.rec.json?.user;
      const key = typeof user === 'string' ? user : 'none';
      arrivals.push(key);
      if (arrivals.length <= 2) await held.promise;
      await json(chatBody(key))(c);
    });
    const gw = await gateway(oneModel([u.url]), { connectionsPerWorker: 8 });
    const pool = gw.dp.pool('m', 'v1');
    gw.dp.addVersion('m', 'v1', pool.cardChecksum, { resume: 'continue_final_message', tokenIdPrompts: false, maxNumSeqs: 2 });
    gw.dp.setAdmission('m', TIERS, { requiredTokensPerS: 100, workerTokensPerS: 100, recoverAfterMs: 0, maxTokensDegraded: 64, measureIntervalMs: 0 });
    const slots = () => pool.workers[0]!.upstream;
    expect(slots().limit).toBe(2);

    const first = [post(gw.url, chatReq()), post(gw.url, chatReq())];
    await until(() => arrivals.length === 2, 'two requests to fill the slots');
    // arriving in the order best effort, standard, premium: served premium first
    const waiting = [post(gw.url, chatReq({ user: 'free' }), as('sk-free'))];
    await until(() => slots().queued === 1, 'the first to wait');
    waiting.push(post(gw.url, chatReq({ user: 'standard' })));
    await until(() => slots().queued === 2, 'the second to wait');
    waiting.push(post(gw.url, chatReq({ user: 'gold' }), as('sk-gold')));
    await until(() => slots().queued === 3, 'the third to wait');
    held.resolve();
    for (const r of await Promise.all([...first, ...waiting])) expect(r.status).toBe(200);
    expect(arrivals.slice(2)).toEqual(['gold', 'standard', 'free']);

    // level 1 (capacity 0.9 of what it must serve): below the top tier, three quarters of the slots (rounded down, at least one)
    gw.dp.setAdmission('m', TIERS, { requiredTokensPerS: 111, workerTokensPerS: 100, recoverAfterMs: 0, maxTokensDegraded: 64, measureIntervalMs: 0 });
    expect(gw.dp.model('m').admission?.level).toBe(1);
    expect([slots().limit, slots().sharedLimit]).toEqual([2, 1]);
    gw.dp.setAdmission('m', TIERS, { requiredTokensPerS: 100, workerTokensPerS: 100, recoverAfterMs: 0, maxTokensDegraded: 64, measureIntervalMs: 0 });
    expect([slots().limit, slots().sharedLimit]).toEqual([2, 2]);
  });
});
