// Talking to an engine's HTTP admin endpoints (health, sleep, wake): only providers do this, and
// every provider the same way (vLLM's sleep mode; the simulator serves the same endpoints).
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError, UpstreamError } from '../errors.js';
import type { WorkerHandle } from './types.js';

const P = DEFAULTS.providers;

/** Status of one GET, 0 when there was no answer. */
export async function getStatus(url: string, path: string, timeoutMs: number = P.probeTimeoutMs): Promise<number> {
  try {
    const res = await request(url + path, { method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0;
  }
}

/** Does the engine answer its health endpoint now (one probe)? */
export async function answersHealth(url: string, path: string): Promise<boolean> {
  return (await getStatus(url, path)) === 200;
}

/**
 * Poll `url+path` until it answers 200, the deadline passes, or `died` resolves (the process
 * ended). Polling is the engine's contract: vLLM's /health has no push.
 */
export async function waitHealthy(url: string, path: string, deadlineMs: number, died: Promise<unknown>): Promise<void> {
  const until = Date.now() + deadlineMs;
  let delay: number = P.healthPollFirstMs;
  let dead = false;
  void died.then(() => {
    dead = true;
  });
  while (Date.now() < until) {
    if (dead) throw new UnavailableError('worker_exited', `worker at ${url} exited before it became healthy`);
    if (await answersHealth(url, path)) return;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(P.healthPollMaxMs, delay * 2);
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

/** Engine sleep mode (`POST /sleep?level=`): level 1 keeps the weights in CPU memory, 2 discards them. */
export function sleepEngine(h: WorkerHandle, level: 1 | 2): Promise<void> {
  return post(h.url, `/sleep?level=${level}`, P.sleepTimeoutMs);
}

/** `POST /wake_up`, then wait until the engine answers its health endpoint again (or exits). */
export async function wakeEngine(h: WorkerHandle, healthPath: string): Promise<void> {
  await post(h.url, '/wake_up', P.wakeTimeoutMs);
  await waitHealthy(h.url, healthPath, P.wakeTimeoutMs, h.exited);
}
