// Review of src/control/mirror.ts: a follower's sync that read the route before a newer one arrived by
// watch overwrites the newer one with what it read.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Mirror } from '../../src/control/mirror.js';
import { buildDataPlane } from '../../src/control/app.js';
import { Registry } from '../../src/store/registry.js';
import { openMemoryStore } from '../../src/store/sqlite.js';
import type { Store, StoredRoute } from '../../src/store/types.js';

const route = (revision: number, weights: Record<string, number>): StoredRoute => ({ model: 'm', revision, weights, publishedAt: Date.now() });

describe('Mirror', () => {
  it('a sync running while a newer route arrives by watch puts the older route back (and nothing re-reads it)', async () => {
    const cfg = parseConfig({
      models: [
        {
          name: 'm',
          versions: [
            { id: 'v1', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } },
            { id: 'v2', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } },
          ],
          route: { weights: { v1: 1 } },
        },
      ],
    });
    const real = openMemoryStore();
    await new Registry(real).seedFromConfig(cfg);
    await real.putRoute(route(1, { v1: 1 }), 0);

    // getRoute can be held, to place a watch event between a sync's read and its apply
    let hold: Promise<void> | undefined;
    const store = new Proxy(real, {
      get(target, p, recv) {
        if (p === 'getRoute')
          return async (m: string) => {
            const r = await target.getRoute(m);
            if (hold) await hold;
            return r;
          };
        const v = Reflect.get(target, p, recv) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as Store;

    const { dp } = buildDataPlane(cfg);
    const mirror = new Mirror(cfg, store, dp, () => undefined);
    await mirror.syncAll();
    expect(dp.models.get('m')?.route.revision).toBe(1);

    // the leader publishes revision 2; then a worker/version record changes (a health update): a sync starts and reads revision 2
    await real.putRoute(route(2, { v1: 1, v2: 1 }), 1);
    let release!: () => void;
    hold = new Promise((r) => (release = r));
    mirror.changed({ area: 'versions', key: 'versions/m/v2', value: {} });
    await new Promise((r) => setTimeout(r, 10));
    // meanwhile the leader publishes revision 3 (e.g. rollback --instant) and the watch delivers it
    await real.putRoute(route(3, { v2: 1 }), 2);
    mirror.changed({ area: 'routes', key: 'routes/m', value: route(3, { v2: 1 }) });
    expect(dp.models.get('m')?.route.revision).toBe(3);
    // the sync finishes with what it read
    hold = undefined;
    release();
    await new Promise((r) => setTimeout(r, 50));
    // FAILS today: the follower serves revision 2 again, and keeps it until the next route change
    expect(dp.models.get('m')?.route.revision).toBe(3);
    await dp.close();
    await real.close();
  });
});
