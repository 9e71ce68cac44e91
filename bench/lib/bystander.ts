// bench:hostile's observer: a worker thread (so the hostile client's work never delays it) that samples
// the gateway's RSS and keeps a bystander's requests going (GET /health, and a small chat completion)
// on their own keep-alive connections, timing each one.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Client } from 'undici';

/** Bystander pacing: GET /health every ~10 ms on its own keep-alive connection; a small chat every ~100 ms on another. */
export const HEALTH_EVERY_MS = 10;
export const CHAT_EVERY_MS = 100;
export const RSS_EVERY_MS = 50;
/** A bystander request in flight when its scenario ends may take this long before it is counted as unanswered. */
export const STOP_GRACE_MS = 1_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface ObserverOptions {
  port: number;
  /** The model the bystander's chat completions ask for. */
  model: string;
  pid: number;
  chat: boolean;
  boundMs: number;
}

export interface Sample {
  /** Absolute ms (performance.timeOrigin + now): comparable across threads. */
  at: number;
  ms: number;
  ok: boolean;
  /** Still waiting when the observer stopped: `ms` is a lower bound. */
  cut?: boolean;
}

export interface Observation {
  rss: { at: number; kb: number }[];
  health: Sample[];
  chat: Sample[];
}

/** Absolute ms (performance.timeOrigin + now): comparable across threads. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function observe(o: ObserverOptions, stopped: Promise<void>, ready: () => void): Promise<Observation> {
  const out: Observation = { rss: [], health: [], chat: [] };
  let stop = false;
  const until = now() + o.boundMs;
  const done = Promise.race([stopped, new Promise<void>((r) => setTimeout(r, o.boundMs).unref())]).then(() => {
    stop = true;
  });
  const sampler = setInterval(() => {
    try {
      out.rss.push({ at: now(), kb: rssKb(o.pid) });
    } catch {
      // the process has gone
    }
  }, RSS_EVERY_MS);
  const origin = `http://127.0.0.1:${o.port}`;
  const chatBody = JSON.stringify({ model: o.model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 });
  const loop = async (into: Sample[], every: number, send: (c: Client) => Promise<number>): Promise<void> => {
    const client = new Client(origin, { keepAliveTimeout: 120_000, pipelining: 1 });
    let pending: { at: number } | null = null;
    const run = async (): Promise<void> => {
      while (!stop && now() < until) {
        const t0 = now();
        pending = { at: t0 };
        let ok = false;
        try {
          ok = (await send(client)) === 200;
        } catch {
          ok = false;
        }
        pending = null;
        const t1 = now();
        into.push({ at: t0, ms: t1 - t0, ok });
        if (stop) break;
        const wait = t0 + every - t1;
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    };
    const running = run();
    await Promise.race([running, done]);
    // a request in flight when the scenario ends gets a moment to finish; one still waiting after it is counted as cut
    await Promise.race([running, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
    const p = pending as { at: number } | null;
    if (p !== null) into.push({ at: p.at, ms: now() - p.at, ok: false, cut: true });
    await client.destroy();
  };
  const health = loop(out.health, HEALTH_EVERY_MS, async (c) => {
    const r = await c.request({ path: '/health', method: 'GET' });
    await r.body.dump();
    if (out.health.length === 0) ready();
    return r.statusCode;
  });
  const chat = o.chat
    ? loop(out.chat, CHAT_EVERY_MS, async (c) => {
        const r = await c.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody });
        await r.body.dump();
        return r.statusCode;
      })
    : Promise.resolve();
  await Promise.all([health, chat]);
  clearInterval(sampler);
  return out;
}

if (!isMainThread) {
  const port = parentPort!;
  const stopped = new Promise<void>((r) => port.once('message', () => r()));
  void observe(workerData as ObserverOptions, stopped, () => port.postMessage('ready')).then((o) => port.postMessage(o));
}

/**
 * Start the observer thread and resolve once its bystander has had a first answer (a thread takes a
 * few hundred ms to load on a busy machine: the quiet phase starts after that); `stop()` resolves
 * with what it saw.
 */
export async function startObserver(o: ObserverOptions): Promise<{ stop(): Promise<Observation> }> {
  const w = new Worker(fileURLToPath(import.meta.url), { workerData: o });
  let ready: () => void = () => {};
  const isReady = new Promise<void>((r) => (ready = r));
  const result = new Promise<Observation>((resolve, reject) => {
    w.on('message', (m: Observation | 'ready') => (m === 'ready' ? ready() : resolve(m)));
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`observer exited (${code}) without a result`)));
  });
  await Promise.race([isReady, result, sleep(10_000)]);
  return {
    async stop() {
      w.postMessage('stop');
      const r = await result;
      await w.terminate();
      return r;
    },
  };
}
