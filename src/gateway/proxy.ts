// One client request's trip to a worker: dispatch over the upstream pool, retry before the first byte, stream
// through without buffering, enforce timeouts, honour disconnects and drains, and record the result.
// performance.now() is the global one (not node:perf_hooks'), so fake timers in tests can move it too
import type { Abortable, VersionPool, Worker } from './pool.js';
import { recordOf } from './proxy-context.js';
import type { Attempted, ProxyContext } from './proxy-context.js';
import type { ParsedRequest } from './request.js';
import { SseMeter, sseErrorEvent } from './sse.js';
import { UnavailableError, UpstreamError } from '../errors.js';
import type { ErrorCode, GlidepathError } from '../errors.js';
import { sendError } from './respond.js';
import type { FrontResponse } from './front.js';
import { ConnectError, LocalResourceError, WorkerQueueError } from './upstream.js';
import type { UpstreamController, UpstreamHandler } from './upstream.js';
import { ResponseCapture } from './tap.js';
import type { ResponseTap } from './tap.js';
import { DEFAULTS } from '../defaults.js';
import { AbortReason, abortError, errText, localResourceError, queueError } from './upstream-failure.js';
import type { AbortKind, FailedRequest } from './upstream-failure.js';

export type { ProxyContext } from './proxy-context.js';

type Phase = 'waiting' | 'retrying' | 'streaming' | 'buffering';

export class ProxyRequest implements UpstreamHandler, Abortable, Attempted {
  // read by recordOf (Attempted); written only here
  worker: Worker | undefined;
  private tried: Set<Worker> | undefined;
  attempts = 0;
  private controller: UpstreamController | undefined;
  private phase: Phase = 'waiting';
  private status = 0;
  private contentType: string | undefined;
  private chunks: Buffer[] = [];
  /** Bytes in `chunks` (the bound on buffered answers is checked without re-summing). */
  private buffered = 0;
  meter: SseMeter | undefined;
  /**
   * The request's one timer. It is not moved per chunk: it fires at the earliest moment a deadline
   * could have passed (never later than the idle limit from when it was set) and then checks the
   * real one — first token by `firstDeadline`, idle by `lastDataAt` — setting itself again for
   * what is left.
   */
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() by which the first byte must come (this attempt). */
  private firstDeadline = 0;
  /** performance.now() of the last bytes from the worker (or of the client draining its buffer). */
  private lastDataAt = 0;
  private gotFirstByte = false;
  /** ms waited for a connection to a worker, all attempts together. */
  queueMs = 0;
  private clientStarted = false;
  private abortKind: AbortKind | undefined;
  private lastError: GlidepathError | undefined;
  private finished = false;
  /** True while `worker.outstanding` counts this request. */
  private holding = false;
  /** Sampled for quality judging: a copy of the response bytes (undefined when not sampled). */
  private capture: ResponseCapture | undefined;

  constructor(
    private readonly ctx: ProxyContext,
    readonly pool: VersionPool,
    private readonly res: FrontResponse,
    readonly req: ParsedRequest,
    private readonly path: string,
    /** performance.now() and Date.now() when the client's request arrived. */
    readonly startedAt: number,
    readonly at: number,
  ) {}

  /** Copy this request's response to a tap (quality judging); `pairId` joins it with a shadow answer. */
  captureTo(tap: ResponseTap, pairId: number | undefined): this {
    this.capture = new ResponseCapture(tap, pairId);
    return this;
  }

  start(): void {
    this.pool.enter(this);
    this.res.onClose(() => {
      // a client that took nothing for the send timeout is cut off by the front: the worker goes free
      if (!this.finished) this.abort(this.res.sendTimedOut ? 'send_timeout' : 'client');
    });
    this.attempt();
  }

  /** Abortable: the pool's drain timed out with this request still running. */
  abortForDrain(): void {
    this.abort('drain');
  }

