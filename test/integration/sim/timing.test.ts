import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { FakeClock } from '../../../src/sim/timing.js';
import { chat, get } from './helpers.js';

// The engine runs on a fake clock: time moves only when the test advances it, so the timing
// model is checked exactly over real HTTP without sleeping.
let sim: SimHandle | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const stream = (url: string, body: object) =>
  fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return Number(line?.split(' ').at(-1));
}

describe('timing model over HTTP (fake clock)', () => {
  it('TTFT = queue wait + prompt / prefill rate; ITL per token; max_num_seqs queues', async () => {
    const clock = new FakeClock();
    sim = await startSim({ port: 0, clock, prefillTokensPerS: 1000, interTokenMs: 10, jitter: 0, maxNumSeqs: 1, itlGrowthPerSeq: 0 });
    // "<|user|> a b c <|end|>\n<|assistant|>" = 6 prompt tokens → 6 ms prefill
    const body = chat('a b c', { max_tokens: 3, ignore_eos: true, stream: true });
    const firstAdmitted = once(sim.events, 'request');
    const a = stream(sim.url, body);
    expect(await firstAdmitted).toEqual(['running']);
    const secondQueued = once(sim.events, 'request');
    const b = stream(sim.url, body);
    expect(await secondQueued).toEqual(['waiting']);
    expect(sim.stats()).toMatchObject({ running: 1, waiting: 1 });
    const m = (await get(sim.url, '/metrics')).text;
    expect(metric(m, 'vllm:num_requests_running')).toBe(1);
    expect(metric(m, 'vllm:num_requests_waiting')).toBe(1);

    clock.advance(5.9);
    expect(sim.stats().tokens).toBe(0);
    clock.advance(0.1); // A's first token at 6 ms
    expect(sim.stats().tokens).toBe(1);
    clock.advance(20); // A's tokens 2 and 3 at 16 and 26 ms; A ends and B starts at 26 ms
    expect(sim.stats()).toMatchObject({ tokens: 3, running: 1, waiting: 0 });
    expect((await (await a).text()).endsWith('data: [DONE]\n\n')).toBe(true);
    clock.advance(26); // B: first token at 32 ms (26 queued + 6 prefill), then 42, 52
    expect(sim.stats().tokens).toBe(6);
    await (await b).text();

    const after = (await get(sim.url, '/metrics')).text;
    expect(metric(after, 'vllm:time_to_first_token_seconds_sum')).toBeCloseTo(0.006 + 0.032, 9);
    expect(metric(after, 'vllm:request_queue_time_seconds_sum')).toBeCloseTo(0.026, 9);
    expect(metric(after, 'vllm:inter_token_latency_seconds_sum')).toBeCloseTo(0.04, 9);
    expect(metric(after, 'vllm:inter_token_latency_seconds_count')).toBe(4);
    expect(metric(after, 'vllm:e2e_request_latency_seconds_sum')).toBeCloseTo(0.026 + 0.052, 9);
  });

  it('inter-token latency grows with the number of running sequences', async () => {
    const clock = new FakeClock();
    sim = await startSim({ port: 0, clock, prefillTokensPerS: 1e12, interTokenMs: 10, jitter: 0, itlGrowthPerSeq: 0.5 });
    const body = chat('x', { max_tokens: 2, ignore_eos: true, stream: true });
    const r1 = once(sim.events, 'request');
    const a = stream(sim.url, body);
    await r1;
    const r2 = once(sim.events, 'request');
    const b = stream(sim.url, body);
    await r2;
    clock.advance(0.001);
    expect(sim.stats().tokens).toBe(2); // both first tokens
    clock.advance(14.9);
    expect(sim.stats().tokens).toBe(2); // two running: ITL = 10 × (1 + 0.5) = 15 ms
    clock.advance(0.1);
    expect(sim.stats().tokens).toBe(4);
    await Promise.all([(await a).text(), (await b).text()]);
  });

  it('load time keeps /health at 503 until the clock passes it', async () => {
    const clock = new FakeClock();
    sim = await startSim({ port: 0, clock, loadTimeMs: 30_000 });
    expect((await get(sim.url, '/health')).status).toBe(503);
    clock.advance(29_999);
    expect((await get(sim.url, '/health')).status).toBe(503);
    clock.advance(1);
    expect((await get(sim.url, '/health')).status).toBe(200);
  });
});
