// One client request's trip to a worker: dispatch over the upstream pool, retry before the first byte, stream
// through without buffering, continue a broken stream on another worker, enforce timeouts, honour
// disconnects and drains, and record the result.
import type { Abortable, VersionPool, Worker } from './pool.js';
import { recordOf } from './proxy-context.js';
import type { Attempted, ProxyContext } from './proxy-context.js';
import type { ParsedRequest } from './request.js';
import type { SseMeter } from './sse.js';
import { UnavailableError } from '../errors.js';
import type { ErrorCode, GlidepathError } from '../errors.js';
import type { FrontRequest, FrontResponse } from './front.js';
import type { Admission } from './admission.js';
import type { UpstreamController, WorkerQueueError } from './upstream.js';
import { ResponseCapture } from './tap.js';
import { RequestTimer } from './request-timer.js';
import { BufferedAnswer, judgeAnswer } from './buffered.js';
import { Downstream, ModelRename } from './downstream.js';
import type { ResponseTap } from './tap.js';
import { Attempts } from './attempts.js';
import type { AdapterUse, Sender, Unsent } from './attempts.js';
import * as failures from './upstream-failure.js';
import type { AbortKind, FailedRequest } from './upstream-failure.js';

export type { ProxyContext } from './proxy-context.js';

type Phase = 'waiting' | 'retrying' | 'streaming' | 'buffering';

export class ProxyRequest implements Sender, Abortable, Attempted {
  /** The worker it holds now, those it tried, how many attempts (attempts.ts). */
  private readonly tries: Attempts;
  private controller: UpstreamController | undefined;
  private phase: Phase = 'waiting';
  private status = 0;
  private contentType: string | undefined;
  /** An answer read whole (non-streaming, or an error status); bounded by the request limit × 16. */
  private answer: BufferedAnswer | undefined;
  /** First-byte and idle limits (request-timer.ts); a deadline that passes aborts the attempt. */
  private readonly timer: RequestTimer;
  /** ms waited for a connection to a worker, all attempts together. */
  queueMs = 0;
  private abortKind: AbortKind | undefined;
  /** Attempts whose connect was refused: they never reached their worker and spend no retry (the pool bounds them: a worker is tried once). */
  private unspent = 0;
  private lastError: GlidepathError | undefined;
  private finished = false;
  /** What goes to the worker: the client's body, or a broken stream's continuation. */
  private body: Buffer;
  /** What goes back to the client (downstream.ts): headers once, whole events, the in-band error. */
  private readonly down: Downstream;

  constructor(
    private readonly ctx: ProxyContext,
    readonly pool: VersionPool,
    private readonly res: FrontResponse,
    readonly req: ParsedRequest,
    private readonly path: string,
    /** performance.now() and Date.now() when the client's request arrived. */
    readonly startedAt: number,
    readonly at: number,
    /** The model's tiers: a request that must wait for a worker waits in its tier's lane (undefined: one lane). */
    private readonly admission?: Admission | undefined,
    private readonly front?: FrontRequest | undefined,
    /** A LoRA adapter's request (served by this model's workers under its own name). */
    adapter?: AdapterUse,
  ) {
    this.body = req.raw;
    this.tries = new Attempts(ctx.picker, pool, adapter);
    this.timer = new RequestTimer(ctx.cfg.idleTimeoutMs, (kind) => {
      if (!this.finished) this.abort(kind);
    });
    this.down = new Downstream(res, this.timer, this, ctx, pool, path);
    const a = adapter?.spec;
    this.adapterAs = a?.servedAs;
    // served under another name (an adapter canary's side): the client reads the name it asked for
    if (a !== undefined && a.servedAs !== a.name) this.down.rename = new ModelRename(a.servedAs, a.name);
  }

  /** A LoRA adapter's request: the name the engine serves it under (read by recordOf). */
  readonly adapterAs: string | undefined;

  // read by recordOf (Attempted)
  get meter(): SseMeter | undefined {
    return this.down.meter;
  }

  get worker(): Worker | undefined {
    return this.tries.worker;
  }

  get attempts(): number {
    return this.tries.count;
  }

