// The simulator's warm-up (owns the throwaway server and its requests): before a worker listens, it
// serves requests to itself with no delays, as vLLM runs its model (profiling, CUDA graphs) before its
// API server listens.
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
function body(model: string, i: number): { path: string; body: string } {
  const content = `warm-up ${i}: the quick brown fox jumps over the lazy dog, then counts to ${i % 97}`;
  const usage = { stream_options: { include_usage: true } };
  switch (i % 4) {
    case 0:
      return {
        path: '/v1/chat/completions',
        body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0, stream: true, ...usage }),
      };
    case 1:
      return {
        path: '/v1/chat/completions',
        body: JSON.stringify({
          model,
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
        body: JSON.stringify({ model, prompt: content, max_tokens: 8, temperature: 0, stream: true, logprobs: 1, ...usage }),
      };
    default:
      return { path: '/v1/chat/completions', body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 }) };
  }
}

/** One request; whether it was answered 200 (any other answer, or none, only means less warming). */
function send(port: number, agent: Agent, r: { path: string; body: string }): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: r.path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => resolve(res.statusCode === 200));
      res.on('error', () => resolve(false));
    });
    req.on('error', () => resolve(false));
    req.end(r.body);
  });
}

/**
 * Send `n` requests (`CONCURRENCY` at a time) to a throwaway server of this worker's model with no
 * prefill or token delays, then close it: the code a request runs through is compiled and optimised
 * before the worker takes traffic. Its engine, metrics and request counter are the throwaway's, so
 * the worker's own start from zero; the worker's faults and limits are not its (a one-slot worker, a
 * small body limit or `max_logprobs: 0` would refuse some), and a pure judge warms up as a plain
 * model (its prompts need the judge's format). A request it refuses only warms less: the requests
 * answered 200 are returned, and the worker starts either way.
 */
export async function warmUp(o: SimOptions, n: number): Promise<number> {
  if (n <= 0) return 0;
  const D = DEFAULTS.sim;
  const model = o.model === o.judgeModel ? D.model : o.model;
  const s = new SimServer({
    ...o,
    model,
    servedModelNames: [],
    host: '127.0.0.1',
    port: 0,
    loadTimeMs: 0,
    interTokenMs: 0,
    prefillTokensPerS: D.warmupPrefillTokensPerS,
    jitter: 0,
    eosRate: 0,
    kvCapacityTokens: D.kvCapacityTokens,
    maxNumSeqs: D.maxNumSeqs,
    maxWaitingRequests: D.maxWaitingRequests,
    maxModelLen: D.maxModelLen,
    maxBodyBytes: D.maxBodyBytes,
    maxLogprobs: D.maxLogprobs,
    faults: {},
    onProcessExit: 'close',
    kvRole: 'both',
  });
  await s.listen();
  const port = (s.server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  let ok = 0;
  try {
    const lane = async () => {
      while (next < n) if (await send(port, agent, body(model, next++))) ok++;
    };
    await Promise.all(Array.from({ length: Math.min(n, CONCURRENCY) }, lane));
    return ok;
  } finally {
    agent.destroy();
    await s.close();
  }
}
