// The passive health signal at its source: every failed attempt of a request on a worker is reported
// (telemetry.workerFault) with what went wrong — also when the request then succeeded on another
// worker — and the client's own problems (a 4xx, a client that hangs up) never are.
import { describe, expect, it } from 'vitest';
import type { WorkerFault } from '../../../src/telemetry/telemetry.js';
import { chatReq, gatewayFixtures, oneModel, post, until } from '../../helpers/gateway.js';
import { destroyAfter, resetBeforeAnswer, sseEvents, status } from '../../helpers/upstream.js';

const f = gatewayFixtures();

async function setup(n: number) {
  const ups = await Promise.all(Array.from({ length: n }, () => f.upstream()));
  const g = await f.gateway(oneModel(ups.map((u) => u.url)), { maxRetries: n - 1 }, { picker: undefined, rand: () => 0 });
  const faults: WorkerFault[] = [];
  g.telemetry.subscribeFaults((x) => faults.push(x));
  return { ups, g, faults };
}

describe('worker faults (the passive health signal)', () => {
  it('a 5xx retried on another worker is reported against the worker that failed, though the client got a 200', async () => {
    const { ups, g, faults } = await setup(2);
    // p2c with rand() = 0 picks the first worker first
    ups[0]!.script(status(503));
    const r = await post(g.url, chatReq());
    expect(r.status).toBe(200);
    expect(faults.map((x) => x.code)).toEqual(['upstream_error']);
    expect(faults[0]).toMatchObject({ model: 'm', version: 'v1' });
  });

  it('a reset before the answer is reported (and ejects the worker, as before)', async () => {
    const { ups, g, faults } = await setup(1);
    ups[0]!.script(resetBeforeAnswer());
    await post(g.url, chatReq());
    expect(faults.map((x) => x.code)).toEqual(['upstream_connect_failed']);
  });

  it('a stream cut mid-way is reported', async () => {
    const { ups, g, faults } = await setup(1);
    ups[0]!.script(destroyAfter(sseEvents(5), 2));
    await post(g.url, chatReq({ stream: true }));
    await until(() => faults.length === 1, 'the fault');
    expect(faults.map((x) => x.code)).toEqual(['upstream_stream_broken']);
  });

  it("a 4xx is the client's problem and is not reported", async () => {
    const { ups, g, faults } = await setup(1);
    ups[0]!.script(status(400, { error: { message: 'bad', type: 'invalid_request_error', code: 'bad' } }));
    expect((await post(g.url, chatReq())).status).toBe(400);
    expect(faults).toEqual([]);
  });
});
