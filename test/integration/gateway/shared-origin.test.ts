// Workers of different models at one endpoint share its upstream connections (bench:scale: 1,000 workers
// on one endpoint held one connection or more each); each worker keeps its own count of requests.
import { afterEach, describe, expect, it } from 'vitest';
import { startUpstream } from '../../helpers/upstream.js';
import type { Upstream } from '../../helpers/upstream.js';
import { chatReq, post, startGateway } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

let up: Upstream | undefined;
let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  await up?.close();
  gw = up = undefined;
});

describe('workers sharing an endpoint', () => {
  it('requests to 3 models × 2 workers on one endpoint, one after another, use one upstream connection; each worker counts its own', async () => {
    up = await startUpstream();
    let connections = 0;
    up.server.on('connection', () => connections++);
    const models = ['a', 'b', 'c'].map((name) => ({ name, versions: [{ id: 'v1', workers: [up!.url, up!.url] }], route: { weights: { v1: 1 } } }));
    // no spare connections (gateway.preconnect): the one connection is what is counted
    gw = await startGateway(models, { picker: 'round_robin', preconnect: { ratio: 0, maxPerWorker: 0 } });
    const served: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await post(gw.url, chatReq({ model: ['a', 'b', 'c'][i % 3] }));
      expect(r.status).toBe(200);
      served.push(`${['a', 'b', 'c'][i % 3]}:${String(r.headers['x-glidepath-worker'])}`);
    }
    expect(connections).toBe(1);
    // every worker of every model took its turn: the connection carried six workers' requests
    expect(new Set(served).size).toBe(6);
    for (const name of ['a', 'b', 'c']) for (const w of gw.dp.pool(name, 'v1').workers) expect([w.outstanding, w.upstream.busy]).toEqual([0, 0]);
  });
});
