// ProxyRequest against fake dispatchers and a fake response, on a fake clock: the orderings of
// timers, client hang-ups and upstream callbacks that real sockets make too hard to pin down.
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { ProxyRequest } from '../../../src/gateway/proxy.js';
import { LocalResourceError, WorkerQueueError } from '../../../src/gateway/upstream.js';
import type { UpstreamController, UpstreamHandler } from '../../../src/gateway/upstream.js';
import type { ProxyContext } from '../../../src/gateway/proxy.js';
import { parseRequest } from '../../../src/gateway/request.js';
import { VersionPool, Worker } from '../../../src/gateway/pool.js';
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
  telemetry: Telemetry;
}

function harness(stream = true, over: Partial<ProxyContext> = {}): Harness {
  const cfg = defaultGatewayConfig({ firstTokenTimeoutMs: 1000, requestTimeoutMs: 1000, idleTimeoutMs: 500 });
  const telemetry = new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 60_000 });
  const records: RequestRecord[] = [];
  telemetry.subscribe((r) => records.push(r));
  const ctx: ProxyContext = { cfg, telemetry, metrics: telemetry.metrics, picker: new RoundRobinPicker(), ...over };
  const pool = new VersionPool('m', 'v1', 'card', telemetry.forVersion('m', 'v1'));
  const dispatched: Harness['dispatched'] = [];
  pool.workers = ['w0', 'w1'].map((id) => {
    const w = new Worker({ id, url: 'http://127.0.0.1:9' }, 'v1', {
      connectTimeoutMs: 1000,
      connections: 1,
      keepAliveTimeoutMs: 1000,
      queueMax: 1,
      queueTimeoutMs: 1000,
    });
    // nothing goes to the network: the test plays the upstream pool
    Object.defineProperty(w, 'upstream', {
      value: {
        dispatch: (_p: string, _s: boolean, _b: Buffer, handler: UpstreamHandler) => {
          dispatched.push({ worker: id, handler });
          return true;
        },
        opts: { connections: 1 },
        setCap: () => undefined,
        roomFor: () => true,
        wantSpares: () => undefined,
      },
    });
    return w;
  });
  const res = new FakeRes();
  const parsed = parseRequest(Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream })), 'chat');
  const pr = new ProxyRequest(ctx, pool, res, parsed, '/v1/chat/completions', performance.now(), Date.now());
  return { pr, res, dispatched, records, pool, telemetry };
}

/** Start the request and let the pool start it on the first worker and send it at once (a free connection). */
function startFirst(h: Harness): { first: UpstreamHandler; c: FakeController } {
  h.pr.start();
  const first = h.dispatched[0]!.handler;
  const c = new FakeController(first);
  first.onRequestStart(c);
  first.onRequestSent(0);
  return { first, c };
}