  /** Abortable: its worker was taken out of rotation; before the first byte the request moves to another worker. */
  takeOff(w: Worker): boolean {
    if (this.finished || this.worker !== w || !this.holding) return false;
    this.abort('unhealthy');
    return true;
  }

  /** This attempt on the worker ended in an error (the passive health signal; src/health/passive.ts decides which codes are the worker's fault). */
  private blame(code: ErrorCode): void {
    const w = this.worker;
    if (w !== undefined) this.ctx.telemetry.workerFault(this.pool.model, this.pool.version, w.id, code);
  }

  private abort(kind: AbortKind): void {
    if (this.finished || this.abortKind !== undefined) return;
    this.abortKind = kind;
    // before the pool starts the request, onRequestStart sees the flag and aborts it there
    if (this.controller && !this.controller.aborted) this.controller.abort(new AbortReason(kind));
  }

  /** What a failure of this request is about (for the errors that describe it). */
  private get failed(): FailedRequest {
    return { cfg: this.ctx.cfg, model: this.pool.model, version: this.pool.version, workerId: this.worker?.id ?? '?', stream: this.req.stream };
  }

  private abortError(kind: AbortKind): GlidepathError {
    return abortError(kind, this.failed);
  }

  private attempt(): void {
    const now = Date.now();
    const w = this.ctx.picker.pick(this.pool.candidates, now, this.tried);
    if (w === undefined) {
      const err =
        this.lastError ??
        new UnavailableError('no_healthy_workers', `no healthy worker for ${this.pool.model} version ${this.pool.version}`, {
          retryAfterS: DEFAULTS.gateway.retryAfterS,
        });
      if (err.code === 'worker_queue_full') this.ctx.metrics.queueRejected.labels(this.pool.model, this.pool.version, 'full').inc();
      this.fail(err);
      return;
    }
    this.worker = w;
    this.attempts++;
    w.outstanding++;
    this.holding = true;
    this.phase = 'waiting';
    this.status = 0;
    this.gotFirstByte = false;
    this.controller = undefined;
    // the first-token deadline starts in onRequestSent: time waiting for a connection is not the worker's
    w.upstream.dispatch(this.path, this.req.stream, this.req.raw, this);
  }

  /** (Re)start the timer, `ms` from now at most the idle limit (see `timer`). */
  private setTimer(ms: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    const idle = this.ctx.cfg.idleTimeoutMs;
    this.timer = setTimeout(this.onTimer, ms < idle ? ms : idle);
  }

