// Waiting for a connection to a worker (every one of connections_per_worker busy): a bounded,
// timed wait of its own, never taken for a hung or failed worker.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { eligible } from '../../../src/gateway/pick.js';
import type { Pickable, Picker } from '../../../src/gateway/pick.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { chatBody, deferred, json, sseEvents, stream } from '../../helpers/upstream.js';
import type { Behaviour } from '../../helpers/upstream.js';
import { chatReq, gatewayFixtures, oneModel, openStream, post, until } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

const { upstream, gateway } = gatewayFixtures();

afterEach(() => {
  vi.useRealTimers();
});

/** Always the first eligible worker: the test decides where requests are picked (attempts.ts may still move one to a free slot). */
class FirstPicker implements Picker {
  readonly name = 'first';
  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    return workers.find((w) => eligible(w, now, exclude as ReadonlySet<Pickable> | undefined));
  }
}

function records(gw: Gateway): RequestRecord[] {
  const out: RequestRecord[] = [];
  gw.telemetry.subscribe((r) => out.push(r));
  return out;
}

/** A stream that sends two events, then holds its connection until `release()`. */
function heldStream(): { behaviour: Behaviour; events: string[]; release: () => void } {
  const events = sseEvents(4);
  const gate = deferred();
  return { behaviour: stream(events, { gate: { before: 2, until: gate.promise } }), events, release: () => gate.resolve() };
}

function queued(gw: Gateway, worker = 0): number {
  return gw.dp.pool('m', 'v1').workers[worker]!.upstream.queued;
}

async function metrics(gw: Gateway): Promise<string> {
  return gw.telemetry.metrics.registry.metrics();
}

/** Fake the clock the proxy's and the pool's deadlines run on; sockets stay real. */
function fakeClock(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
}

