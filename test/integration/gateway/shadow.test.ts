// Shadow traffic: mirrored copies never reach or slow the client, and are measured as shadow.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import type { TappedResponse } from '../../../src/gateway/tap.js';
import { chatBody, deferred, hang, json, sseEvents, startUpstream, status, stream } from '../../helpers/upstream.js';
import type { Upstream } from '../../helpers/upstream.js';
import { chatReq, post, startGateway, until } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  while (cleanups.length) await cleanups.pop()!();
});

async function setup(
  share: number,
  weights: Record<string, number> = { v1: 1 },
  over: Parameters<typeof startGateway>[1] = {},
): Promise<{ gw: Gateway; main: Upstream; shadow: Upstream; recs: RequestRecord[] }> {
  const main = await startUpstream(json(chatBody('main')));
  const shadow = await startUpstream(json(chatBody('shadow')));
  const gw = await startGateway(
    [
      {
        name: 'm',
        versions: [
          { id: 'v1', workers: [main.url] },
          { id: 'v2', workers: [shadow.url] },
        ],
        route: { weights, shadow: { version: 'v2', share } },
      },
    ],
    over,
    { rand: () => 0.5 },
  );
  cleanups.push(
    () => main.close(),
    () => shadow.close(),
    () => gw.close(),
  );
  const recs: RequestRecord[] = [];
  gw.telemetry.subscribe((r) => recs.push(r));
  return { gw, main, shadow, recs };
}

describe('shadow traffic', () => {
  it('mirrors the request body to the shadow version; the client sees only the main answer', async () => {
    const { gw, shadow, recs } = await setup(1);
    const body = chatReq({ temperature: 0 });
    const r = await post(gw.url, body);
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-version']).toBe('v1');
    expect((r.json().choices as { message: { content: string } }[])[0]!.message.content).toBe('main');
    const mirrored = await shadow.request(1);
    expect(mirrored.body).toBe(JSON.stringify(body));
    await mirrored.finished;
    // the shadow's record arrives once its answer is read
    await until(() => recs.some((x) => x.shadow), 'shadow record');
    expect(recs.find((x) => x.shadow)).toMatchObject({ version: 'v2', status: 200, shadow: true });
    expect(recs.find((x) => !x.shadow)).toMatchObject({ version: 'v1', status: 200 });
  });

  it('answers longer than gateway.capture_max_bytes are not handed to the quality tap, and are counted; shorter ones are', async () => {
    const { gw, main, shadow, recs } = await setup(1, { v1: 1 }, { captureMaxBytes: 400 });
    const tapped: TappedResponse[] = [];
    gw.dp.setTap('m', { share: 1, listener: (r) => tapped.push(r) });
    const long = JSON.stringify(chatBody('x'.repeat(400)));
    main.script(json(chatBody('x'.repeat(400))), json(chatBody('main')));
    shadow.script(json(chatBody('shadow')), json(chatBody('y'.repeat(400), { prompt_tokens: 7, completion_tokens: 400 })));
    // the client's answer too long, then the shadow's: the client gets every byte all the same
    const first = await post(gw.url, chatReq());
    expect(first.body).toBe(long);
    await until(() => recs.filter((x) => x.shadow).length === 1, 'first shadow record');
    expect((await post(gw.url, chatReq())).status).toBe(200);
    await until(() => recs.filter((x) => x.shadow).length === 2, 'second shadow record');
    expect(tapped.map((t) => [t.shadow, t.pairId, (t.body.match(/"content":"(\w+)"/) ?? [])[1]])).toEqual([
      [true, 1, 'shadow'],
      [false, 2, 'main'],
    ]);
    const metrics = await gw.telemetry.metrics.registry.metrics();
    expect(metrics).toContain('glidepath_capture_dropped_total{model="m",version="v1",source="client"} 1');
    expect(metrics).toContain('glidepath_capture_dropped_total{model="m",version="v2",source="shadow"} 1');
    // a non-streaming shadow answer too long to keep: a success whose token counts are not known
    expect(recs.filter((x) => x.shadow).map((x) => [x.status, x.errorCode, x.completionTokens])).toEqual([
      [200, undefined, 2],
      [200, undefined, 0],
    ]);
  });

  it('a failing or hanging shadow does not affect the client', async () => {
    const { gw, shadow, recs } = await setup(1);
    shadow.script(status(500), hang());
    expect((await post(gw.url, chatReq())).status).toBe(200);
    expect((await post(gw.url, chatReq())).status).toBe(200);
    await shadow.request(2);
    await until(() => recs.some((x) => x.shadow && x.status === 500), 'failed shadow record');
    // the client's version window holds no shadow failure
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
  });

  it('mirrors streams too, and a share of 0 mirrors nothing', async () => {
    const { gw, main, shadow } = await setup(1);
    const events = sseEvents(3);
    main.script(stream(events));
    shadow.script(stream(events));
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.body).toBe(events.join(''));
    expect((await shadow.request(1)).json?.stream).toBe(true);

    const none = await setup(0);
    await post(none.gw.url, chatReq());
    await post(none.gw.url, chatReq());
    expect(none.shadow.requests).toHaveLength(0);
  });

  it("a shadow stream broken by its worker's error event or by garbage, then [DONE], is recorded as that error (it was a success)", async () => {
    const { gw, main, shadow, recs } = await setup(1);
    const events = sseEvents(3);
    for (const [bad, code] of [
      ['data: {"error":{"message":"EngineCore encountered an issue","code":500}}\n\n', 'upstream_error'],
      ['data: {garbage}\n\n', 'upstream_malformed_stream'],
    ] as const) {
      main.script(stream(events));
      shadow.script(stream([...events.slice(0, 2), bad, 'data: [DONE]\n\n']));
      expect((await post(gw.url, chatReq({ stream: true }))).status).toBe(200);
      await until(() => recs.some((x) => x.shadow && x.errorCode === code), `shadow record of ${code}`);
    }
  });

  it('never mirrors a request to the version that serves it', async () => {
    const { gw, shadow } = await setup(1, { v1: 1, v2: 0 });
    const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v2' } });
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-version']).toBe('v2');
    // the one request v2 got is the served one, not a mirror of it
    await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v2' } });
    expect(shadow.requests).toHaveLength(2);
  });

  it('a shadow waiting for a connection to its worker is not timed out as a hung worker', async () => {
    const main = await startUpstream(json(chatBody('main')));
    const gate = deferred();
    // the shadow worker holds its first request until the gate opens; its one connection is busy meanwhile
    const shadow = await startUpstream(json(chatBody('shadow')));
    shadow.script(async (c) => {
      await gate.promise;
      await json(chatBody('shadow'))(c);
    });
    const gw = await startGateway(
      [
        {
          name: 'm',
          versions: [
            { id: 'v1', workers: [main.url] },
            { id: 'v2', workers: [shadow.url] },
          ],
          route: { weights: { v1: 1 }, shadow: { version: 'v2', share: 1 } },
        },
      ],
      { connectionsPerWorker: 1, firstTokenTimeoutMs: 1000, requestTimeoutMs: 1000 },
      { rand: () => 0.5 },
    );
    cleanups.push(
      () => main.close(),
      () => shadow.close(),
      () => gw.close(),
    );
    const recs: RequestRecord[] = [];
    gw.telemetry.subscribe((r) => recs.push(r));
    expect((await post(gw.url, chatReq())).status).toBe(200);
    await shadow.request(1);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    expect((await post(gw.url, chatReq())).status).toBe(200);
    expect(gw.dp.pool('m', 'v2').workers[0]!.outstanding).toBe(2);
    vi.advanceTimersByTime(3000);
    gate.resolve();
    await until(() => recs.filter((x) => x.shadow).length === 2, 'both shadow records');
    const shadows = recs.filter((x) => x.shadow);
    expect(shadows.map((x) => [x.status, x.errorCode])).toEqual([
      [200, undefined],
      [200, undefined],
    ]);
    expect(shadows[1]!.queueMs).toBeGreaterThanOrEqual(3000);
    expect(gw.telemetry.stats('m', 'v2').errors).toBe(0);
  });
});

