// Warming a new worker up before it takes traffic: the version's warm-up requests, sent straight to it (a cold engine's first requests are slow, and one that cannot answer them fails its load).
import { request } from 'undici';
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';
import { cancelled } from '../providers/engine.js';

/**
 * Send the version's warm-up requests straight to one worker; any failure fails the load. `signal`:
 * a shutdown cuts it short (`worker_start_cancelled`), since each request may take minutes.
 */
export async function warmUp(url: string, v: VersionConfig, signal?: AbortSignal): Promise<void> {
  for (let i = 0; i < v.warmup.requests; i++) {
    cancelled(signal, url);
    let status: number;
    let text: string;
    try {
      const res = await request(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: v.model, prompt: `warm-up ${i}`, max_tokens: v.warmup.maxTokens, temperature: 0 }),
        headersTimeout: DEFAULTS.control.warmupTimeoutMs,
        bodyTimeout: DEFAULTS.control.warmupTimeoutMs,
        signal,
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      cancelled(signal, url);
      throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} failed: ${(err as Error).message}`);
    }
    if (status !== 200) throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} answered ${status}: ${text.slice(0, 200)}`);
  }
}
