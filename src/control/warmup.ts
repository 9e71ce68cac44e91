// Warming a new worker up before it takes traffic: the version's warm-up requests, sent straight to it (a cold engine's first requests are slow, and one that cannot answer them fails its load).
import { request } from 'undici';
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';

/** Send the version's warm-up requests straight to one worker; any failure fails the load. */
export async function warmUp(url: string, v: VersionConfig): Promise<void> {
  for (let i = 0; i < v.warmup.requests; i++) {
    let res;
    try {
      res = await request(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: v.model, prompt: `warm-up ${i}`, max_tokens: v.warmup.maxTokens, temperature: 0 }),
        headersTimeout: DEFAULTS.control.warmupTimeoutMs,
        bodyTimeout: DEFAULTS.control.warmupTimeoutMs,
      });
    } catch (err) {
      throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} failed: ${(err as Error).message}`);
    }
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} answered ${res.statusCode}: ${text.slice(0, 200)}`);
  }
}
