// Shadow traffic: mirror a request to another version; its answer never reaches the client and
// its latency never adds to the client's. Measured like any request (flagged `shadow`).
import { performance } from 'node:perf_hooks';
import type { ProxyContext } from './proxy.js';
import type { VersionPool, Worker } from './workers.js';
import type { ParsedRequest } from './request.js';
import { SseMeter } from './sse.js';

/** A captured response (sampled client response or shadow answer) for quality judging. */
export interface TappedResponse {
  model: string;
  version: string;
  /** Set on a client response and the shadow answer to the same request: join them on it. */
  pairId: number | undefined;
  shadow: boolean;
  request: ParsedRequest;
  status: number;
  /** Full response body as the worker sent it (SSE text for streams). */
  body: string;
  latencyMs: number;
}

export type TapListener = (r: TappedResponse) => void;

/** Per-model capture settings: `share` of client responses are copied to `listener`. */
export interface ResponseTap {
  share: number;
  listener: TapListener;
}

/** Deliver to a tap; a listener's failure must never affect serving. */
export function deliver(tap: ResponseTap | undefined, r: TappedResponse): void {
  if (tap === undefined) return;
  try {
    tap.listener(r);
  } catch {
    // ignored on purpose
  }
}

/**
 * Mirror `req` to a worker of `pool`. `startedAt`/`at` are the client request's arrival, so the
 * shadow's latencies include the same gateway time as the client's and the two compare fairly.
 */
export function mirror(ctx: ProxyContext, pool: VersionPool, req: ParsedRequest, path: string, tap: ResponseTap | undefined, pairId: number | undefined, startedAt: number, at: number): void {
  const w = ctx.picker.pick(pool.workers, Date.now());
  if (w === undefined) return;
  void run(ctx, pool, w, req, path, tap, pairId, startedAt, at);
}

async function run(ctx: ProxyContext, pool: VersionPool, w: Worker, req: ParsedRequest, path: string, tap: ResponseTap | undefined, pairId: number | undefined, startedAt: number, at: number): Promise<void> {
  const meter = req.stream ? SseMeter.forPath(path) : undefined;
  let status = 0;
  let body = '';
  let errorCode: string | undefined;
  w.outstanding++;
  try {
    const res = await w.dispatcher.request({
      path: w.pathPrefix + path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: req.raw,
      headersTimeout: ctx.cfg.firstTokenTimeoutMs,
      bodyTimeout: ctx.cfg.idleTimeoutMs,
    });
    status = res.statusCode;
    const parts: Buffer[] = [];
    for await (const chunk of res.body) {
      const b = chunk as Buffer;
      meter?.feed(b, performance.now());
      parts.push(b);
    }
    body = Buffer.concat(parts).toString('utf8');
    if (status >= 500) errorCode = 'upstream_error';
    else if (meter && !meter.done) errorCode = 'upstream_truncated';
  } catch (err) {
    status = status || 502;
    errorCode = 'upstream_shadow_failed';
    body = (err as Error).message;
  } finally {
    w.outstanding--;
  }
  const latencyMs = performance.now() - startedAt;
  let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
  if (!meter && status === 200) {
    try {
      usage = (JSON.parse(body) as { usage?: typeof usage }).usage;
    } catch {
      errorCode = 'upstream_invalid_json';
    }
  }
  ctx.telemetry.record(pool.telemetry, {
    model: pool.model,
    version: pool.version,
    worker: w.id,
    status: errorCode && status < 500 ? 502 : status,
    errorCode,
    stream: req.stream,
    ttftMs: meter ? meter.ttft(startedAt) : NaN,
    tpotMs: meter ? meter.tpot() : NaN,
    itlMs: meter ? meter.itl : [],
    latencyMs,
    promptTokens: meter ? meter.promptTokens() : (usage?.prompt_tokens ?? 0),
    completionTokens: meter ? meter.completionTokens() : (usage?.completion_tokens ?? 0),
    at,
    retries: 0,
    shadow: true,
  });
  deliver(tap, { model: pool.model, version: pool.version, pairId, shadow: true, request: req, status, body, latencyMs });
}
