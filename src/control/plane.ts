// The control plane: owns the registry, the fleet and the routes; brings the system up from the store
// (or the config on first start), publishes route snapshots to the data plane, and audits every change.
import { AdapterRegistry } from './adapters.js';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { GlidepathConfig, ModelConfig, VersionConfig } from '../config/types.js';
import type { RouteSnapshot, RouteSpec } from '../domain/route.js';
import { routeToSpec } from '../domain/route.js';
import type { Version } from '../domain/version.js';
import { DEFAULTS } from '../defaults.js';
import { GlidepathError, NotFoundError, toGlidepathError } from '../errors.js';
import type { LevelChange } from '../gateway/degradation.js';
import type { DataPlane } from '../gateway/dataplane.js';
import { controlPlaneCache } from '../fleet/cache.js';
import type { WeightCache } from '../fleet/cache.js';
import { GpuInventory } from '../fleet/inventory.js';
import type { Providers } from '../providers/index.js';
import { Registry } from '../store/registry.js';
import type { Store, StoredRoute } from '../store/types.js';
import { EventBus } from './events.js';
import { notify } from '../rollout/webhooks.js';
import { claimedKind } from '../rollout/rollout-record.js';
import type { NotifyEvent, WebhookResult } from '../rollout/webhooks.js';
import { WorkerManager } from './worker-manager.js';
import { awakeAtBoot } from '../scheduler/time-share.js';

export interface Actor {
  /** Token name, or `controller` / `config` for automatic changes. */
  name: string;
}

const CONTROLLER: Actor = { name: 'controller' };

export type StoredRouteSpec = StoredRoute & RouteSpec;

export class ControlPlane {
  readonly registry: Registry;
  readonly inventory: GpuInventory;
  readonly workers: WorkerManager;
  /** The weight cache (`cache download`). */
  readonly weightCache: WeightCache;
  readonly events = new EventBus();
  /** LoRA adapters per model (adapters.ts). */
  readonly adapters = new AdapterRegistry(this);
  /**
   * The config's models by name: the health controller asks once per worker per tick and per failed
   * request (a search of 100 models each time cost more than the rest of its tick).
   */
  private readonly modelsByName: ReadonlyMap<string, ModelConfig>;
  /** Serialises changes per model: one operation at a time (a swap never races a rollback). */
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Run after a version's workers are up, before it is ready (the health controller records probe sets); one that throws fails the load. */
  readonly loadHooks: ((v: Version, workerIds: string[]) => Promise<void>)[] = [];

  constructor(
    readonly cfg: GlidepathConfig,
    readonly store: Store,
    readonly dp: DataPlane,
    readonly providers: Providers,
  ) {
    this.modelsByName = new Map(cfg.models.map((m) => [m.name, m]));
    this.registry = new Registry(store);
    this.inventory = new GpuInventory(cfg.gpus, store, [...cfg.timeSharing, ...cfg.sharedStandby]);
    this.workers = new WorkerManager(store, this.inventory, providers, dp, this.events, cfg.server.dataDir);
    this.weightCache = controlPlaneCache(cfg, this.registry);
  }

  modelConfig(name: string): ModelConfig {
    const m = this.modelsByName.get(name);
    if (!m)
      throw new NotFoundError(
        'model_not_found',
        `model ${JSON.stringify(name)} is not in the config (models: ${this.cfg.models.map((x) => x.name).join(', ')})`,
      );
    return m;
  }

  async version(model: string, id: string): Promise<Version> {
    this.modelConfig(model);
    return this.registry.get(model, id);
  }