async function metricsText(h: Harness): Promise<string> {
  return h.telemetry.metrics.registry.metrics();
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
    const first = h.dispatched[0]!.handler;
    // a pool that reports the abort only later: the first-token timeout's abort is pending while the client leaves
    let reason: Error | undefined;
    const c: UpstreamController = {
      aborted: false,
      abort(r: Error) {
        reason = r;
      },
      pause: () => undefined,
      resume: () => undefined,
    };
    first.onRequestStart(c);
    first.onRequestSent(0);
    vi.advanceTimersByTime(1000);
    expect(reason).toBeDefined();
    h.res.hangUp();
    first.onResponseError(c, reason!);
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
    // resumption off: the idle stream ends with its error (resume.test.ts has it continue)
    const h = harness(true, {
      cfg: defaultGatewayConfig({ firstTokenTimeoutMs: 1000, idleTimeoutMs: 500, resume: { maxMigrations: 0, budgetMs: 1, logBytes: 4096 } }),
    });
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

  it('an idle stream continues on the other worker of the pool with the text it had sent', () => {
    const h = harness();
    const { first, c } = startFirst(h);
    first.onResponseStart(c, 200, 'text/event-stream');
    first.onResponseData(c, Buffer.from('data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"id":"x","choi'));
    vi.advanceTimersByTime(500);
    expect(c.aborted).toBe(true);
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0', 'w1']);
    // half an event never reached the client
    expect(h.res.body).toBe('data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n');
    expect(h.records).toEqual([]);
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

  it('a queued request is not mistaken for a hung worker: its first-token deadline starts when the pool sends it', () => {
    const h = harness();
    h.pr.start();
    const first = h.dispatched[0]!.handler;
    const c = new FakeController(first);
    first.onRequestStart(c);
    // waiting for a connection five times the first-token limit: no abort, no retry
    vi.advanceTimersByTime(5000);
    expect(c.aborted).toBe(false);
    expect(h.dispatched).toHaveLength(1);
    first.onRequestSent(5000);
    vi.advanceTimersByTime(999);
    expect(c.aborted).toBe(false);
    first.onResponseStart(c, 200, 'text/event-stream');
    first.onResponseData(c, Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n'));
    first.onResponseEnd(Buffer.from('data: [DONE]\n\n'));
    expect(h.records.map((r) => [r.status, r.errorCode, r.retries, r.queueMs])).toEqual([[200, undefined, 0, 5000]]);
    // TTFT stays what the client saw: from its request, wait included
    expect(h.records[0]!.ttftMs).toBeGreaterThanOrEqual(5999);
  });

  it('a full worker queue sends the request to another worker without spending a retry or ejecting', async () => {
    const h = harness(false, { cfg: defaultGatewayConfig({ maxRetries: 0 }) });
    h.pr.start();
    const first = h.dispatched[0]!.handler;
    const c0 = new FakeController(first);
    first.onRequestStart(c0);
    first.onResponseError(c0, new WorkerQueueError('full', 0, 'full'));
    expect(h.dispatched.map((d) => d.worker)).toEqual(['w0', 'w1']);
    const second = h.dispatched[1]!.handler;
    const c1 = new FakeController(second);
    second.onRequestStart(c1);
    second.onRequestSent(0);
    second.onResponseStart(c1, 200, 'application/json');
    second.onResponseEnd(Buffer.from('{"usage":{"prompt_tokens":1,"completion_tokens":2}}'));
    expect(h.res.status).toBe(200);
    expect(h.records.map((r) => [r.status, r.retries, r.worker])).toEqual([[200, 0, 'w1']]);
    expect(h.pool.workers.map((w) => [w.ejectedUntil, w.outstanding])).toEqual([
      [0, 0],
      [0, 0],
    ]);
    const text = await metricsText(h);
    expect(text).not.toMatch(/glidepath_upstream_retries_total\{[^}]*\} [1-9]/);
    expect(text).not.toContain('glidepath_worker_ejections_total{');
  });

  it('every worker queue full: 503 worker_queue_full with Retry-After, counted', async () => {
    const h = harness(false);
    h.pr.start();
    for (let i = 0; i < 2; i++) {
      const d = h.dispatched[i]!.handler;
      const c = new FakeController(d);
      d.onRequestStart(c);
      d.onResponseError(c, new WorkerQueueError('full', 0, 'full'));
    }
    expect(h.dispatched).toHaveLength(2);
    expect(h.res.status).toBe(503);
    expect(h.res.headers['retry-after']).toBe('1');
    expect(JSON.parse(h.res.body)).toMatchObject({ error: { code: 'worker_queue_full', type: 'unavailable_error' } });
    expect(h.records.map((r) => [r.status, r.errorCode, r.retries])).toEqual([[503, 'worker_queue_full', 0]]);
    expect(h.pool.workers.map((w) => [w.ejectedUntil, w.outstanding])).toEqual([
      [0, 0],
      [0, 0],
    ]);
    expect(await metricsText(h)).toContain('glidepath_upstream_queue_rejected_total{model="m",version="v1",reason="full"} 1');
  });

  it('a queue timeout answers 503 worker_queue_timeout: not retried as a hang, nobody ejected', async () => {
    const h = harness();
    h.pr.start();
    const first = h.dispatched[0]!.handler;
    const c = new FakeController(first);
    first.onRequestStart(c);
    first.onResponseError(c, new WorkerQueueError('timeout', 30_000, 'waited'));
    expect(h.dispatched).toHaveLength(1);
    expect(h.res.status).toBe(503);
    expect(h.res.headers['retry-after']).toBe('1');
    expect(JSON.parse(h.res.body)).toMatchObject({ error: { code: 'worker_queue_timeout', type: 'unavailable_error' } });
    expect(h.records.map((r) => [r.status, r.errorCode, r.retries, r.queueMs])).toEqual([[503, 'worker_queue_timeout', 0, 30_000]]);
    expect(h.pool.workers.map((w) => w.ejectedUntil)).toEqual([0, 0]);
    const text = await metricsText(h);
    expect(text).toContain('glidepath_upstream_queue_rejected_total{model="m",version="v1",reason="timeout"} 1');
    expect(text).toContain('glidepath_upstream_queue_seconds_count{model="m",version="v1"} 1');
  });

  it("the gateway's own exhaustion (EMFILE) answers 503 local_resources_exhausted: no ejection, no retry, counted and reported", async () => {
    const reported: [string, string][] = [];
    const h = harness(false, { onLocalResourceError: (code, message) => reported.push([code, message]) });
    h.pr.start();
    const first = h.dispatched[0]!.handler;
    const c = new FakeController(first);
    first.onRequestStart(c);
    first.onResponseError(c, new LocalResourceError('EMFILE', 'file descriptors (the limit)', 'could not open a connection'));
    expect(h.dispatched).toHaveLength(1);
    expect(h.res.status).toBe(503);
    expect(h.res.headers['retry-after']).toBe('5');
    const body = JSON.parse(h.res.body) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('local_resources_exhausted');
    expect(body.error.message).toMatch(/EMFILE, out of file descriptors \(the limit\)\. This is the gateway's own limit, not the worker's/);
    expect(h.pool.workers.map((w) => [w.ejectedUntil, w.connectFailures, w.outstanding])).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
    expect(reported).toEqual([['EMFILE', body.error.message]]);
    const text = await metricsText(h);
    expect(text).toContain('glidepath_local_resource_errors_total{kind="EMFILE"} 1');
    expect(text).not.toContain('glidepath_worker_ejections_total{');
  });
});
