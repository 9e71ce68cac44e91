// What goes back to the client of one proxied request: a stream's headers once, its whole events with
// back-pressure (kept for a resumption), its error in-band; or a buffered answer with its headers.
import type { UpstreamController } from './upstream.js';
import type { FrontResponse } from './front.js';
import type { Migration } from './migration.js';
import type { Worker } from './pool.js';
import type { RequestTimer } from './request-timer.js';
import { sseErrorEvent } from './sse.js';
import { sendError } from './respond.js';
import type { GlidepathError } from '../errors.js';

/** The request a downstream belongs to: whether a worker's controller is still the one it streams from. */
export interface StreamOwner {
  isCurrent(c: UpstreamController): boolean;
}

export class Downstream {
  /** Headers (and maybe bytes) reached the client: nothing is retried from scratch after this. */
  started = false;
  /** A stream's resumption state (what it sent; its migrations), from its first bytes when resumption is on. */
  migration: Migration | undefined;
  /** Disaggregated serving: the worker that prefilled the prompt (named in a header beside the decode worker). */
  prefill: Worker | undefined;

  constructor(
    readonly res: FrontResponse,
    private readonly timer: RequestTimer,
    private readonly owner: StreamOwner,
  ) {}

  /** Send the stream's headers once, when its first bytes (or its end) reach the client; `resume` makes its migration state (resumption on). */
  startStream(w: Worker, contentType: string | undefined, resume: (() => Migration) | undefined): void {
    if (this.started) return;
    this.started = true;
    if (resume !== undefined) this.migration = resume();
    const h = w.streamHeaders(contentType ?? 'text/event-stream');
    this.res.writeHead(200, this.prefill === undefined ? h : { ...h, 'x-glidepath-prefill-worker': this.prefill.headers.worker });
  }

  /** Send whole events (keeping them for a resumption), holding the worker back while the client is slow. */
  forward(controller: UpstreamController, out: Buffer): void {
    this.migration?.log.append(out);
    const res = this.res;
    if (!res.write(out)) {
      controller.pause();
      // the client is slow, not the worker: no idle timeout while we hold the worker back
      this.timer.stop();
      res.onceDrain(() => {
        // (a controller the stream has since left, its worker having broken, stays paused)
        if (!this.owner.isCurrent(controller)) return;
        this.timer.resumeIdle();
        controller.resume();
      });
    }
  }

  /** Write what a stream's worker sent before it ended badly (kept for the resumption that may follow). */
  writeLast(out: Buffer | undefined): void {
    if (out === undefined || out.length === 0) return;
    this.migration?.log.append(out);
    this.res.write(out);
  }

  /** End a broken stream (its headers sent) with its error as an SSE event (`notResumed`: why it was not continued). */
  endBroken(err: GlidepathError, notResumed?: string): void {
    this.migration?.failed();
    if (this.res.destroyed) return;
    const why = notResumed === undefined || this.migration === undefined ? '' : ` (not resumed: ${notResumed})`;
    this.res.end(sseErrorEvent(err.message + why, err.code));
  }

  /** The gateway's own error answer, before anything was sent, naming the worker that was tried (if any). */
  sendError(err: GlidepathError, w: Worker | undefined): void {
    if (this.started || this.res.destroyed) return;
    sendError(this.res, err, w === undefined ? {} : { 'x-glidepath-version': w.headers.version, 'x-glidepath-worker': w.headers.worker });
  }

  /** A whole answer (non-streaming, or an error status), with its headers. */
  sendAnswer(w: Worker, status: number, contentType: string | undefined, body: Buffer): void {
    if (this.res.destroyed) return;
    this.started = true;
    this.res.writeHead(status, {
      'content-type': contentType ?? 'application/json',
      'content-length': body.length,
      'x-glidepath-version': w.headers.version,
      'x-glidepath-worker': w.headers.worker,
      ...(this.prefill === undefined ? {} : { 'x-glidepath-prefill-worker': this.prefill.headers.worker }),
    });
    this.res.end(body);
  }
}