  private stopTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    if (this.finished) return;
    const first = !this.gotFirstByte;
    const left = (first ? this.firstDeadline : this.lastDataAt + this.ctx.cfg.idleTimeoutMs) - performance.now();
    // timers run on the loop's millisecond clock: less than a millisecond early is on time
    if (left >= 1) this.setTimer(Math.ceil(left));
    else this.abort(first ? 'first_token_timeout' : 'idle_timeout');
  };

  private releaseWorker(): void {
    if (this.holding && this.worker) {
      this.worker.outstanding--;
      this.holding = false;
    }
  }

  /** Retry on another worker of the same pool if nothing reached the client and budget remains. */
  private retryOrFail(err: GlidepathError): void {
    this.blame(err.code);
    this.releaseWorker();
    this.lastError = err;
    if (!this.clientStarted && this.res.destroyed) {
      // the client left while another abort (a timeout) was pending, which hid its own: nobody
      // is waiting for a retry
      this.finishStream(499, 'client_closed');
      return;
    }
    if (!this.clientStarted && this.abortKind === undefined && this.attempts <= this.ctx.cfg.maxRetries) {
      (this.tried ??= new Set()).add(this.worker as Worker);
      this.pool.telemetry.metrics.retries.inc();
      this.attempt();
      return;
    }
    this.fail(err);
  }

  // ---- upstream handler --------------------------------------------------------------------

  onRequestStart(controller: UpstreamController): void {
    this.controller = controller;
    if (this.abortKind !== undefined) controller.abort(new AbortReason(this.abortKind));
  }

  onRequestSent(queuedMs: number): void {
    const cfg = this.ctx.cfg;
    const ms = this.req.stream ? cfg.firstTokenTimeoutMs : cfg.requestTimeoutMs;
    this.firstDeadline = performance.now() + ms;
    this.setTimer(ms);
    if (queuedMs > 0) this.waited(queuedMs);
  }

  private waited(ms: number): void {
    this.queueMs += ms;
    this.pool.telemetry.metrics.queueTime.observe(ms / 1000);
  }

  onResponseStart(_c: UpstreamController, statusCode: number, contentType: string | undefined): void {
    this.status = statusCode;
    this.contentType = contentType;
    if (statusCode === 200 && this.req.stream) {
      this.phase = 'streaming';
      this.meter = SseMeter.forPath(this.path);
    } else {
      this.phase = statusCode >= 500 ? 'retrying' : 'buffering';
      this.chunks = [];
      this.buffered = 0;
    }
  }

  onResponseData(controller: UpstreamController, chunk: Buffer): void {
    const now = performance.now();
    this.gotFirstByte = true;
    this.lastDataAt = now;
    if (this.phase === 'streaming') {
      if (!this.meterChunk(chunk, now)) {
        // finished first (meterChunk): the pool calls onResponseError synchronously from abort(),
        // which would otherwise record the generic upstream_stream_broken instead
        controller.abort(new Error('malformed'));
        return;
      }
      const res = this.res;
      this.startStream();
      if (!res.write(chunk)) {
        controller.pause();
        // the client is slow, not the worker: no idle timeout while we hold the worker back
        this.stopTimer();
        res.onceDrain(() => {
          if (this.finished) return;
          this.lastDataAt = performance.now();
          this.setTimer(this.ctx.cfg.idleTimeoutMs);
          controller.resume();
        });
      }
    } else if (!this.buffer(chunk)) {
      controller.abort(new Error('too large'));
    }
  }

  /** Keep a piece of a buffered answer; false (and the request failed) past the bound. */
  private buffer(chunk: Buffer): boolean {
    this.chunks.push(Buffer.from(chunk)); // borrowed from the pool's read buffer
    this.buffered += chunk.length;
    // bounded: a worker answer larger than the request limit × 16 is garbage
    if (this.buffered <= this.ctx.cfg.maxBodyBytes * 16) return true;
    // a garbage answer is not retried elsewhere (it would cost another worker the same)
    this.chunks = [];
    this.blame('upstream_response_too_large');
    this.fail(new UpstreamError('upstream_response_too_large', `worker ${this.worker?.id ?? '?'} answered more than ${this.ctx.cfg.maxBodyBytes * 16} bytes`));
    return false;
  }

  onResponseEnd(tail?: Buffer): void {
    this.stopTimer();
    const w = this.worker as Worker;
    w.succeeded();
    if (this.phase === 'streaming') {
      this.releaseWorker();
      this.endStream(w, tail);
      return;
    }
    // an answer that came in one read (the common case) is used where it lies, in the pool's read
    // buffer: the front copies it into the client frame
    let body: Buffer;
    if (this.chunks.length === 0) body = tail ?? Buffer.alloc(0);
    else {
      if (tail !== undefined && !this.buffer(tail)) return;
      body = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
      this.chunks = [];
    }
    if (this.phase === 'retrying') {
      const err = new UpstreamError('upstream_error', `worker ${w.id} answered ${this.status}`, { details: { status: this.status } });
      if (!this.clientStarted && this.attempts <= this.ctx.cfg.maxRetries && this.abortKind === undefined) {
        this.retryOrFail(err);
        return;
      }
      // out of retries: pass the worker's own 5xx answer through
      this.blame('upstream_error');
      this.releaseWorker();
      this.sendBuffered(this.status, body);
      this.finish(this.status, 'upstream_error', NaN, 0, 0);
      return;
    }
    this.releaseWorker();
    // buffered (non-streaming or 4xx)
    if (this.status === 200) {
      let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
      try {
        usage = (JSON.parse(body.toString('utf8')) as { usage?: typeof usage }).usage;
      } catch {
        this.blame('upstream_invalid_json');
        this.fail(new UpstreamError('upstream_invalid_json', `worker ${w.id} answered 200 with a body that is not valid JSON`));
        return;
      }
      this.sendBuffered(200, body);
      if (this.capture !== undefined) this.capture.push(body);
      const latency = performance.now() - this.startedAt;
      this.finish(200, undefined, latency, usage?.prompt_tokens ?? 0, usage?.completion_tokens ?? 0);
      return;
    }
    // 4xx: the client's problem; never retried and never counted against the worker
    this.sendBuffered(this.status, body);
    this.finish(this.status, 'upstream_client_error', NaN, 0, 0);
  }

  onResponseError(_c: UpstreamController, err: Error): void {
    this.stopTimer();
    if (this.finished) return;
    const kind = err instanceof AbortReason ? err.kind : this.abortKind;
    if (kind === 'client' || kind === 'send_timeout') {
      this.releaseWorker();
      this.finishStream(499, kind === 'client' ? 'client_closed' : 'client_send_timeout');
      return;
    }
    if (kind === 'drain') {
      this.releaseWorker();
      this.ctx.metrics.drainAborted.labels(this.pool.model, this.pool.version).inc();
      if (this.clientStarted) this.streamBroken(this.abortError('drain'));
      else this.fail(this.abortError('drain'));
      return;
    }
    if (this.clientStarted) {
      this.releaseWorker();
      this.streamBroken(
        kind === 'idle_timeout' || kind === 'unhealthy'
          ? this.abortError(kind)
          : new UpstreamError('upstream_stream_broken', `worker ${this.worker?.id ?? '?'} dropped the stream: ${errText(err)}`),
      );
      return;
    }
    if (kind === 'first_token_timeout' || kind === 'idle_timeout' || kind === 'unhealthy') {
      // a hung or unhealthy worker: try another (the abort flag is cleared so the retry can run)
      this.abortKind = undefined;
      this.retryOrFail(this.abortError(kind));
      return;
    }
    if (err instanceof WorkerQueueError) {
      this.queueRefused(err);
      return;
    }
    if (err instanceof LocalResourceError) {
      this.releaseWorker();
      this.fail(localResourceError(err, this.failed, this.ctx.metrics, this.ctx.onLocalResourceError));
      return;
    }
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const w = this.worker as Worker;
    if (err instanceof ConnectError || (code === 'ECONNRESET' && this.status === 0)) {
      const ms = w.eject(Date.now(), this.ctx.cfg.ejectBaseMs, this.ctx.cfg.ejectMaxMs);
      this.ctx.metrics.ejections.labels(this.pool.model, this.pool.version, w.id).inc();
      // connected, then closed before a response head: the worker took the request and dropped it (crashed, stopped), it did not refuse a connection
      const what =
        err instanceof ConnectError
          ? `could not connect to worker ${w.id} (${code})`
          : `worker ${w.id} dropped the request: it closed the connection before answering (${code})`;
      this.retryOrFail(new UpstreamError('upstream_connect_failed', `${what}; ejected for ${ms} ms`));
      return;
    }
    this.retryOrFail(new UpstreamError('upstream_closed', `worker ${w.id} failed ${this.status === 0 ? 'before answering' : 'mid-response'}: ${errText(err)}`));
  }

  /**
   * The worker's queue refused the request or it waited there too long. Neither is a failure of the
   * worker (no ejection) nor a hang (no retry as one): a full queue sends it to another worker of
   * the pool that has room, without spending a retry; a timed-out wait is answered 503.
   */
  private queueRefused(err: WorkerQueueError): void {
    const w = this.worker as Worker;
    this.releaseWorker();
    const e = queueError(err, this.failed);
    if (err.reason === 'full') {
      (this.tried ??= new Set()).add(w);
      this.attempts--;
      // reported only when no other worker can take the request either (see attempt)
      this.lastError = e;
      this.attempt();
      return;
    }
    this.waited(err.queuedMs);
    this.ctx.metrics.queueRejected.labels(this.pool.model, this.pool.version, 'timeout').inc();
    this.fail(e);
  }

  // ---- endings ----------------------------------------------------------------------------

  /** Measure a piece of the stream (and copy it when sampled); a malformed event ends the stream and returns false. */
  private meterChunk(chunk: Buffer, now: number): boolean {
    const meter = this.meter as SseMeter;
    if (!meter.feed(chunk, now)) {
      this.streamBroken(new UpstreamError('upstream_malformed_stream', `worker ${this.worker?.id ?? '?'} sent ${meter.malformed ?? 'a malformed event'}`));
      return false;
    }
    if (this.capture !== undefined) this.capture.push(chunk);
    return true;
  }

  /** The worker finished its stream; `tail` (its last bytes, if they came with the end) goes out with the end: one write. */
  private endStream(w: Worker, tail: Buffer | undefined): void {
    if (tail !== undefined && !this.meterChunk(tail, performance.now())) return;
    this.startStream(); // an empty 200 stream still answers the client
    if (!(this.meter as SseMeter).done) {
      if (tail !== undefined) this.res.write(tail);
      this.streamBroken(new UpstreamError('upstream_truncated', `worker ${w.id} ended the stream without [DONE]`));
      return;
    }
    this.res.end(tail);
    this.finishStream(200, undefined);
  }

  /** Send the stream's headers once, when its first bytes (or its end) reach the client. */
  private startStream(): void {
    if (this.clientStarted) return;
    this.clientStarted = true;
    this.res.writeHead(200, (this.worker as Worker).streamHeaders(this.contentType ?? 'text/event-stream'));
  }

  private sendBuffered(status: number, body: Buffer): void {
    if (this.res.destroyed) return;
    const w = this.worker as Worker;
    this.clientStarted = true;
    this.res.writeHead(status, {
      'content-type': this.contentType ?? 'application/json',
      'content-length': body.length,
      'x-glidepath-version': w.headers.version,
      'x-glidepath-worker': w.headers.worker,
    });
    this.res.end(body);
  }

  /** A stream that already reached the client broke: tell it in-band and end cleanly. */
  private streamBroken(err: GlidepathError): void {
    if (this.finished) return;
    this.blame(err.code);
    if (!this.res.destroyed) {
      this.startStream();
      this.res.end(sseErrorEvent(err.message, err.code));
    }
    this.finishStream(200, err.code);
  }

  private fail(err: GlidepathError): void {
    if (this.finished) return;
    this.stopTimer();
    if (!this.clientStarted && !this.res.destroyed) {
      const extra: Record<string, string> = {};
      if (this.worker) {
        extra['x-glidepath-version'] = this.worker.headers.version;
        extra['x-glidepath-worker'] = this.worker.headers.worker;
      }
      sendError(this.res, err, extra);
    }
    this.finish(err.status, err.code, NaN, 0, 0);
  }

  private finishStream(status: number, errorCode: ErrorCode | undefined): void {
    const m = this.meter;
    const latency = performance.now() - this.startedAt;
    this.finish(status, errorCode, latency, m ? m.promptTokens() : 0, m ? m.completionTokens() : 0);
  }

  private finish(status: number, errorCode: ErrorCode | undefined, latencyMs: number, promptTokens: number, completionTokens: number): void {
    if (this.finished) return;
    this.finished = true;
    this.stopTimer();
    this.releaseWorker();
    this.pool.leave(this);
    const latency = latencyMs === latencyMs ? latencyMs : performance.now() - this.startedAt;
    this.ctx.telemetry.record(this.pool.telemetry, recordOf(this, status, errorCode, latency, promptTokens, completionTokens));
    this.capture?.deliver(this.pool.model, this.pool.version, this.req, status, status === 200 && errorCode === undefined, latency);
    this.capture = undefined;
  }
}
