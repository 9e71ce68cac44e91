import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { DEFAULTS } from '../../../src/defaults.js';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { FakeClock } from '../../../src/sim/timing.js';
import { call, chat, chunks, get, post, rawPost } from './helpers.js';

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ port: 0, jitter: 0 });
});
afterEach(() => sim.clearFaults());
afterAll(() => sim.close());

const CHAT = '/v1/chat/completions';
const faultCount = async (kind: string) => {
  const m = (await get(sim.url, '/metrics')).text;
  const line = m.split('\n').find((l) => l.startsWith(`glidepath_sim_faults_injected_total{model_name="sim-model",kind="${kind}"}`));
  return Number(line?.split(' ')[1]);
};

describe('fault admin API', () => {
  it('sets (snake_case), reads and clears faults', async () => {
    const set = await post(sim.url, '/admin/faults', { error_rate: 0.25, error_status: 429, latency_multiplier: 2 });
    expect(set.status).toBe(200);
    expect(set.json).toEqual({ faults: { error_rate: 0.25, error_status: 429, latency_multiplier: 2 } });
    expect((await get(sim.url, '/admin/faults')).json.faults).toEqual({ error_rate: 0.25, error_status: 429, latency_multiplier: 2 });
    // POST replaces the whole set
    await post(sim.url, '/admin/faults', { corrupt: true });
    expect((await get(sim.url, '/admin/faults')).json.faults).toEqual({ corrupt: true });
    const del = await call(sim.url, 'DELETE', '/admin/faults');
    expect(del.json).toEqual({ faults: {} });
    expect((await get(sim.url, '/admin/faults')).json.faults).toEqual({});
  });

  it('rejects unknown keys, camelCase names and bad values', async () => {
    const unknown = await post(sim.url, '/admin/faults', { explode: true });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toBe('invalid fault set: explode: unknown key "explode"');
    expect((await post(sim.url, '/admin/faults', { errorRate: 0.5 })).status).toBe(400);
    const bad = await post(sim.url, '/admin/faults', { error_rate: 1.5, error_status: 200 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/error_rate/);
    expect(bad.json.error.message).toMatch(/error_status/);
    expect((await get(sim.url, '/admin/faults')).json.faults).toEqual({});
  });
});

describe('injected faults', () => {
  it('error rate answers with the configured status before the first token, counted in /metrics', async () => {
    const before = await faultCount('error');
    await post(sim.url, '/admin/faults', { error_rate: 1, error_status: 429 });
    const r = await post(sim.url, CHAT, chat('fail', { stream: true }));
    expect(r.status).toBe(429);
    expect(r.json.error).toMatchObject({ code: 'injected_fault', type: 'rate_limit_error' }); // the type follows the status, as for every code
    sim.setFaults({ errorRate: 1 });
    expect((await post(sim.url, CHAT, chat('fail'))).status).toBe(500);
    expect(await faultCount('error')).toBe(before + 2);
  });

  it('crash after N tokens destroys the socket mid-stream after exactly N tokens', async () => {
    sim.setFaults({ crashAfterTokens: 3 });
    const r = await rawPost(sim.url, CHAT, chat('crash', { max_tokens: 10, ignore_eos: true, stream: true }));
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    const cs = chunks(r.text.slice(0, r.text.lastIndexOf('\n\n') + 2));
    expect(cs).toHaveLength(1 + 3);
    expect(r.text).not.toContain('[DONE]');
    await expect(post(sim.url, CHAT, chat('crash', { max_tokens: 10, ignore_eos: true }))).rejects.toThrow();
    expect(sim.stats().faults.crash).toBe(2);
    // the stream that fits under N completes normally
    const short = await post(sim.url, CHAT, chat('crash', { max_tokens: 3, ignore_eos: true, stream: true }));
    expect(short.text).toContain('[DONE]');
  });

  it('hang accepts the request and sends nothing; other work goes on', async () => {
    sim.setFaults({ hang: true });
    const ac = new AbortController();
    const hung = fetch(sim.url + CHAT, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat('hang')),
      signal: ac.signal,
    });
    await sim.nextFault('hang');
    sim.clearFaults();
    expect((await post(sim.url, CHAT, chat('fine', { max_tokens: 2 }))).status).toBe(200);
    let settled = false;
    void hung.then(
      () => (settled = true),
      () => (settled = true),
    );
    await get(sim.url, '/health');
    expect(settled).toBe(false);
    ac.abort();
    await expect(hung).rejects.toThrow();
  });

  it('close() ends hung requests so nothing hangs forever', async () => {
    const h = await startSim({ port: 0, faults: { hang: true } });
    const hung = fetch(h.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(chat('hang')) });
    await h.nextFault('hang');
    await h.close();
    await expect(hung).rejects.toThrow();
  });

  it('latency multiplier slows TTFT and ITL (fake clock)', async () => {
    const clock = new FakeClock();
    const h = await startSim({ port: 0, clock, jitter: 0, interTokenMs: 4, prefillTokensPerS: 1000 });
    try {
      h.setFaults({ latencyMultiplier: 5 });
      // "<|user|> slow <|end|>\n<|assistant|>" = 4 prompt tokens: TTFT 4 ms × 5, ITL 4 ms × 5
      const admitted = once(h.events, 'request');
      const res = post(h.url, CHAT, chat('slow', { max_tokens: 3, ignore_eos: true, stream: true }));
      await admitted;
      clock.advance(19.9);
      expect(h.stats().tokens).toBe(0);
      clock.advance(0.1);
      expect(h.stats().tokens).toBe(1);
      clock.advance(19.9);
      expect(h.stats().tokens).toBe(1);
      clock.advance(20.1);
      expect(h.stats().tokens).toBe(3);
      expect((await res).text).toContain('[DONE]');
      expect(h.stats().faults.latency).toBe(1);
    } finally {
      await h.close();
    }
  });

  it('silent corruption: HTTP 200, wrong tokens, logprobs shifted out of range', async () => {
    const body = chat('canary: capital of France', { max_tokens: 12, ignore_eos: true, logprobs: true, top_logprobs: 1 });
    const ok = await post(sim.url, CHAT, body);
    const before = await faultCount('corrupt');
    sim.setFaults({ corrupt: true });
    const bad = await post(sim.url, CHAT, body);
    expect(bad.status).toBe(200);
    expect(bad.json.error).toBeUndefined();
    expect(bad.json.choices[0].message.content).not.toBe(ok.json.choices[0].message.content);
    // both bodies have 12 tokens, so the loops below cannot pass on an empty list
    expect(bad.json.choices[0].logprobs.content).toHaveLength(12);
    expect(ok.json.choices[0].logprobs.content).toHaveLength(12);
    for (const c of bad.json.choices[0].logprobs.content) expect(c.logprob).toBeLessThan(-DEFAULTS.sim.corruptLogprobShift);
    for (const c of ok.json.choices[0].logprobs.content) expect(c.logprob).toBeGreaterThanOrEqual(-0.01 - DEFAULTS.sim.maxTopLogprobDepth);
    expect(await faultCount('corrupt')).toBe(before + 1);
  });

  it('process exit (in-process): the worker drops the request and stops listening', async () => {
    const h = await startSim({ port: 0 });
    h.setFaults({ processExit: true });
    await expect(post(h.url, CHAT, chat('die'))).rejects.toThrow();
    expect(h.stats().exited).toBe(true);
    expect(h.stats().faults.process_exit).toBe(1);
    await expect(get(h.url, '/health')).rejects.toThrow();
    await h.close();
  });
});
