// Drain, hold queue and route switches under load: nothing dropped, nothing served by a version its
// snapshot did not name, aborted requests counted.
import { describe, expect, it } from 'vitest';
import { chatBody, deferred, hang, json, sseEvents, stream } from '../../helpers/upstream.js';
import type { Upstream } from '../../helpers/upstream.js';
import { chatReq, openStream, post, sseData, until, gatewayFixtures, twoVersions as twoVersionModel } from '../../helpers/gateway.js';
import type { Gateway, HttpResult, startGateway } from '../../helpers/gateway.js';

const { upstream, gateway } = gatewayFixtures();

/** Two versions, each with its own upstream that answers with its version id. */
async function twoVersions(over: Parameters<typeof startGateway>[1] = {}): Promise<{ gw: Gateway; a: Upstream; b: Upstream }> {
  const a = await upstream();
  const b = await upstream();
  a.setDefault(json(chatBody('v1')));
  b.setDefault(json(chatBody('v2')));
  const gw = await gateway(twoVersionModel(a.url, b.url), over);
  return { gw, a, b };
}

function content(r: HttpResult): string {
  return (r.json().choices as { message: { content: string } }[])[0]!.message.content;
}

describe('drain', () => {
  it('lets in-flight requests finish, sends new ones to the new route, and resolves when in-flight reaches zero', async () => {
    const { gw, a } = await twoVersions();
    const gate = deferred();
    const events = sseEvents(6, { id: 'v1' });
    a.script(stream(events, { gate: { before: 2, until: gate.promise } }), stream(events, { gate: { before: 2, until: gate.promise } }));
    const s1 = openStream(gw.url, chatReq({ stream: true }));
    const s2 = openStream(gw.url, chatReq({ stream: true }));
    await Promise.all([s1.firstChunk, s2.firstChunk]);
    expect(gw.dp.pool('m', 'v1').inflight.size).toBe(2);

    gw.dp.setRoute({ model: 'm', weights: { v2: 1 } });
    let drained = false;
    const drain = gw.dp.drain('m', 'v1', 30_000).then((r) => {
      drained = true;
      return r;
    });
    // new requests go to v2 while v1's streams are still running
    for (let i = 0; i < 3; i++) {
      const r = await post(gw.url, chatReq());
      expect(r.status).toBe(200);
      expect(r.headers['x-glidepath-version']).toBe('v2');
      expect(content(r)).toBe('v2');
    }
    expect(drained).toBe(false);
    gate.resolve();
    const [b1, b2] = await Promise.all([s1.done, s2.done]);
    expect(b1.toString()).toBe(events.join(''));
    expect(b2.toString()).toBe(events.join(''));
    const res = await drain;
    expect(res).toMatchObject({ model: 'm', version: 'v1', drained: 2, aborted: 0 });
    expect(gw.dp.pool('m', 'v1').inflight.size).toBe(0);
  });

  it('resolves at once when nothing is in flight', async () => {
    const { gw } = await twoVersions();
    gw.dp.setRoute({ model: 'm', weights: { v2: 1 } });
    expect(await gw.dp.drain('m', 'v1', 30_000)).toMatchObject({ drained: 0, aborted: 0 });
  });

  it('aborts what is left at the timeout with drain_aborted, counted in /metrics', async () => {
    const { gw, a } = await twoVersions();
    const events = sseEvents(6);
    const never = deferred();
    // one stream that started and then stalls, one request that never gets an answer
    a.script(stream(events, { gate: { before: 2, until: never.promise } }), hang());
    const s = openStream(gw.url, chatReq({ stream: true }));
    await s.firstChunk;
    const pending = post(gw.url, chatReq());
    await a.request(2);
    gw.dp.setRoute({ model: 'm', weights: { v2: 1 } });
    const res = await gw.dp.drain('m', 'v1', 50);
    expect(res).toMatchObject({ drained: 0, aborted: 2 });

    const streamed = (await s.done).toString();
    expect(streamed.startsWith(events[0]! + events[1]!)).toBe(true);
    const data = sseData(streamed);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data.at(-2)!)).toMatchObject({ error: { code: 'drain_aborted' } });

    const r = await pending;
    expect(r.status).toBe(503);
    expect(r.json()).toMatchObject({ error: { code: 'drain_aborted', type: 'unavailable_error' } });
    expect(r.headers['retry-after']).toBe('1');

    // the upstream requests were cancelled, not left running
    await a.requests[0]!.closed;
    await a.requests[1]!.closed;
    expect(a.requests.every((x) => x.aborted)).toBe(true);

    const text = await gw.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_drain_aborted_total{model="m",version="v1"} 2');
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(2);
    never.resolve();
  });

  it('refuses a route that gives weight to a draining pool, and answers 503 for a draining version asked for by header', async () => {
    const { gw } = await twoVersions();
    gw.dp.setRoute({ model: 'm', weights: { v2: 1, v1: 0 } });
    await gw.dp.drain('m', 'v1', 1000);
    expect(() => gw.dp.setRoute({ model: 'm', weights: { v1: 1 } })).toThrow(/draining/);
    const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v1' } });
    expect(r.status).toBe(503);
    expect(r.json()).toMatchObject({ error: { code: 'version_unavailable' } });
    gw.dp.undrain('m', 'v1');
    expect(gw.dp.setRoute({ model: 'm', weights: { v1: 1 } }).revision).toBeGreaterThan(1);
  });
});