  /** Run `fn` with the model's lock held; operations on one model never interleave. */
  async exclusive<T>(model: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(model) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.locks.set(model, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(model) === tail) this.locks.delete(model);
    }
  }

  /** Record who did what, with its result and duration; rethrows the operation's error. */
  async audited<T>(actor: Actor, action: string, target: string, params: unknown, fn: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      const r = await fn();
      await this.store.appendAudit({ at: Date.now(), actor: actor.name, action, target, params, result: 'ok', durationMs: performance.now() - t0 });
      return r;
    } catch (err) {
      const e = toGlidepathError(err);
      await this.store.appendAudit({
        at: Date.now(),
        actor: actor.name,
        action,
        target,
        params,
        result: 'error',
        errorCode: e.code,
        durationMs: performance.now() - t0,
      });
      throw err;
    }
  }

  /** The data plane changed a model's degradation level (docs/resilience.md): an event, an audit entry and a notification. */
  degradationChanged(model: string, c: LevelChange): void {
    const worse = c.to > c.from;
    const message = `${model}: degradation level ${c.from} → ${c.to} (healthy capacity ${c.ratio.toFixed(2)} of what it must serve)`;
    const data = { from: c.from, to: c.to, capacity_ratio: c.ratio };
    this.events.emit({ kind: 'degradation', model, message, data });
    const audit = { at: Date.now(), actor: 'glidepath', action: 'degradation', target: model, params: data, result: 'ok' as const, durationMs: 0 };
    this.store.appendAudit(audit).catch((err: unknown) => {
      this.events.emit({ kind: 'error', model, message: `could not audit the degradation change of ${model}: ${(err as Error).message}` });
    });
    void this.notify({ kind: worse ? 'degraded' : 'recovered', model, message, data });
  }

  /** Send a notification to every configured webhook; never throws (outcomes become events). */
  notify(event: NotifyEvent): Promise<WebhookResult[]> {
    if (this.cfg.notifications.webhooks.length === 0) return Promise.resolve([]);
    return notify(this.cfg.notifications.webhooks, event, { events: this.events }).catch(() => []);
  }

  // ---- routes ---------------------------------------------------------------------------

  route(model: string): RouteSnapshot {
    return this.dp.model(model).route;
  }

  /**
   * Publish a new route: the data plane validates and swaps it (one reference assignment, done
   * before this returns its promise: traffic moves at once), then it is persisted. Resolves to the
   * snapshot and how long the swap itself took (ms).
   */
  async publishRoute(spec: RouteSpec): Promise<{ route: RouteSnapshot; switchMs: number }> {
    const prev = this.dp.model(spec.model).route;
    const t0 = performance.now();
    let route = this.dp.setRoute(spec, prev.revision);
    const switchMs = performance.now() - t0;
    const publishedAt = Date.now();
    try {
      route = await this.persistRoute(route, publishedAt);
    } catch (err) {
      // cluster mode: a route etcd did not take is swapped back, or this replica would serve a route no
      // other replica ever hears of — unless the commit landed and only its answer was lost
      if (this.cfg.store.kind === 'etcd' && this.dp.model(spec.model).route === route) {
        const stored = await this.store.getRoute(spec.model).catch(() => undefined);
        if (stored?.revision !== route.revision || stored.publishedAt !== publishedAt) {
          this.dp.restoreRoute(routeToSpec(prev), prev.revision);
          throw err;
        }
      } else throw err;
    }
    this.events.emit({
      kind: 'route',
      model: spec.model,
      message: `route of ${spec.model} → revision ${route.revision}: ${describeWeights(route)}`,
      data: routeToSpec(route),
    });
    return { route, switchMs };
  }

  /**
   * The data plane is the truth for this process's routes: the stored one is replaced whatever its
   * revision. When the store is ahead (a commit whose answer was lost, a write of a replica that no
   * longer leads), the route is written one past it and the data plane's revision follows.
   */
  private async persistRoute(route: RouteSnapshot, publishedAt = Date.now()): Promise<RouteSnapshot> {
    // publishedAt: when this process swapped it (a cluster follower measures how long it took to reach it)
    const revision = await this.store.tx(async (t) => {
      const stored = await t.getRoute(route.model);
      const rev = Math.max(route.revision, (stored?.revision ?? 0) + 1);
      const rec: StoredRouteSpec = { ...routeToSpec(route), model: route.model, revision: rev, publishedAt };
      await t.putRoute(rec, stored ? stored.revision : 0);
      return rev;
    });
    if (revision === route.revision || this.dp.model(route.model).route !== route) return route;
    return this.dp.restoreRoute(routeToSpec(route), revision);
  }

  // ---- boot and shutdown ----------------------------------------------------------------

  /**
   * Bring the fleet up. First start: register the config's versions, load the ones its routes
   * name, make the route's stable version active. Later starts: the store wins: loaded versions
   * come back (adopting workers that survived), the persisted route is restored exactly.
   */
  async boot(onProgress: (m: string) => void = () => undefined): Promise<void> {
    const seed = await this.registry.seedFromConfig(this.cfg);
    for (const c of seed.conflicts) {
      onProgress(`warning: ${c.model}/${c.id} in the config has card ${c.config} but the store has ${c.stored}; keeping the stored version`);
    }
    const rolling = await this.rollingVersions();
    // time-shared models: the one to be awake loads last, each other is put to sleep once loaded
    const awake = new Set(await Promise.all(this.cfg.timeSharing.map((g) => awakeAtBoot(g, (k) => this.store.getSetting(k)))));
    const sleeper = (name: string) => (awake.has(name) ? undefined : this.cfg.timeSharing.find((g) => g.models.includes(name)));
    for (const said of await this.inventory.reserveSlots(Date.now())) onProgress(said);
    const order = [...this.cfg.models.filter((m) => !awake.has(m.name)), ...this.cfg.models.filter((m) => awake.has(m.name))];
    for (const m of order) {
      const versions = await this.registry.list(m.name);
      const stored = (await this.store.getRoute(m.name)) as StoredRouteSpec | undefined;
      const first = stored === undefined;
      const spec: RouteSpec = first
        ? { model: m.name, weights: m.route.weights, overrides: m.route.overrides, stickySalt: m.route.stickySalt, shadow: m.route.shadow }
        : storedToSpec(stored);
      // a replica taking over leadership already serves the model (its mirror built it from the store): kept as it is
      if (!this.dp.models.has(m.name))
        this.dp.addModel({
          model: m.name,
          versions: versions.map((v) => ({ id: v.id, cardChecksum: v.cardChecksum })),
          // a placeholder until workers are up; replaced below before anything is served
          route: { model: m.name, weights: { [Object.keys(spec.weights)[0] ?? versions[0]?.id ?? '']: 1 } },
        });
      // loading interrupted by a crash cannot be trusted: mark failed (the operator redeploys)
      for (const v of versions.filter((x) => x.status === 'loading' && !rolling.has(`${m.name}/${x.id}`))) {
        await this.registry.transition(
          m.name,
          v.id,
          'failed',
          { failure: { code: 'interrupted', message: 'glidepath restarted while this version was loading' } },
          { actor: 'controller' },
        );
        // the workers its load had started (warm or not) are not adopted: left alone they would run on, unknown, on their GPUs
        const { records, stopped } = await this.workers.discard(v);
        if (records > 0) onProgress(`${m.name}/${v.id}: let go of ${records} worker(s) of a load the restart cut short (${stopped} still running, stopped)`);
      }
      const needed = new Set<string>();
      for (const v of await this.registry.list(m.name)) if (v.status === 'active' || v.status === 'standby' || v.status === 'ready') needed.add(v.id);
      // the versions of an unfinished rolling update: their workers are adopted as they are (how many
      // of each is the update's business: it reads the fleet and carries on), never reloaded
      for (const v of versions) {
        const by = rolling.get(`${m.name}/${v.id}`);
        if (by === undefined) continue;
        // claimed before any controller runs: health's recovery must not refill a version the update shrinks
        this.workers.counts.claim(m.name, v.id, by);
        const adopted = await this.workers.adopt(v);
        onProgress(`${m.name}/${v.id}: adopted ${adopted} running worker(s) of an unfinished rolling update`);
        needed.delete(v.id);
      }
      if (first) for (const [id, w] of Object.entries(spec.weights)) if (w > 0) needed.add(id);
      // versions that sleep load first, each put back to sleep once loaded: on shared GPUs (a time-shared
      // standby) two versions are never awake at once
      const asleep = new Set<string>();
      for (const id of needed) if ((await this.workers.sleptLevel(m.name, id)) !== undefined) asleep.add(id);
      for (const id of [...needed].sort((a, b) => Number(asleep.has(b)) - Number(asleep.has(a)))) {
        const v = await this.registry.get(m.name, id);
        const adopted = first ? 0 : await this.workers.adopt(v);
        const want = v.provider.kind === 'static' ? v.provider.endpoints.length : v.replicas;
        // with health on, some survivors are enough: its recovery starts what is missing (and finishes a
        // replacement the restart cut short) instead of reloading a version that serves
        const recovers = m.health?.enabled === true && v.provider.kind !== 'static';
        if (adopted >= want || (adopted > 0 && recovers)) {
          onProgress(`${m.name}/${id}: adopted ${adopted} running worker(s)${adopted < want ? `; ${want - adopted} more are started by recovery` : ''}`);
          continue;
        }
        if (adopted > 0) await this.workers.stopVersion(m.name, id, 2_000);
        await this.load(v, CONTROLLER, onProgress, v.status === 'registered' || v.status === 'failed' || v.status === 'retired');
        const slept = (await this.workers.sleptLevel(m.name, id)) ?? sleeper(m.name)?.sleepLevel;
        if (slept !== undefined) await this.workers.sleepVersion(m.name, id, slept);
      }
      if (first) {
        const route = this.dp.setRoute(spec);
        await this.persistRoute(route);
        const stable = route.stable;
        const sv = await this.registry.get(m.name, stable);
        if (sv.status === 'ready' || sv.status === 'standby')
          await this.registry.promote(m.name, stable, { actor: 'config', reason: 'initial route from the config' });
      } else {
        await this.restoreStoredRoute(spec, stored.revision, onProgress);
      }
      if (m.timeSharedStandby === true) await this.settleStandby(m.name, onProgress);
      onProgress(`${m.name}: serving ${describeWeights(this.route(m.name))}`);
    }
    const orphans = await this.workers.releaseOrphanGpus();
    if (orphans > 0) onProgress(`freed ${orphans} GPU(s) held for workers whose start a restart cut short`);
  }

  /**
   * The stored route back exactly, or — when it no longer passes the route rules (one stored before a
   * rule was added: weights that summed past the largest number were accepted and stored as all 0)
   * — everything to the active version, persisted one revision on, with a warning: a route that
   * cannot be restored must not keep `glidepath up` from starting. No active version: the error stands.
   */
  private async restoreStoredRoute(spec: RouteSpec, revision: number, onProgress: (m: string) => void): Promise<void> {
    try {
      this.dp.restoreRoute(spec, revision);
      return;
    } catch (err) {
      if (!(err instanceof GlidepathError) || err.code !== 'invalid_route') throw err;
      const active = (await this.registry.list(spec.model)).find((v) => v.status === 'active');
      if (active === undefined) throw err;
      const route = this.dp.restoreRoute({ model: spec.model, weights: { [active.id]: 1 }, stable: active.id, stickySalt: spec.stickySalt }, revision + 1);
      await this.persistRoute(route);
      onProgress(
        `warning: the stored route of ${spec.model} cannot be restored (${err.message}); serving only its active version ${active.id} instead (revision ${route.revision})`,
      );
    }
  }

  /**
   * A time-shared standby after a restart: whatever the sleep records say (a crash in the middle of a
   * swap's wake), the version the route serves is awake and every other one asleep, the others first.
   */
  private async settleStandby(model: string, onProgress: (m: string) => void): Promise<void> {
    const routed = new Set(
      this.route(model)
        .versions.filter((v) => v.weight > 0)
        .map((v) => v.id),
    );
    const loaded = [...new Set(this.workers.infos(model).map((w) => w.version))];
    for (const v of loaded)
      if (!routed.has(v) && !this.workers.isAsleep(model, v)) {
        await this.workers.sleepVersion(model, v, 1);
        onProgress(`${model}/${v}: put to sleep (its route serves ${[...routed].join(', ')} on the same GPUs)`);
      }
    for (const v of loaded)
      if (routed.has(v) && this.workers.isAsleep(model, v)) {
        await this.workers.wakeVersion(model, v);
        onProgress(`${model}/${v}: woken (its route serves it)`);
      }
  }

  /** `model/version` → rollout id, both sides of every unfinished rolling update (read raw: the controller validates the record). */
  private async rollingVersions(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const r of await this.store.listActiveRollouts()) {
      if (claimedKind(r.state) !== 'rolling') continue;
      const { from, to } = r.state as { from?: unknown; to?: unknown };
      for (const v of [from, to]) if (typeof v === 'string') out.set(`${r.model}/${v}`, r.id);
    }
    return out;
  }

  /**
   * Load a version's workers (registered/failed/retired → loading → ready), measuring the load time.
   * With `transition` false the status is left alone (re-creating workers of a loaded version).
   */
  async load(v: Version, actor: Actor, onProgress: (m: string) => void, transition = true): Promise<Version> {
    if (transition) await this.registry.transition(v.model, v.id, 'loading', {}, { actor: actor.name });
    this.events.emit({ kind: 'version_loading', model: v.model, version: v.id, message: `loading ${v.model}/${v.id}` });
    try {
      const started = await this.workers.startVersion(v, onProgress);
      try {
        for (const hook of this.loadHooks)
          await hook(
            v,
            started.workers.map((w) => w.id),
          );
      } catch (err) {
        await this.workers.unloadVersion(v.model, v.id, DEFAULTS.control.failedStartStopGraceMs);
        throw err;
      }
      const patch = { loadTimeMs: started.loadTimeMs, gpus: started.gpus };
      const out = transition
        ? await this.registry.transition(v.model, v.id, 'ready', patch, { actor: actor.name })
        : await this.registry.update(v.model, v.id, patch);
      this.events.emit({
        kind: 'version_ready',
        model: v.model,
        version: v.id,
        message: `${v.model}/${v.id} ready in ${Math.round(started.loadTimeMs)} ms on ${started.workers.length} worker(s)`,
      });
      return out;
    } catch (err) {
      const e = err instanceof GlidepathError ? err : toGlidepathError(err);
      if (transition)
        await this.registry.transition(v.model, v.id, 'failed', { failure: { code: e.code, message: (err as Error).message } }, { actor: actor.name });
      this.events.emit({ kind: 'version_failed', model: v.model, version: v.id, message: `${v.model}/${v.id} failed to load: ${(err as Error).message}` });
      throw err;
    }
  }

  async shutdown(stopWorkers = true): Promise<void> {
    // the workers left running are adopted by the next control plane; a start in flight never is
    // (adoption stops what it finds `starting`): it is cancelled, its process stopped, as with a full stop
    if (stopWorkers) await this.workers.stopAll();
    else await this.workers.cancelStarts();
    await this.dp.close();
  }

  workDir(): string {
    return path.join(this.cfg.server.dataDir, 'workers');
  }

  versionConfig(model: string, id: string): Promise<VersionConfig> {
    return this.registry.get(model, id);
  }
}

function describeWeights(r: RouteSnapshot): string {
  return r.versions
    .filter((v) => v.weight > 0)
    .map((v) => `${v.id} ${(v.weight * 100).toFixed(v.weight * 100 < 1 ? 2 : 0)}%`)
    .join(', ');
}

/** A stored route as the data plane takes it. */
export function storedToSpec(s: StoredRouteSpec): RouteSpec {
  return { model: s.model, weights: s.weights, stable: s.stable, overrides: s.overrides, stickySalt: s.stickySalt, shadow: s.shadow };
}
