// ProxyRequest against fake dispatchers and a fake response, on a fake clock: the orderings of
// timers, client hang-ups and upstream callbacks that real sockets make too hard to pin down.
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { ProxyRequest } from '../../../src/gateway/proxy.js';
import type { UpstreamController, UpstreamHandler } from '../../../src/gateway/upstream.js';
import type { ProxyContext } from '../../../src/gateway/proxy.js';
import { parseRequest } from '../../../src/gateway/request.js';
import { VersionPool, Worker } from '../../../src/gateway/workers.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';
import { defaultGatewayConfig } from '../../helpers/gateway.js';

class FakeController implements UpstreamController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  constructor(private readonly handler: UpstreamHandler) {}
  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    // the pool reports the abort through onResponseError
    this.handler.onResponseError(this, reason);
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
}

/** A response that records what was written to it. */
class FakeRes extends EventEmitter {
  destroyed = false;
  sendTimedOut = false;
  headersSent = false;
  status = 0;
  headers: Record<string, unknown> = {};
  body = '';
  ended = false;
  writeHead(status: number, headers: Record<string, unknown>): this {
    this.status = status;
    this.headers = headers;
    this.headersSent = true;
    return this;
  }
  write(chunk: Buffer | string): boolean {
    this.body += chunk.toString();
    return true;
  }
  end(chunk?: Buffer | string): this {
    if (chunk !== undefined) this.body += chunk.toString();
    this.ended = true;
    return this;
  }
  onClose(cb: () => void): void {
    this.once('close', cb);
  }
  onceDrain(cb: () => void): void {
    this.once('drain', cb);
  }
  destroy(): void {
    this.hangUp();
  }
  /** The client hangs up. */
  hangUp(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

interface Harness {
  pr: ProxyRequest;
  res: FakeRes;
  /** Handlers dispatched to each worker, in order. */
  dispatched: { worker: string; handler: UpstreamHandler }[];
  records: RequestRecord[];
  pool: VersionPool;
}

function harness(stream = true): Harness {
  const cfg = defaultGatewayConfig({ firstTokenTimeoutMs: 1000, requestTimeoutMs: 1000, idleTimeoutMs: 500 });
  const telemetry = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
  const records: RequestRecord[] = [];
  telemetry.subscribe((r) => records.push(r));
  const ctx: ProxyContext = { cfg, telemetry, metrics: telemetry.metrics, picker: new RoundRobinPicker() };
  const pool = new VersionPool('m', 'v1', 'card', telemetry.forVersion('m', 'v1'));
  const dispatched: Harness['dispatched'] = [];
  pool.workers = ['w0', 'w1'].map((id) => {
    const w = new Worker({ id, url: 'http://127.0.0.1:9' }, 'v1', { connectTimeoutMs: 1000, connections: 1, keepAliveTimeoutMs: 1000 });
    // nothing goes to the network: the test plays the upstream pool
    Object.defineProperty(w, 'upstream', {
      value: {
        dispatch: (_p: string, _s: boolean, _b: Buffer, handler: UpstreamHandler) => {
          dispatched.push({ worker: id, handler });
          return true;
        },
      },
    });
    return w;
  });
  const res = new FakeRes();
  const parsed = parseRequest(Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream })), 'chat');
  const pr = new ProxyRequest(ctx, pool, res, parsed, '/v1/chat/completions', performance.now(), Date.now());
  return { pr, res, dispatched, records, pool };
}

/** Start the request and let the pool start it on the first worker. */
function startFirst(h: Harness): { first: UpstreamHandler; c: FakeController } {
  h.pr.start();
  const first = h.dispatched[0]!.handler;
  const c = new FakeController(first);
  first.onRequestStart(c);
  return { first, c };
}