describe('waiting for a connection to a worker', () => {
  it('a queued request is not mistaken for a hung worker', async () => {
    const u = await upstream();
    const long = heldStream();
    u.script(long.behaviour);
    u.setDefault(json(chatBody('after the wait')));
    const gw = await gateway(oneModel([u.url]), { connectionsPerWorker: 1, firstTokenTimeoutMs: 1000, requestTimeoutMs: 1000 });
    const recs = records(gw);
    const a = openStream(gw.url, chatReq({ stream: true }));
    await a.firstChunk;
    fakeClock();
    const b = post(gw.url, chatReq());
    await until(() => gw.dp.pool('m', 'v1').inflight.size === 2, 'the second request to wait for the connection');
    const whileWaiting = await metrics(gw);
    // three first-token limits pass while it waits behind the long stream
    vi.advanceTimersByTime(3000);
    long.release();
    const rb = await b;
    expect(rb.status).toBe(200);
    expect(rb.json()).toMatchObject({ choices: [{ message: { content: 'after the wait' } }] });
    expect((await a.done).toString()).toBe(long.events.join(''));
    // one request each reached the worker: nothing was retried or ejected
    expect(u.requests).toHaveLength(2);
    const rec = recs.find((r) => !r.stream)!;
    expect(rec).toMatchObject({ status: 200, errorCode: undefined, retries: 0 });
    expect(rec.queueMs).toBeGreaterThanOrEqual(3000);
    expect(gw.dp.pool('m', 'v1').workers[0]!.ejectedUntil).toBe(0);
    const text = await metrics(gw);
    expect(text).not.toMatch(/glidepath_upstream_retries_total\{[^}]*\} [1-9]/);
    expect(text).not.toContain('glidepath_worker_ejections_total{');
    expect(text).toContain('glidepath_upstream_queue_seconds_count{model="m",version="v1"} 1');
    expect(text).toContain('glidepath_upstream_queue_seconds_bucket{le="5",model="m",version="v1"} 1');
    expect(whileWaiting).toContain('glidepath_upstream_queue_depth{model="m",version="v1"} 1');
    expect(text).toContain('glidepath_upstream_queue_depth{model="m",version="v1"} 0');
  });

  it('a request whose worker has a full queue goes to another worker of the pool, without a retry or an ejection', async () => {
    const first = await upstream();
    const second = await upstream();
    const [long0, long1] = [heldStream(), heldStream()];
    first.script(long0.behaviour);
    second.script(long1.behaviour);
    second.setDefault(json(chatBody('from the second worker')));
    const gw = await gateway(
      [{ name: 'm', versions: [{ id: 'v1', workers: [first.url, second.url] }], route: { weights: { v1: 1 } } }],
      { connectionsPerWorker: 1, workerQueueMax: 1 },
      { picker: new FirstPicker() },
    );
    const recs = records(gw);
    // every pick is w0: the first stream holds it, the second goes where a slot is free (w1) and holds it
    const a = openStream(gw.url, chatReq({ stream: true }));
    await a.firstChunk;
    const b = openStream(gw.url, chatReq({ stream: true }));
    await b.firstChunk;
    expect(second.requests).toHaveLength(1);
    // no slot free anywhere: the next waits where it was picked, and fills w0's queue
    const waiting = post(gw.url, chatReq());
    await until(() => queued(gw) === 1, 'a request to wait for w0');
    // w0's queue is full: the next waits for w1 instead
    const moved = post(gw.url, chatReq());
    await until(() => queued(gw, 1) === 1, 'a request to wait for w1');
    long1.release();
    const r = await moved;
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w1');
    expect(recs.at(-1)).toMatchObject({ status: 200, worker: 'v1-w1', retries: 0 });
    expect(gw.dp.pool('m', 'v1').workers.map((w) => w.ejectedUntil)).toEqual([0, 0]);
    const text = await metrics(gw);
    expect(text).not.toMatch(/glidepath_upstream_retries_total\{[^}]*\} [1-9]/);
    expect(text).not.toContain('glidepath_worker_ejections_total{');
    expect(text).not.toContain('glidepath_upstream_queue_rejected_total{');
    long0.release();
    expect((await waiting).status).toBe(200);
    await Promise.all([a.done, b.done]);
  });

  it('every worker busy and its queue full: 503 worker_queue_full with Retry-After at once, counted', async () => {
    const u = await upstream();
    const long = heldStream();
    u.script(long.behaviour);
    const gw = await gateway(oneModel([u.url]), { connectionsPerWorker: 1, workerQueueMax: 1 });
    const recs = records(gw);
    const a = openStream(gw.url, chatReq({ stream: true }));
    await a.firstChunk;
    const waiting = post(gw.url, chatReq());
    await until(() => queued(gw) === 1, 'a request to wait');
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.json()).toMatchObject({ error: { code: 'worker_queue_full', type: 'unavailable_error' } });
    expect((r.json() as { error: { message: string } }).error.message).toMatch(/worker_queue_max/);
    expect(recs.at(-1)).toMatchObject({ status: 503, errorCode: 'worker_queue_full', retries: 0 });
    expect(gw.dp.pool('m', 'v1').workers[0]!.ejectedUntil).toBe(0);
    expect(await metrics(gw)).toContain('glidepath_upstream_queue_rejected_total{model="m",version="v1",reason="full"} 1');
    long.release();
    expect((await waiting).status).toBe(200);
    await a.done;
    expect(u.requests).toHaveLength(2);
  });

  it('a request that waits past queue_timeout_ms gets 503 worker_queue_timeout, not a retry and not a worker failure', async () => {
    const busy = await upstream();
    const other = await upstream();
    const [long0, long1] = [heldStream(), heldStream()];
    busy.script(long0.behaviour);
    other.script(long1.behaviour);
    const gw = await gateway(
      [{ name: 'm', versions: [{ id: 'v1', workers: [busy.url, other.url] }], route: { weights: { v1: 1 } } }],
      { connectionsPerWorker: 1, queueTimeoutMs: 2000, firstTokenTimeoutMs: 500, requestTimeoutMs: 500 },
      { picker: new FirstPicker() },
    );
    const recs = records(gw);
    // every pick is w0: a stream holds it, the next holds w1 (where a slot was free)
    const a = openStream(gw.url, chatReq({ stream: true }));
    await a.firstChunk;
    const b = openStream(gw.url, chatReq({ stream: true }));
    await b.firstChunk;
    fakeClock();
    const waiting = post(gw.url, chatReq());
    await until(() => queued(gw) === 1, 'a request to wait for w0');
    vi.advanceTimersByTime(1999);
    expect(queued(gw)).toBe(1);
    vi.advanceTimersByTime(1);
    const r = await waiting;
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.json()).toMatchObject({ error: { code: 'worker_queue_timeout', type: 'unavailable_error' } });
    expect(recs.at(-1)).toMatchObject({ status: 503, errorCode: 'worker_queue_timeout', retries: 0, queueMs: 2000 });
    // not sent anywhere else, nobody ejected, and the streams it waited behind are untouched
    expect(other.requests).toHaveLength(1);
    expect(gw.dp.pool('m', 'v1').workers.map((w) => w.ejectedUntil)).toEqual([0, 0]);
    const text = await metrics(gw);
    expect(text).toContain('glidepath_upstream_queue_rejected_total{model="m",version="v1",reason="timeout"} 1');
    expect(text).not.toMatch(/glidepath_upstream_retries_total\{[^}]*\} [1-9]/);
    expect(text).not.toContain('glidepath_worker_ejections_total{');
    long0.release();
    long1.release();
    expect((await a.done).toString()).toBe(long0.events.join(''));
    expect((await b.done).toString()).toBe(long1.events.join(''));
  });
});

describe('a worker taken out of its pool while requests wait for it', () => {
  it('its waiting requests move to the pool’s other workers at once, without a retry spent', async () => {
    const old = await upstream();
    const long = heldStream();
    old.script(long.behaviour);
    const fresh = await upstream();
    fresh.setDefault(json(chatBody('from the new worker')));
    const gw = await gateway(oneModel([old.url]), { connectionsPerWorker: 1 });
    const recs = records(gw);
    const a = openStream(gw.url, chatReq({ stream: true }));
    await a.firstChunk;
    const b = post(gw.url, chatReq());
    await until(() => queued(gw) === 1, 'the request to wait for the busy worker');
    // a replacement: the old worker leaves (its stream finishes there), the waiting request does not wait for it
    gw.dp.setWorkers('m', 'v1', [{ id: 'v1-new', url: fresh.url }]);
    const rb = await b;
    expect(rb.status).toBe(200);
    expect(rb.json()).toMatchObject({ choices: [{ message: { content: 'from the new worker' } }] });
    expect(recs.find((r) => !r.stream)).toMatchObject({ worker: 'v1-new', retries: 0 });
    long.release();
    expect((await a.done).toString()).toBe(long.events.join(''));
  });
});
