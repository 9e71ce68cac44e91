// Review of src/store/kv/*.ts and the cluster-mode revert in src/control/plane.ts, on the in-memory backend.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ControlPlane } from '../../src/control/plane.js';
import { buildDataPlane } from '../../src/control/app.js';
import { Providers } from '../../src/providers/index.js';
import { openKvStore } from '../../src/store/kv/store.js';
import { Registry } from '../../src/store/registry.js';
import { openMemoryStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import type { GlidepathConfig, ModelConfig, VersionConfig } from '../../src/config/types.js';
import { MemoryKv } from '../helpers/memory-kv.js';
import { versionConfig } from '../unit/domain/version-fixture.js';
import { UnavailableError } from '../../src/errors.js';

function models(n: number, perModel: number): Pick<GlidepathConfig, 'models'> {
  const out: ModelConfig[] = [];
  for (let i = 0; i < n; i++) {
    const vs: VersionConfig[] = [];
    for (let j = 0; j < perModel; j++) vs.push(versionConfig(`v${j}`, `model-${i}`));
    out.push({ name: `model-${i}`, priority: 'high', slo: {}, minReplicas: 1, maxReplicas: 1, versions: vs, route: { weights: { v0: 1 }, overrides: {} } } as ModelConfig);
  }
  return { models: out };
}

describe('KvStore vs SQLite', () => {
  it('seedFromConfig of a config with more than max_txn_ops versions: SQLite boots, etcd refuses the whole boot', async () => {
    const cfg = models(65, 2); // 130 versions: within the 100 models
    const sqlite = await new Registry(openMemoryStore()).seedFromConfig(cfg);
    expect(sqlite.added).toHaveLength(130);
    // FAILS today: UnavailableError store_tx_too_large ("writes 130 keys; memory takes at most 127")
    const kv = await new Registry(await openKvStore(new MemoryKv())).seedFromConfig(cfg);
    expect(kv.added).toHaveLength(130);
  });
});

/** etcd answered after the deadline: the commit landed, the client got an error (DEADLINE_EXCEEDED). */
class LateKv extends MemoryKv {
  lateOnce = false;
  override async commit(guard: string, writes: ReadonlyMap<string, string | null>): Promise<boolean> {
    const ok = await super.commit(guard, writes);
    if (this.lateOnce) {
      this.lateOnce = false;
      throw new UnavailableError('store_unavailable', 'etcd memory: deadline exceeded');
    }
    return ok;
  }
}

describe('ControlPlane.publishRoute in cluster mode', () => {
  it('a commit whose answer timed out is swapped back locally though etcd has it; every later publish of that model then fails', async () => {
    const cfg = parseConfig({
      store: { kind: 'etcd', endpoints: ['http://127.0.0.1:1'] },
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
    const kv = new LateKv();
    const store: Store = await openKvStore(kv);
    const built = buildDataPlane(cfg);
    const { dp } = built;
    dp.addModel({ model: 'm', versions: [{ id: 'v1', cardChecksum: 'a' }, { id: 'v2', cardChecksum: 'b' }], route: { model: 'm', weights: { v1: 1 } } });
    dp.setWorkers('m', 'v1', [{ id: 'w1', url: 'http://127.0.0.1:9' }]);
    dp.setWorkers('m', 'v2', [{ id: 'w2', url: 'http://127.0.0.1:9' }]);
    const cp = new ControlPlane(cfg, store, dp, new Providers());
    await cp.publishRoute({ model: 'm', weights: { v1: 1 } }); // revision 2 stored

    kv.lateOnce = true;
    await expect(cp.publishRoute({ model: 'm', weights: { v2: 1 } })).rejects.toThrow(/deadline/);
    // the store (and so every follower) has v2 at revision 3; the leader swapped itself back to revision 2
    expect((await store.getRoute('m'))?.revision).toBe(3);
    expect(dp.models.get('m')?.route.revision).toBe(2);
    // the operator retries: FAILS today with route_revision_invalid ("revision 3 must be ... greater than the expected 3"), and will forever
    await cp.publishRoute({ model: 'm', weights: { v2: 1 } });
    expect(dp.models.get('m')?.route.revision).toBe(4);
    await dp.close();
  });
});
