// The simulator's warm-up: before a worker listens, it serves requests to itself on a throwaway
// server with no delays, as vLLM runs its model (profiling, CUDA graphs) before its API server listens.
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULTS } from '../defaults.js';
import type { SimOptions } from './options.js';
import { SimServer } from './server.js';

/** At most this many warm-up requests in flight: a burst, as a worker meets when another dies. */
const CONCURRENCY = 16;

/**
 * The kinds of request a worker serves, in turn: streamed and whole chats and completions, a chat
 * continued from a partial answer (a broken stream's continuation), usage and logprobs asked for.
 */
function body(o: SimOptions, i: number): { path: string; body: string } {
  const content = `warm-up ${i}: the quick brown fox jumps over the lazy dog, then counts to ${i % 97}`;
  const usage = { stream_options: { include_usage: true } };
  switch (i % 4) {
    case 0:
      return {
        path: '/v1/chat/completions',
        body: JSON.stringify({ model: o.model, messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0, stream: true, ...usage }),
      };
    case 1:
      return {
        path: '/v1/chat/completions',
        body: JSON.stringify({
          model: o.model,
          messages: [
            { role: 'user', content },
            { role: 'assistant', content: 'The fox, having jumped, now' },
          ],
          continue_final_message: true,
          add_generation_prompt: false,
          max_tokens: 8,
          temperature: 0,
          stream: true,
          ...usage,
        }),
      };
    case 2:
      return {
        path: '/v1/completions',
        body: JSON.stringify({ model: o.model, prompt: content, max_tokens: 8, temperature: 0, stream: true, logprobs: 1, ...usage }),
      };
    default:
      return { path: '/v1/chat/completions', body: JSON.stringify({ model: o.model, messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 }) };
  }
}

function send(port: number, agent: Agent, r: { path: string; body: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: r.path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`warm-up ${r.path}: HTTP ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

/**
 * Serve `n` requests (`CONCURRENCY` at a time) on a throwaway server of this worker's model with no
 * prefill or token delays, then close it: the code a request runs through is compiled and optimised
 * before the worker takes traffic. Its engine, metrics and request counter are the throwaway's, so
 * the worker's own start from zero. The requests served (all of them answered 200, or it throws).
 */
export async function warmUp(o: SimOptions, n: number): Promise<number> {
  if (n <= 0) return 0;
  const s = new SimServer({
    ...o,
    host: '127.0.0.1',
    port: 0,
    loadTimeMs: 0,
    interTokenMs: 0,
    prefillTokensPerS: DEFAULTS.sim.warmupPrefillTokensPerS,
    jitter: 0,
    eosRate: 0,
    // the worker's own limits and faults could refuse its warm-up: the throwaway has the defaults
    kvCapacityTokens: DEFAULTS.sim.kvCapacityTokens,
    maxNumSeqs: DEFAULTS.sim.maxNumSeqs,
    maxWaitingRequests: DEFAULTS.sim.maxWaitingRequests,
    maxModelLen: DEFAULTS.sim.maxModelLen,
    faults: {},
    onProcessExit: 'close',
    kvRole: 'both',
  });
  await s.listen();
  const port = (s.server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  try {
    let next = 0;
    const lane = async () => {
      while (next < n) await send(port, agent, body(o, next++));
    };
    await Promise.all(Array.from({ length: Math.min(n, CONCURRENCY) }, lane));
    return next;
  } finally {
    agent.destroy();
    await s.close();
  }
}