describe('hold queue', () => {
  it('holds requests and releases them in arrival order onto the route in force at release', async () => {
    const { gw, a, b } = await twoVersions({ connectionsPerWorker: 1 });
    gw.dp.hold('m');
    const pending: Promise<HttpResult>[] = [];
    for (let i = 0; i < 5; i++) {
      pending.push(post(gw.url, chatReq({ messages: [{ role: 'user', content: `r${i}` }] })));
      // each one queued before the next is sent, so arrival order is known
      await until(() => gw.dp.model('m').hold?.depth === i + 1, `depth ${i + 1}`);
    }
    expect(await gw.telemetry.metrics.registry.metrics()).toContain('glidepath_hold_queue_depth{model="m"} 5');
    expect(a.requests).toHaveLength(0);
    expect(b.requests).toHaveLength(0);
    gw.dp.setRoute({ model: 'm', weights: { v2: 1 } });
    expect(gw.dp.release('m')).toBe(5);
    const rs = await Promise.all(pending);
    expect(rs.map((r) => r.headers['x-glidepath-version'])).toEqual(['v2', 'v2', 'v2', 'v2', 'v2']);
    // one connection to the worker: it sees them in the order they were dispatched
    expect(b.requests.map((r) => (r.json!.messages as { content: string }[])[0]!.content)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    expect(a.requests).toHaveLength(0);
    expect(await gw.telemetry.metrics.registry.metrics()).toContain('glidepath_hold_queue_depth{model="m"} 0');
  });

  it('a request that waits past the limit gets 503 with Retry-After', async () => {
    const { gw } = await twoVersions();
    gw.dp.hold('m', { max: 10, timeoutMs: 60 });
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(503);
    expect(r.json()).toMatchObject({ error: { code: 'hold_timeout', type: 'unavailable_error' } });
    expect((r.json().error as { message: string }).message).toContain('60 ms');
    expect(r.headers['retry-after']).toBe('1');
    expect(await gw.telemetry.metrics.registry.metrics()).toContain('glidepath_hold_queue_rejected_total{model="m",reason="timeout"} 1');
    gw.dp.release('m');
  });

  it('each holder releases its own hold: the requests go when the last one lets go, and every holder hears the depth', async () => {
    const { gw, b } = await twoVersions();
    gw.dp.setRoute({ model: 'm', weights: { v2: 1 } });
    const depths: number[] = [];
    gw.dp.hold('m', { owner: 'time-share', why: 'is asleep', onDepth: (d) => depths.push(d) });
    gw.dp.hold('m');
    const r = post(gw.url, chatReq());
    await until(() => gw.dp.model('m').hold?.depth === 1, 'held');
    // a swap's release ends the swap's hold only
    expect(gw.dp.release('m')).toBe(0);
    expect(gw.dp.release('m', 'nobody')).toBe(0);
    expect(gw.dp.model('m').hold?.depth).toBe(1);
    expect(b.requests).toHaveLength(0);
    expect(gw.dp.release('m', 'time-share')).toBe(1);
    expect((await r).status).toBe(200);
    expect(depths).toEqual([1, 0]);
    // the wait is counted apart, not in the version's numbers
    expect(await gw.telemetry.metrics.registry.metrics()).toMatch(/glidepath_hold_wait_seconds_count\{model="m"\} 1/);
  });

  it('refuses with 503 hold_queue_full when the queue is full', async () => {
    const { gw } = await twoVersions();
    gw.dp.hold('m', { max: 1, timeoutMs: 30_000 });
    const first = post(gw.url, chatReq());
    await until(() => gw.dp.model('m').hold?.depth === 1, 'first held');
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(503);
    expect(r.json()).toMatchObject({ error: { code: 'hold_queue_full' } });
    expect(r.headers['retry-after']).toBe('1');
    gw.dp.release('m');
    expect((await first).status).toBe(200);
  });
});

describe('route switch under concurrent load', () => {
  it('never serves a version its snapshot did not name and never mixes versions in one response', async () => {
    const ups = [await upstream(), await upstream(), await upstream()];
    const ids = ['v1', 'v2', 'v3'];
    ups.forEach((u, i) => {
      const id = ids[i]!;
      u.setDefault(async (c) => {
        // streams carry the serving version in every event; JSON answers in the content
        if (c.rec.json?.stream === true) await stream(sseEvents(3, { id }))(c);
        else await json(chatBody(id))(c);
      });
    });
    const gw = await gateway([{ name: 'm', versions: ids.map((id, i) => ({ id, workers: [ups[i]!.url] })), route: { weights: { v1: 1 } } }]);
    // a long stream that spans every switch below must finish on the version it started on
    const longGate = deferred();
    ups[0]!.script(stream(sseEvents(4, { id: 'v1' }), { gate: { before: 1, until: longGate.promise } }));
    const long = openStream(gw.url, chatReq({ stream: true }));
    await long.firstChunk;

    const phases: Record<string, number>[] = [{ v2: 1 }, { v1: 0.5, v2: 0.5 }, { v3: 3, v1: 1 }, { v1: 1, v2: 0, v3: 0 }, { v2: 1, v3: 1 }, { v3: 1 }];
    for (const weights of phases) {
      // switch while the previous phase's requests may still be running
      gw.dp.setRoute({ model: 'm', weights });
      const named = new Set(
        Object.entries(weights)
          .filter(([, w]) => w > 0)
          .map(([v]) => v),
      );
      const batch = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? post(gw.url, chatReq()) : post(gw.url, chatReq({ stream: true })))));
      for (const r of batch) {
        expect(r.status).toBe(200);
        const v = r.headers['x-glidepath-version'] as string;
        expect(named.has(v), `served ${v} under ${JSON.stringify(weights)}`).toBe(true);
        if (r.headers['content-type'] === 'text/event-stream') {
          const datas = sseData(r.body).filter((d) => d !== '[DONE]');
          expect(datas.every((d) => (JSON.parse(d) as { id: string }).id === v)).toBe(true);
        } else {
          expect(content(r)).toBe(v);
        }
      }
    }
    longGate.resolve();
    const body = (await long.done).toString();
    const res = await long.res;
    expect(res.headers['x-glidepath-version']).toBe('v1');
    expect(
      sseData(body)
        .filter((d) => d !== '[DONE]')
        .every((d) => (JSON.parse(d) as { id: string }).id === 'v1'),
    ).toBe(true);
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});
