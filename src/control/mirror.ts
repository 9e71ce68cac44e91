// A follower replica's data plane, kept equal to the store (cluster mode, docs/cluster.md): the routes
// the leader publishes (applied from the watch event itself: one etcd round trip after the commit), and
// each model's versions and workers (re-read from the store when their records change). It only serves:
// it starts, stops and judges nothing; that is the leader's.
import type { GlidepathConfig } from '../config/types.js';
import { engineTraitsOf } from '../domain/spec.js';
import type { Version } from '../domain/version.js';
import type { DataPlane } from '../gateway/dataplane.js';
import { parseHealth, routingWeightOf } from '../health/persisted.js';
import type { RecordChange } from '../store/kv/coordination.js';
import type { RolloutRecord, Store, WorkerRecord } from '../store/types.js';
import { AdapterRegistry } from './adapters.js';
import { AdapterCanaryMirror } from './mirror-adapter-canary.js';
import { kvRoleOf } from './adoption.js';
import { storedToSpec } from './plane.js';
import type { StoredRouteSpec } from './plane.js';

/** Worker states that serve (a sleeping worker is known but not routed to). */
const LIVE = new Set(['ready', 'sleeping']);

export class Mirror {
  /** Per model: a sync running, and whether another was asked for meanwhile. */
  private readonly syncing = new Map<string, { again: boolean; done: Promise<void> }>();
  private stopped = false;
  /** Syncs running now take the stored route even when it is not newer (syncAll(true)). */
  private exact = false;
  /** Worker record key → its model (a deletion carries no value). */
  private readonly workerModels = new Map<string, string>();

  constructor(
    private readonly cfg: GlidepathConfig,
    private readonly store: Store,
    private readonly dp: DataPlane,
    private readonly onError: (message: string) => void,
    /** A model this replica serves from now on (the leader published it). */
    private readonly onModel: (model: string) => void = () => undefined,
  ) {
    // read-only here: restore() hands the data plane what the store says; nothing is registered or audited
    this.adapters = new AdapterRegistry({
      cfg,
      dp,
      store,
      modelConfig: (name) => {
        const m = cfg.models.find((x) => x.name === name);
        if (!m) throw new Error(`model ${name} is not in the config`);
        return m;
      },
      audited: (_actor, _action, _target, _params, fn) => fn(),
      exclusive: (_key, fn) => fn(),
    });
    this.adapterCanaries = new AdapterCanaryMirror(dp, cfg.gateway.drainTimeoutMs, () => this.syncAdapters(), onError);
  }

  /** The candidate's share of each adapter canary the leader runs, and the versions they retire. */
  private readonly adapterCanaries: AdapterCanaryMirror;

  /** The models' LoRA adapters (config and registered through the API), as the leader serves them. */
  private readonly adapters: AdapterRegistry;

  /**
   * Bring every configured model in line with the store. `exact`: take the stored route even when it is
   * not newer than the data plane's (a replica that stops leading, or comes back from an outage, may
   * hold a route it swapped in but never committed); otherwise only a newer route is taken, so a sync
   * that read before a route change cannot put the older route back.
   */
  async syncAll(exact = false): Promise<void> {
    if (exact) this.exact = true;
    await Promise.all(this.cfg.models.map((m) => this.sync(m.name)));
    this.exact = false;
    await this.syncAdapters();
    await this.syncAdapterCanaries();
  }

  /** Every adapter canary in progress, read again; one that ended meanwhile leaves no candidate behind. */
  private async syncAdapterCanaries(): Promise<void> {
    if (this.stopped) return;
    try {
      const mark = this.adapterCanaries.mark();
      this.adapterCanaries.reconcile(await this.store.listActiveRollouts(), mark);
    } catch (err) {
      this.onError(`could not mirror the adapter canaries from the store: ${(err as Error).message}`);
    }
  }

  /** The adapters the store registers (after every model is in the data plane). */
  private async syncAdapters(): Promise<void> {
    if (this.stopped) return;
    const before = this.dp.adapters.list();
    try {
      await this.adapters.restore();
    } catch (err) {
      this.onError(`could not mirror the adapters from the store: ${(err as Error).message}`);
      return;
    }
    // a version no longer served under its name (a canary promoted another, the adapter was removed):
    // unloaded from the workers this replica loaded it on, as the leader does on its own
    for (const a of before) {
      if (this.dp.adapters.get(a.name)?.servedAs !== a.servedAs && !this.dp.adapters.isServed(a.servedAs))
        void this.adapterCanaries.unload(a.model, a.servedAs, `adapter ${a.name}`);
    }
  }

  /** A record changed in the store: apply a route at once, re-read the model for anything else. */
  changed(c: RecordChange): void {
    if (this.stopped) return;
    if (c.area === 'settings') {
      if (c.key.startsWith('settings/adapters.')) void this.syncAdapters();
      return;
    }
    if (c.area === 'rollouts') {
      if (c.value !== undefined) this.adapterCanaries.apply(c.value as RolloutRecord);
      return;
    }
    if (c.area === 'routes') {
      const r = c.value as StoredRouteSpec | undefined;
      // fast path only when this replica can serve every version the route sends traffic to: a route
      // that moves a share onto workers whose records are still on their way (watches of different
      // areas are not ordered with each other) is taken with those records, from one snapshot
      if (r && this.canServe(r) && this.applyRoute(r, true)) return;
    }
    const model = this.modelOf(c);
    if (model !== undefined && this.cfg.models.some((m) => m.name === model)) void this.sync(model);
  }

