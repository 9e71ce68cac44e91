import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { startSim } from '../../../src/sim/index.js';
import { chat, get, post } from './helpers.js';

describe('request lifecycle', () => {
  it('a client that leaves mid-stream frees its slot and is counted as abort', async () => {
    const sim = await startSim({ port: 0, interTokenMs: 2, jitter: 0, maxNumSeqs: 1 });
    try {
      const ac = new AbortController();
      const res = await fetch(`${sim.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chat('long', { max_tokens: 5000, ignore_eos: true, stream: true })),
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read(); // first bytes arrived: the request is running
      expect(sim.stats().running).toBe(1);
      const finished = once(sim.events, 'finished');
      ac.abort();
      expect(await finished).toEqual(['abort']);
      expect(sim.stats()).toMatchObject({ running: 0, kvUsage: 0 });
      const m = (await get(sim.url, '/metrics')).text;
      expect(m).toContain('vllm:request_success_total{model_name="sim-model",finished_reason="abort"} 1');
      // the freed slot serves the next request
      expect((await post(sim.url, '/v1/chat/completions', chat('next', { max_tokens: 2 }))).status).toBe(200);
    } finally {
      await sim.close();
    }
  });

  it('close() ends in-flight streams and keep-alive sockets', async () => {
    const sim = await startSim({ port: 0, interTokenMs: 50 });
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat('endless', { max_tokens: 1000, ignore_eos: true, stream: true })),
    });
    const reader = res.body!.getReader();
    await reader.read();
    await sim.close();
    await expect(
      (async () => {
        for (;;) if ((await reader.read()).done) return 'ended cleanly';
      })(),
    ).rejects.toThrow();
  });

  it('listens on IPv6 loopback', async () => {
    const sim = await startSim({ port: 0, host: '::1' });
    try {
      expect(sim.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect((await get(sim.url, '/health')).status).toBe(200);
    } finally {
      await sim.close();
    }
  });

  it('warms up before it listens: every kind of request served on a throwaway server, the worker counting none of them', async () => {
    // faults, a one-slot engine and no waiting queue are the worker's, not its warm-up's: none fails it
    const sim = await startSim({ port: 0, warmupRequests: 24, maxNumSeqs: 1, maxWaitingRequests: 0, faults: { errorRate: 1 } });
    try {
      expect(sim.stats()).toMatchObject({ warmedUp: 24, requests: 0, tokens: 0, running: 0 });
      const m = (await get(sim.url, '/metrics')).text;
      expect(m).not.toMatch(/^vllm:request_success_total\{[^}]*\} [1-9]/m);
      sim.clearFaults();
      const r = await post(sim.url, '/v1/chat/completions', chat('after the warm-up', { max_tokens: 2 }));
      expect(r.status).toBe(200);
      // its first request is its first: ids count from zero
      expect(r.json.id).toMatch(/0{7}0$/);
    } finally {
      await sim.close();
    }
  });

  it("a pure judge, a worker of tiny limits and one that takes no logprobs warm up as well (the warm-up's limits are the defaults)", async () => {
    for (const o of [{ model: 'judge' }, { maxBodyBytes: 200, maxLogprobs: 0, maxModelLen: 16 }]) {
      const sim = await startSim({ port: 0, warmupRequests: 8, ...o });
      try {
        expect([o, sim.stats().warmedUp]).toEqual([o, 8]);
      } finally {
        await sim.close();
      }
    }
  });

  it('rejects invalid options with every problem named', async () => {
    await expect(startSim({ maxNumSeqs: 0, hallucinationRate: 2 })).rejects.toThrow(/hallucinationRate.*maxNumSeqs|maxNumSeqs.*hallucinationRate/);
  });
});