describe('shadow traffic waits last', () => {
  it("a mirrored request waits behind the shadow version's own traffic for its worker", async () => {
    // v2 in the route at weight 0: reachable by the version header, and the shadow
    const { gw, shadow } = await setup(1, { v1: 1, v2: 0 });
    const held = deferred();
    const arrivals: string[] = [];
    shadow.setDefault(async (c) => {
      const user = c.rec.json?.user;
      arrivals.push(typeof user === 'string' ? user : '?');
      if (arrivals.length === 1) await held.promise;
      await json(chatBody('v2'))(c);
    });
    const slots = gw.dp.pool('m', 'v2').workers[0]!.upstream;
    slots.setCap(1);
    const toV2 = (user: string) => post(gw.url, chatReq({ user }), { headers: { 'x-glidepath-version': 'v2' } });
    const first = toV2('first');
    await until(() => arrivals.length === 1, 'the first request to hold the slot');
    const mirrored = post(gw.url, chatReq({ user: 'mirrored' })); // served by v1, mirrored to v2
    await until(() => slots.queued === 1, 'the mirror to wait');
    const direct = toV2('direct');
    await until(() => slots.queued === 2, 'the direct request to wait');
    held.resolve();
    for (const r of await Promise.all([first, mirrored, direct])) expect(r.status).toBe(200);
    await until(() => arrivals.length === 3, 'the mirror to be sent');
    expect(arrivals).toEqual(['first', 'direct', 'mirrored']);
  });
});
