// Shadow traffic: mirror a request to another version; its answer never reaches the client and
// its latency never adds to the client's. Measured like any request (flagged `shadow`).
import { performance } from 'node:perf_hooks';
import type { ErrorCode } from '../errors.js';
import type { ProxyContext } from './proxy.js';
import type { VersionPool, Worker } from './pool.js';
import type { ParsedRequest } from './request.js';
import { SseMeter } from './sse.js';
import { deliver, KeptBody } from './tap.js';
import type { ResponseTap } from './tap.js';
import { LocalResourceError, WorkerQueueError } from './upstream.js';
import { MAX_LANES } from './upstream-queue.js';
import type { UpstreamController, UpstreamHandler } from './upstream.js';
import { localResourceError, queueError } from './upstream-failure.js';
import type { FailedRequest } from './upstream-failure.js';

/**
 * Mirror `req` to a worker of `pool`. `startedAt`/`at` are the client request's arrival, so the
 * shadow's latencies include the same gateway time as the client's and the two compare fairly.
 */
export function mirror(
  ctx: ProxyContext,
  pool: VersionPool,
  req: ParsedRequest,
  path: string,
  tap: ResponseTap | undefined,
  pairId: number | undefined,
  startedAt: number,
  at: number,
): void {
  const w = ctx.picker.pick(pool.candidates, Date.now());
  if (w === undefined) return;
  const s = new ShadowRequest(ctx, pool, w, req, path, tap, pairId, startedAt, at);
  w.outstanding++;
  w.upstream.dispatch(path, req.stream, req.raw, s);
}

/** One mirrored request: measured, recorded, and its answer (bounded) delivered to the tap. */
class ShadowRequest implements UpstreamHandler {
  private readonly meter: SseMeter | undefined;
  private status = 0;
  /** The answer, for the tap, and for a non-streaming answer's usage: nothing kept when neither needs it. */
  private readonly body: KeptBody | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ctl: UpstreamController | undefined;
  private timedOut = false;
  private queueMs = 0;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly pool: VersionPool,
    private readonly w: Worker,
    private readonly req: ParsedRequest,
    path: string,
    private readonly tap: ResponseTap | undefined,
    private readonly pairId: number | undefined,
    private readonly startedAt: number,
    private readonly at: number,
  ) {
    this.meter = req.stream ? SseMeter.forPath(path) : undefined;
    this.body = tap !== undefined || !req.stream ? new KeptBody(ctx.cfg.captureMaxBytes) : undefined;
  }

  /** Mirrored traffic waits last for a worker, behind every tier (and may use only the slots a degraded level shares out). */
  priority(): number {
    return MAX_LANES - 1;
  }

  arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.ctl?.abort(new Error(`no answer within ${ms} ms`));
    }, ms);
  }

  onRequestStart(c: UpstreamController): void {
    this.ctl = c;
  }

  /** Like the client's request, the first-token limit starts when the worker has the request, not while it waits for a connection. */
  onRequestSent(queuedMs: number): void {
    this.arm(this.ctx.cfg.firstTokenTimeoutMs);
    if (queuedMs > 0) this.waited(queuedMs);
  }

  private waited(ms: number): void {
    this.queueMs += ms;
    this.pool.telemetry.metrics.queueTime.observe(ms / 1000);
  }

  onResponseStart(_c: UpstreamController, status: number): void {
    this.status = status;
    this.arm(this.ctx.cfg.idleTimeoutMs);
  }

  onResponseData(_c: UpstreamController, chunk: Buffer): void {
    this.timer?.refresh();
    this.take(chunk);
  }

  private take(chunk: Buffer): void {
    this.meter?.feed(chunk, performance.now());
    this.body?.push(chunk);
  }

  onResponseEnd(tail?: Buffer): void {
    if (tail !== undefined) this.take(tail);
    const body = this.body?.text();
    let errorCode: ErrorCode | undefined;
    if (this.status >= 500) errorCode = 'upstream_error';
    // (the meter goes on reading past a bad event: a [DONE] after it does not make the stream good)
    else if (this.meter?.workerError !== undefined) errorCode = 'upstream_error';
    else if (this.meter?.malformed !== undefined) errorCode = 'upstream_malformed_stream';
    else if (this.meter && !this.meter.done) errorCode = 'upstream_truncated';
    this.done(this.status, errorCode, body);
  }

  onResponseError(_c: UpstreamController, err: Error): void {
    // refused before reaching the worker: recorded under the same codes as a client's request
    const f: FailedRequest = { cfg: this.ctx.cfg, model: this.pool.model, version: this.pool.version, workerId: this.w.id, stream: this.req.stream };
    if (err instanceof WorkerQueueError) {
      if (err.queuedMs > 0) this.waited(err.queuedMs);
      const e = queueError(err, f);
      this.done(e.status, e.code, e.message);
    } else if (err instanceof LocalResourceError) {
      const e = localResourceError(err, f, this.ctx.metrics, this.ctx.onLocalResourceError, 'a connection for a shadow request');
      this.done(e.status, e.code, e.message);
    } else this.done(this.status || 502, 'upstream_shadow_failed', this.timedOut ? `shadow request timed out: ${err.message}` : err.message);
  }

  /** `body`: the answer (undefined: longer than `capture_max_bytes`, or not kept), or the failure's message. */
  private done(status: number, code: ErrorCode | undefined, body: string | undefined): void {
    if (this.timer) clearTimeout(this.timer);
    this.w.outstanding--;
    const { ctx, pool, meter, req } = this;
    let errorCode = code;
    const latencyMs = performance.now() - this.startedAt;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
    // (a non-streaming answer too long to keep: its token counts are not known)
    if (!meter && status === 200 && errorCode === undefined && body !== undefined) {
      try {
        usage = (JSON.parse(body) as { usage?: typeof usage }).usage;
      } catch {
        errorCode = 'upstream_invalid_json';
      }
    }
    ctx.telemetry.record(pool.telemetry, {
      model: pool.model,
      version: pool.version,
      worker: this.w.id,
      status: errorCode && status < 500 ? 502 : status,
      errorCode,
      stream: req.stream,
      ttftMs: meter ? meter.ttft(this.startedAt) : NaN,
      tpotMs: meter ? meter.tpot() : NaN,
      itlMs: meter ? meter.itl : [],
      latencyMs,
      promptTokens: meter ? meter.promptTokens() : (usage?.prompt_tokens ?? 0),
      completionTokens: meter ? meter.completionTokens() : (usage?.completion_tokens ?? 0),
      queueMs: this.queueMs,
      at: this.at,
      retries: 0,
      shadow: true,
    });
    if (this.tap === undefined) return;
    if (body === undefined) pool.telemetry.metrics.captureDropped('shadow');
    else deliver(this.tap, { model: pool.model, version: pool.version, pairId: this.pairId, shadow: true, request: req, status, body, latencyMs });
  }
}
