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
 * Poll `url+path` until it answers 200, the deadline passes, `died` resolves (the process ended) or
 * `signal` is aborted (the control plane shuts down). Polling is the engine's contract: vLLM's
 * /health has no push. The wait doubles from `healthPollFirstMs` up to `maxPollMs`.
 */
export async function waitHealthy(
  url: string,
  path: string,
  deadlineMs: number,
  died: Promise<unknown>,
  maxPollMs: number = P.healthPollMaxMs,
  signal?: AbortSignal,
): Promise<void> {
  const until = Date.now() + deadlineMs;
  let delay: number = P.healthPollFirstMs;
  let dead = false;
  void died.then(() => {
    dead = true;
  });
  while (Date.now() < until) {
    cancelled(signal, url);
    if (dead) throw new UnavailableError('worker_exited', `worker at ${url} exited before it became healthy`);
    if (await answersHealth(url, path)) return;
    await pause(delay, signal);
    delay = Math.min(maxPollMs, delay * 2);
  }
  throw new UnavailableError('worker_start_timeout', `worker at ${url} did not become healthy within ${deadlineMs} ms`);
}

/** Throw `worker_start_cancelled` when `signal` was aborted (a start cut short by a shutdown). */
export function cancelled(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw new UnavailableError('worker_start_cancelled', `the start of the worker at ${what} was cancelled: Glidepath is shutting down`);
}

/** Wait `ms`, or less when `signal` is aborted meanwhile. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
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
