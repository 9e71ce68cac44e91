// A health probe's trip to one worker: over the same keep-alive connections as traffic (so a
// broken path from the gateway to the worker fails the probe too), never counted as traffic (no
// record, no window, no load on the picker), bounded in time and in bytes.
import { performance } from 'node:perf_hooks';
import type { Worker } from './pool.js';
import type { UpstreamController, UpstreamHandler } from './upstream.js';

export type ProbeOutcome = { kind: 'answer'; status: number; body: string; ms: number } | { kind: 'failed'; timeout: boolean; message: string; ms: number };

class ProbeExchange implements UpstreamHandler {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private status = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly t0 = performance.now();

  constructor(
    private readonly timeoutMs: number,
    private readonly maxBytes: number,
    private readonly done: (o: ProbeOutcome) => void,
  ) {}

  onRequestStart(c: UpstreamController): void {
    // the whole probe, from now: waiting for a connection to a saturated worker counts (it is what a request meets)
    this.timer = setTimeout(() => c.abort(new ProbeTimeout(this.timeoutMs)), this.timeoutMs);
    this.timer.unref();
  }

  onRequestSent(): void {}

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
    const timeout = err instanceof ProbeTimeout;
    this.done({ kind: 'failed', timeout, message: err.message, ms: performance.now() - this.t0 });
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