beforeEach(() => {
  // performance too: the proxy's timer checks its deadlines on performance.now()
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('ProxyRequest orderings', () => {
  it('a client that hangs up while a timeout abort is pending is not retried for (regression)', () => {
    const h = harness();
    h.pr.start();
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0']);
    // still queued in the pool (no onRequestStart yet) when the first-token timeout fires
    vi.advanceTimersByTime(1000);
    h.res.hangUp();
    // the pool finally starts the request: the pending abort is applied there
    const first = h.dispatched[0]!.handler;
    first.onRequestStart(new FakeController(first));
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0']);
    expect(h.records.map((r) => [r.status, r.errorCode])).toEqual([[499, 'client_closed']]);
    expect(h.pool.inflight.size).toBe(0);
    expect(h.pool.workers.map((w) => w.outstanding)).toEqual([0, 0]);
  });

  it('a client that hangs up before the pool starts the request aborts it at the start', () => {
    const h = harness();
    h.pr.start();
    h.res.hangUp();
    const first = h.dispatched[0]!.handler;
    const c = new FakeController(first);
    first.onRequestStart(c);
    expect(c.aborted).toBe(true);
    expect(h.records.map((r) => r.status)).toEqual([499]);
    expect(h.dispatched).toHaveLength(1);
  });

  it('a first-token timeout retries on the other worker, and the late answer of the first is ignored', () => {
    const h = harness(false);
    const { c: c0 } = startFirst(h);
    vi.advanceTimersByTime(1000);
    expect(c0.aborted).toBe(true);
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0', 'w1']);
    const second = h.dispatched[1]!.handler;
    const c1 = new FakeController(second);
    second.onRequestStart(c1);
    second.onResponseStart(c1, 200, 'application/json');
    second.onResponseData(c1, Buffer.from('{"usage":{"prompt_tokens":1,"completion_tokens":2}}'));
    second.onResponseEnd();
    expect(h.res.status).toBe(200);
    expect(h.res.headers['x-glidepath-worker']).toBe('w1');
    expect(h.records.map((r) => [r.status, r.retries, r.worker])).toEqual([[200, 1, 'w1']]);
    expect(h.pool.workers.map((w) => w.outstanding)).toEqual([0, 0]);
  });

  it('the timer is not moved per chunk, yet first-token and idle limits fire on time (first token 1000 ms, idle 500 ms)', () => {
    const h = harness();
    const { first, c } = startFirst(h);
    // the one timer wakes at the idle limit (500 ms), finds the first-token deadline not reached
    vi.advanceTimersByTime(999);
    expect(c.aborted).toBe(false);
    first.onResponseStart(c, 200, 'text/event-stream');
    const event = Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
    first.onResponseData(c, event);
    // tokens every 400 ms keep it alive past both limits
    for (let i = 0; i < 5; i++) {
      vi.advanceTimersByTime(400);
      expect(c.aborted).toBe(false);
      first.onResponseData(c, event);
    }
    // then silence: aborted 500 ms after the last token, not before
    vi.advanceTimersByTime(499);
    expect(c.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(c.aborted).toBe(true);
    expect(h.records.map((r) => [r.status, r.errorCode])).toEqual([[200, 'upstream_idle_timeout']]);
    expect(h.res.body).toContain('"code":"upstream_idle_timeout"');
  });

  it('a first-token deadline longer than the idle limit fires at its own time', () => {
    const h = harness();
    const { c } = startFirst(h);
    vi.advanceTimersByTime(999);
    expect(c.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(c.aborted).toBe(true);
    // a first-token timeout retries on the other worker
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0', 'w1']);
  });

  it('a drain abort during a stream ends it in-band and counts it once', () => {
    const h = harness();
    const { first, c } = startFirst(h);
    first.onResponseStart(c, 200, 'text/event-stream');
    first.onResponseData(c, Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n'));
    h.pr.abortForDrain();
    h.pr.abortForDrain();
    expect(h.res.ended).toBe(true);
    expect(h.res.body).toContain('"code":"drain_aborted"');
    expect(h.res.body.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(h.records.map((r) => [r.status, r.errorCode])).toEqual([[200, 'drain_aborted']]);
    expect(h.pool.inflight.size).toBe(0);
  });
  it('a drain abort before the pool starts the request answers 503 drain_aborted once', () => {
    const h = harness(false);
    h.pr.start();
    h.pr.abortForDrain();
    const first = h.dispatched[0]!.handler;
    first.onRequestStart(new FakeController(first));
    expect(h.res.status).toBe(503);
    expect(JSON.parse(h.res.body)).toMatchObject({ error: { code: 'drain_aborted' } });
    expect(h.res.headers['retry-after']).toBe('1');
    expect(h.records.map((r) => [r.status, r.errorCode])).toEqual([[503, 'drain_aborted']]);
    // the response's own close after it was sent is not a client hang-up
    h.res.hangUp();
    expect(h.records).toHaveLength(1);
    expect(h.dispatched).toHaveLength(1);
  });

  it('every worker answering 5xx gives 502 upstream_error with the retry counted', () => {
    const h = harness(false);
    h.pr.start();
    // maxRetries is 2: three attempts; with two workers the third finds nobody left
    for (let i = 0; i < 2; i++) {
      const d = h.dispatched[i]!.handler;
      const c = new FakeController(d);
      d.onRequestStart(c);
      d.onResponseStart(c, 500, 'application/json');
      d.onResponseData(c, Buffer.from('{"error":"boom"}'));
      d.onResponseEnd();
    }
    expect(h.res.status).toBe(502);
    expect(JSON.parse(h.res.body)).toMatchObject({ error: { code: 'upstream_error' } });
    expect(h.records.map((r) => [r.status, r.retries])).toEqual([[502, 1]]);
  });
});
