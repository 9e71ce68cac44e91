// Talking to an engine's HTTP admin endpoints (health, sleep, wake): only providers do this.
import { request } from 'undici';
import { UnavailableError, UpstreamError } from '../errors.js';

export async function getStatus(url: string, path: string, timeoutMs: number): Promise<number> {
  try {
    const res = await request(url + path, { method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0;
  }
}

/**
 * Poll `url+path` until it answers 200, the deadline passes, or `abort` resolves (the process died).
 * Polling is the engine's contract (vLLM's /health has no push); the interval starts at 20 ms and
 * backs off to 500 ms.
 */
export async function waitHealthy(url: string, path: string, deadlineMs: number, died: Promise<unknown>): Promise<void> {
  const until = Date.now() + deadlineMs;
  let delay = 20;
  let dead = false;
  void died.then(() => {
    dead = true;
  });
  while (Date.now() < until) {
    if (dead) throw new UnavailableError('worker_exited', `worker at ${url} exited before it became healthy`);
    if ((await getStatus(url, path, 2_000)) === 200) return;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(500, delay * 2);
  }
  throw new UnavailableError('worker_start_timeout', `worker at ${url} did not become healthy within ${deadlineMs} ms`);
}

export async function post(url: string, path: string, timeoutMs: number): Promise<void> {
  let res;
  try {
    res = await request(url + path, { method: 'POST', headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  } catch (err) {
    throw new UpstreamError('engine_unreachable', `${url}${path}: ${(err as Error).message}`);
  }
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new UpstreamError('engine_refused', `${url}${path} answered ${res.statusCode}: ${text.slice(0, 200)}`);
}