  /** Copy this request's response to a tap (quality judging); `pairId` joins it with a shadow answer. */
  captureTo(tap: ResponseTap, pairId: number | undefined): this {
    const metrics = this.pool.telemetry.metrics;
    this.down.capture = new ResponseCapture(tap, pairId, this.ctx.cfg.captureMaxBytes, () => metrics.captureDropped('client'));
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

  /** Abortable: its worker was taken out (by health, or removed); before the first byte the request moves to another worker. */
  takeOff(w: Worker, why: 'unhealthy' | 'removed' = 'unhealthy'): boolean {
    if (this.finished || !this.tries.holds(w)) return false;
    this.abort(why);
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
    if (this.controller && !this.controller.aborted) this.controller.abort(new failures.AbortReason(kind));
  }

  /** What a failure of this request is about (for the errors that describe it). */
  private get failed(): FailedRequest {
    return { cfg: this.ctx.cfg, model: this.pool.model, version: this.pool.version, workerId: this.worker?.id ?? '?', stream: this.req.stream };
  }

  private abortError(kind: AbortKind): GlidepathError {
    return failures.abortError(kind, this.failed);
  }

  private attempt(): void {
    const w = this.tries.next(this, this.down.started);
    if (w === undefined) {
      const err = failures.noWorkerLeft(this.lastError, this.failed);
      if (err.code === 'worker_queue_full') this.ctx.metrics.queueRejected.labels(this.pool.model, this.pool.version, 'full').inc();
      if (this.down.started) this.endBroken(err, failures.noWorkerToResume(err));
      else this.fail(err);
      return;
    }
    this.phase = 'waiting';
    this.status = 0;
    this.controller = undefined;
    // the first-token deadline starts in onRequestSent: time waiting for a connection is not the worker's
    const cfg = this.ctx.cfg;
    this.tries.send(w, this.path, this.req.stream, this.body, this, this.req.stream ? cfg.firstTokenTimeoutMs : cfg.requestTimeoutMs);
  }

  /** Sender: the prefill worker whose blocks this attempt pulls (its header). */
  prefilledBy(w: Worker): void {
    this.down.prefill = w;
  }

  /** Sender: the adapter was there or loaded first (its header). */
  adapterLoaded(result: 'hit' | 'miss'): void {
    this.down.adapter = result;
  }

  /** Sender: the attempt's request was not sent (attempts.ts). */
  unsent(u: Unsent): void {
    // an adapter that could not be loaded there: another worker may take the request
    if (u.kind === 'retry') return this.retryOrFail(u.error);
    this.tries.release();
    // the client's request refused by the prefill worker (4xx) gets that answer, as a decode worker's;
    // a continuation whose prefill leg failed ends (its decode worker is not at fault)
    if (u.kind === 'refused' && !this.down.started) this.clientError(u.worker, u.status, 'application/json', u.body);
    else if (this.down.started) this.endBroken(u.error);
    else this.fail(u.error);
  }

  /** Retries remain and nothing stopped the request. */
  private get mayRetry(): boolean {
    return this.abortKind === undefined && this.attempts - this.unspent <= this.ctx.cfg.maxRetries;
  }

  /** Retry on another worker of the same pool if nothing reached the client and budget remains (`unspent`: the attempt never reached its worker). */
  private retryOrFail(err: GlidepathError, unspent = false): void {
    // a continuation whose connect was refused never reached its worker: another takes it as it is,
    // without spending a migration (a worker is tried once: the pool bounds it); any other error of a
    // stream the client has is a break
    const refusedContinuation = unspent && this.down.migration?.awaiting === true;
    if (this.down.started && !refusedContinuation) {
      this.broke(err);
      return;
    }
    this.blame(err.code);
    this.tries.release();
    this.lastError = err;
    if (this.res.destroyed) {
      // the client left while another abort (a timeout) was pending, which hid its own: nobody
      // is waiting for a retry
      this.finishStream(499, 'client_closed');
      return;
    }
    if (unspent) this.unspent++;
    if (refusedContinuation || this.mayRetry) {
      this.tries.exclude();
      this.pool.telemetry.metrics.retries.inc();
      this.attempt();
      return;
    }
    this.fail(err);
  }

  // ---- upstream handler --------------------------------------------------------------------

  onRequestStart(controller: UpstreamController): void {
    this.controller = controller;
    if (this.abortKind !== undefined) controller.abort(new failures.AbortReason(this.abortKind));
  }

  /** Its lane when it must wait for a worker: a broken stream's continuation first, then by tier. */
  priority(): number {
    if (this.down.started) return 0;
    return this.admission !== undefined && this.front !== undefined ? this.admission.lane(this.front) : 1;
  }

  onRequestSent(queuedMs: number): void {
    const cfg = this.ctx.cfg;
    this.timer.startAttempt(this.req.stream ? cfg.firstTokenTimeoutMs : cfg.requestTimeoutMs);
    if (queuedMs > 0) this.waited(queuedMs);
  }

  private waited(ms: number): void {
    this.queueMs += ms;
    this.pool.telemetry.metrics.queueTime.observe(ms / 1000);
  }

  onResponseStart(_c: UpstreamController, statusCode: number, contentType: string | undefined): void {
    this.tries.prefilled();
    this.status = statusCode;
    this.contentType = contentType;
    if (statusCode === 200 && this.req.stream) {
      this.phase = 'streaming';
      // a continuation keeps the stream's meter: its events are measured as they reach the client
      this.down.measure();
    } else {
      // (a continuation refused or failed: its answer is read for the error)
      this.phase = statusCode >= 500 || this.down.started ? 'retrying' : 'buffering';
      this.answer = new BufferedAnswer(this.ctx.cfg.maxBodyBytes * 16);
    }
  }

  onResponseData(controller: UpstreamController, chunk: Buffer): void {
    const now = performance.now();
    if (this.phase === 'streaming') {
      // a stream's deadlines count from its data events (relay tells the timer), an answer's from its bytes
      const r = this.down.relay(controller, this.worker as Worker, this.contentType, chunk, now);
      if (r === 'cut') {
        // the gateway found the stop string (resume.ts): the stream ended there, the worker is stopped
        this.finishStream(200, undefined);
        this.cutOff(controller);
      } else if (r === 'malformed') {
        this.cutOff(controller);
        this.broke(failures.badEvent(this.worker?.id ?? '?', this.down.source));
      }
      return;
    }
    this.timer.data(now);
    if (!(this.answer as BufferedAnswer).push(chunk)) {
      // stopped without hearing of it: a continuation's failure may already have moved to another worker
      this.cutOff(controller);
      this.tooLarge();
    }
  }

  private tooLarge(): void {
    if (!this.down.started) this.blame('upstream_response_too_large'); // (a continuation's is blamed where it breaks)
    this.fail(failures.tooLargeAnswer(this.worker?.id ?? '?', (this.answer as BufferedAnswer).max));
  }

  onResponseEnd(tail?: Buffer): void {
    this.timer.stop();
    const w = this.worker as Worker;
    w.succeeded();
    if (this.phase === 'streaming') {
      this.tries.release();
      this.endStream(w, tail);
      return;
    }
    const body = (this.answer as BufferedAnswer).take(tail);
    if (body === undefined) {
      this.tooLarge();
      return;
    }
    // a 404 for an adapter the gateway had loaded there: the engine lost it (an operator's unload, a
    // restart), not the client's fault: forgotten there (the next request loads it again) and retried
    if (this.status === 404 && this.adapterAs !== undefined && !this.down.started && this.tries.adapterMissing(w, body)) {
      this.retryOrFail(new UnavailableError('adapter_load_failed', `worker ${w.id} did not have the adapter the gateway had loaded there`, { retryAfterS: 1 }));
      return;
    }
    const v = judgeAnswer({
      worker: w.id,
      status: this.status,
      body,
      continuation: this.down.started,
      retrying: this.phase === 'retrying',
      disaggregated: this.pool.disaggregated,
    });
    if (v.kind === 'retry' && this.mayRetry) {
      this.retryOrFail(v.err);
      return;
    }
    this.tries.release();
    switch (v.kind) {
      case 'continuation':
        if (v.resumable) this.broke(v.err);
        else this.endBroken(v.err);
        return;
      case 'retry':
        // out of retries: pass the worker's own 5xx answer through
        this.blame(v.err.code);
        this.down.sendAnswer(w, this.status, this.contentType, body);
        this.finish(this.status, 'upstream_error', NaN, 0, 0);
        return;
      case 'invalid':
        this.blame(v.err.code);
        this.fail(v.err);
        return;
      case 'ok':
        this.down.sendAnswer(w, 200, this.contentType, body);
        this.down.capture?.push(body);
        this.finish(200, undefined, performance.now() - this.startedAt, v.usage.prompt, v.usage.completion);
        return;
      case 'client':
        this.clientError(w, this.status, this.contentType, body);
    }
  }

  /** A 4xx: the client's problem; never retried and never counted against the worker. */
  private clientError(w: Worker, status: number, contentType: string | undefined, body: Buffer): void {
    this.down.sendAnswer(w, status, contentType, body);
    this.finish(status, 'upstream_client_error', NaN, 0, 0);
  }

  onResponseError(_c: UpstreamController, err: Error): void {
    if (this.finished || this.detaching) return;
    this.timer.stop();
    const m = failures.meaningOf(err, this.abortKind);
    switch (m.is) {
      case 'client':
        this.tries.release();
        return this.finishStream(499, m.kind === 'client' ? 'client_closed' : 'client_send_timeout');
      case 'drain':
        this.tries.release();
        this.ctx.metrics.drainAborted.labels(this.pool.model, this.pool.version).inc();
        return this.fail(this.abortError('drain'));
      case 'elsewhere':
        // a hung or unhealthy worker: try another, or continue the stream on another (the abort flag is cleared so that can run)
        this.abortKind = undefined;
        return this.retryOrFail(this.abortError(m.kind));
      case 'queue':
        return this.queueRefused(m.err);
      case 'local':
        this.tries.release();
        return this.fail(failures.localResourceError(m.err, this.failed, this.ctx.metrics, this.ctx.onLocalResourceError));
    }
    const w = this.worker as Worker;
    const refused = failures.connectFailure(err, this.status, w, this.failed, this.ctx.metrics);
    if (refused !== undefined) {
      // a refused connect never reached the worker (one killed and not yet noticed, its replacement not yet
      // listening): trying another does not spend a retry; a worker is tried once, so the pool bounds it
      this.retryOrFail(refused, (err as NodeJS.ErrnoException).code === 'ECONNREFUSED');
      return;
    }
    const e = failures.dropped(w.id, err, this.status, this.down.started);
    if (this.down.started) this.broke(e);
    else this.retryOrFail(e);
  }

  /**
   * The worker's queue refused the request or it waited there too long. Neither is a failure of the
   * worker (no ejection) nor a hang (no retry as one): a full queue sends it to another worker of
   * the pool that has room, without spending a retry; a timed-out wait is answered 503.
   */
  private queueRefused(err: WorkerQueueError): void {
    this.tries.release();
    const e = failures.queueError(err, this.failed);
    if (err.reason !== 'timeout') {
      // full, or its worker removed: another worker of the pool may take it, no retry spent
      if (err.queuedMs > 0) this.waited(err.queuedMs);
      this.tries.exclude(true);
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

  /** Stop the worker's request without hearing of it (onResponseError is called synchronously from abort). */
  private detaching = false;
  private cutOff(c: UpstreamController): void {
    this.detaching = true;
    c.abort(new Error('cut off by the gateway'));
    this.detaching = false;
  }

  /** StreamOwner: the stream still reads from `c` (a drained client resumes only that worker). */
  isCurrent(c: UpstreamController): boolean {
    return !this.finished && this.controller === c;
  }

  /** The worker finished its stream (its last bytes `tail`): the client's ends too, or the stream broke. */
  private endStream(w: Worker, tail: Buffer | undefined): void {
    const r = this.down.endWith(w, this.contentType, tail);
    if (r === 'done') this.finishStream(200, undefined);
    else this.broke(r === 'truncated' ? failures.truncated(w.id) : failures.badEvent(w.id, this.down.source));
  }

  /**
   * A stream that already reached the client broke (its worker is told, as a passive health
   * signal): continue it on another worker of the version, or end it in-band with the error.
   */
  private broke(err: GlidepathError): void {
    if (this.finished) return;
    this.timer.stop();
    this.blame(err.code);
    this.tries.release();
    const m = this.down.migration;
    if (m === undefined || this.res.destroyed) {
      this.endBroken(err);
      return;
    }
    const next = m.next(err, this.req, performance.now());
    if ('refused' in next) {
      this.endBroken(err, next.refused);
      return;
    }
    if ('end' in next) {
      this.res.end(next.end);
      this.finishStream(200, undefined);
      return;
    }
    this.tries.exclude();
    // with no worker left, the client is told of this break
    this.lastError = err;
    this.body = next.body;
    this.abortKind = undefined;
    this.attempt();
  }

  /** End a broken stream with its error as an SSE event (`notResumed`: why it was not continued). */
  private endBroken(err: GlidepathError, notResumed?: string): void {
    if (this.finished) return;
    this.down.startStream(this.worker as Worker, this.contentType);
    this.down.endBroken(err, notResumed);
    this.finishStream(200, err.code);
  }

  private fail(err: GlidepathError): void {
    if (this.finished) return;
    if (this.down.started && this.req.stream) {
      this.broke(err);
      return;
    }
    this.timer.stop();
    this.down.sendError(err, this.worker);
    this.finish(err.status, err.code, NaN, 0, 0);
  }

  private finishStream(status: number, errorCode: ErrorCode | undefined): void {
    const t = this.down.tokens();
    this.finish(status, errorCode, performance.now() - this.startedAt, t.prompt, t.completion);
  }

  private finish(status: number, errorCode: ErrorCode | undefined, latencyMs: number, promptTokens: number, completionTokens: number): void {
    if (this.finished) return;
    this.finished = true;
    this.timer.stop();
    this.down.migration?.log.release();
    this.tries.release();
    this.pool.leave(this);
    const latency = latencyMs === latencyMs ? latencyMs : performance.now() - this.startedAt;
    this.ctx.telemetry.record(this.pool.telemetry, recordOf(this, status, errorCode, latency, promptTokens, completionTokens));
    this.down.capture?.deliver(this.pool.model, this.pool.version, this.req, status, status === 200 && errorCode === undefined, latency, this.adapterAs);
    this.down.capture = undefined;
  }
}