  /** The model a changed record belongs to: from its key (routes/<m>, versions/<m>/<id>), or a worker's record (remembered for its deletion). */
  private modelOf(c: RecordChange): string | undefined {
    if (c.area !== 'workers') {
      const seg = c.key.split('/')[1];
      return seg === undefined ? undefined : decodeURIComponent(seg);
    }
    const w = c.value as WorkerRecord | undefined;
    if (w) this.workerModels.set(c.key, w.model);
    const model = w?.model ?? this.workerModels.get(c.key);
    if (!w) this.workerModels.delete(c.key);
    return model;
  }

  /** Stop following (the replica became leader: its control plane owns the data plane now). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.syncing.values()].map((s) => s.done));
  }

  /** Every version the route gives weight has a worker this replica may route to. */
  private canServe(r: StoredRouteSpec): boolean {
    const st = this.dp.models.get(r.model);
    if (!st) return false;
    const now = Date.now();
    return Object.entries(r.weights).every(([v, w]) => w <= 0 || (st.pools.get(v)?.routableCount(now) ?? 0) > 0);
  }

  /** A newer route for a model the data plane serves: swapped in; false when it cannot be (unknown model or version). */
  private applyRoute(r: StoredRouteSpec, fresh = false, exact = false): boolean {
    const st = this.dp.models.get(r.model);
    if (!st) return false;
    if (exact ? r.revision === st.route.revision : r.revision <= st.route.revision) return true;
    try {
      this.dp.restoreRoute(storedToSpec(r), r.revision);
      // only a change heard as it happened measures propagation (a sync reads routes of any age)
      if (fresh && typeof r.publishedAt === 'number')
        this.dp.telemetry.metrics.routePropagation.labels(r.model).observe(Math.max(0, Date.now() - r.publishedAt) / 1000);
      return true;
    } catch {
      return false; // it names a version this replica does not know yet: the model is re-read
    }
  }

  /** Re-read one model (coalesced: changes during a sync cause one more). */
  sync(model: string): Promise<void> {
    const running = this.syncing.get(model);
    if (running) {
      running.again = true;
      return running.done;
    }
    const entry = { again: false, done: Promise.resolve() };
    entry.done = (async () => {
      do {
        entry.again = false;
        if (this.stopped) break;
        await this.syncOnce(model).catch((err: unknown) => this.onError(`could not mirror ${model} from the store: ${(err as Error).message}`));
      } while (entry.again);
      this.syncing.delete(model);
    })();
    this.syncing.set(model, entry);
    return entry.done;
  }

  private async syncOnce(model: string): Promise<void> {
    // one snapshot: the route, versions and workers as they were together
    const { route, versions, workers } = await this.store.tx(async (t) => ({
      route: (await t.getRoute(model)) as StoredRouteSpec | undefined,
      versions: await t.listVersions({ model }),
      workers: await t.listWorkers({ model }),
    }));
    if (!route) return; // the leader has not published it yet
    if (this.stopped) return;
    const added = !this.dp.models.has(model);
    if (added) {
      this.dp.addModel({ model, versions: versions.map((v) => ({ id: v.id, cardChecksum: v.cardChecksum })), route: storedToSpec(route) });
      const m = this.cfg.models.find((x) => x.name === model);
      if (m) this.dp.setAdmission(model, m.tiers, m.degradation);
    }
    for (const v of versions) this.dp.addVersion(model, v.id, v.cardChecksum, engineTraitsOf(v));
    for (const w of workers) this.workerModels.set(`workers/${encodeURIComponent(w.id)}`, model);
    for (const v of versions) this.setWorkers(v, workers);
    this.applyRoute(route, false, this.exact);
    // a model first heard of now (the replica started before the leader published it): its adapters too
    if (added) {
      this.onModel(model);
      await this.syncAdapters();
    }
  }

  private setWorkers(v: Version, all: readonly WorkerRecord[]): void {
    const mine = all.filter((w) => w.versionId === v.id && LIVE.has(w.state)).sort((a, b) => (a.id < b.id ? -1 : 1));
    const pool = this.dp.models.get(v.model)?.pools.get(v.id);
    if (!pool || (mine.length === 0 && pool.workers.length === 0)) return;
    this.dp.setWorkers(
      v.model,
      v.id,
      mine.map((w) => ({ id: w.id, url: w.endpoint, kvRole: kvRoleOf(w.info) })),
    );
    for (const w of mine) {
      this.dp.setWorkerHealth(v.model, v.id, w.id, routingWeightOf(w.role ?? 'serving', parseHealth(w.health)));
      this.dp.setWorkerRoutable(v.model, v.id, w.id, w.state !== 'sleeping');
    }
  }
}
