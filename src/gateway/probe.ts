// A health probe's trip to one worker: over the same keep-alive connections as traffic (so a
// broken path from the gateway to the worker fails the probe too), never counted as traffic (no
// record, no window, no load on the picker), bounded in time and in bytes. Its time limit starts
// when the request is written, as a request's first-token limit does: a probe that waited for a
// connection to a saturated worker, or was refused by its full queue, says nothing about the
// worker's health — `inconclusive`, never a failure.
import { performance } from 'node:perf_hooks';
import type { Worker } from './pool.js';
import { LocalResourceError, WorkerQueueError } from './upstream.js';
import type { UpstreamController, UpstreamHandler } from './upstream.js';

export type ProbeOutcome =
  | { kind: 'answer'; status: number; body: string; ms: number }
  | { kind: 'failed'; timeout: boolean; message: string; ms: number }
  /** The worker is saturated (its connections busy and its queue full, or the wait too long), or the gateway is short of resources. */
  | { kind: 'inconclusive'; message: string; ms: number };

class ProbeExchange implements UpstreamHandler {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private status = 0;
  private timer: NodeJS.Timeout | undefined;
  private t0 = performance.now();
  private controller: UpstreamController | undefined;

  constructor(
    private readonly timeoutMs: number,
    private readonly maxBytes: number,
    private readonly done: (o: ProbeOutcome) => void,
  ) {}

  onRequestStart(c: UpstreamController): void {
    this.controller = c;
  }

  onRequestSent(): void {
    // from the write on, as a request's first-token limit: a wait for a busy worker's connection is load, not ill health
    this.t0 = performance.now();
    const c = this.controller as UpstreamController;
    this.timer = setTimeout(() => c.abort(new ProbeTimeout(this.timeoutMs)), this.timeoutMs);
    this.timer.unref();
  }

  onResponseStart(_c: UpstreamController, status: number): void {
    this.status = status;
  }

  onResponseData(c: UpstreamController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      c.abort(new Error(`answered more than ${this.maxBytes} bytes`));
      return;
    }
    this.chunks.push(Buffer.from(chunk)); // borrowed from the pool's read buffer
  }

  onResponseEnd(tail?: Buffer): void {
    clearTimeout(this.timer);
    if (tail !== undefined) this.chunks.push(Buffer.from(tail));
    this.done({ kind: 'answer', status: this.status, body: Buffer.concat(this.chunks).toString('utf8'), ms: performance.now() - this.t0 });
  }

  onResponseError(_c: UpstreamController, err: Error): void {
    clearTimeout(this.timer);
    const ms = performance.now() - this.t0;
    if (err instanceof WorkerQueueError || err instanceof LocalResourceError) this.done({ kind: 'inconclusive', message: err.message, ms });
    else this.done({ kind: 'failed', timeout: err instanceof ProbeTimeout, message: err.message, ms });
  }
}

class ProbeTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
  }
}

/** POST `body` to `path` on the worker and read the whole answer; never rejects. */
export function sendProbe(w: Worker, path: string, body: unknown, timeoutMs: number, maxBytes: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    w.upstream.dispatch(path, false, Buffer.from(JSON.stringify(body)), new ProbeExchange(timeoutMs, maxBytes, resolve));
  });
}
