// The data plane's state and its control surface: routes (one reference swap per model), pools,
// drains and hold queues, adapters; inference requests enter through entry.ts.
import { performance } from 'node:perf_hooks';
import type { GatewayConfig } from '../config/types.js';
import { buildRoute, RouteValidationError } from '../domain/route.js';
import type { RouteSnapshot, RouteSpec } from '../domain/route.js';
import type { EngineTraits } from '../domain/spec.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import { createPicker } from './pick.js';
import type { Picker } from './pick.js';
import { SplitState } from './split.js';
import { ModelState } from './model-state.js';
import { RequestEntry } from './entry.js';
import { AdapterIndex } from './adapters.js';
import type { AdapterLoader, AdapterSpec } from './adapters.js';
import { AdapterPrefetcher } from './prefetch.js';
import { HoldQueue } from './hold.js';
import { VersionPool, Worker } from './pool.js';
import type { DrainResult, WorkerSpec } from './pool.js';
import { UpstreamOrigins } from './upstream.js';
import type { FrontRequest, FrontResponse } from './front.js';
import type { Endpoint } from './request.js';
import type { ProxyContext } from './proxy.js';
import { DEFAULTS } from '../defaults.js';
import { localResourceLog } from './local.js';
import type { LocalResourceReporter } from './local.js';
import type { ResponseTap } from './tap.js';
import { sendProbe } from './probe.js';
import type { ProbeOutcome } from './probe.js';
import { Admission } from './admission.js';
import type { DegradationListener } from './admission.js';
import type { DegradationConfig, TierConfig } from '../config/types.js';

export interface ModelRegistration {
  model: string;
  versions: { id: string; cardChecksum: string }[];
  route: RouteSpec;
}

/** The holder a hold is released by unless another is named (drain-first swaps, stop-start). */
const DEFAULT_HOLDER = 'rollout';

/** A hold's limits (the config's by default), what the model is doing, a watch on its depth, and who holds it. */
export interface HoldOptions {
  owner?: string;
  max?: number;
  timeoutMs?: number;
  why?: string;
  onDepth?: (depth: number) => void;
}

export class DataPlane {
  readonly cfg: GatewayConfig;
  readonly telemetry: Telemetry;
  readonly models = new Map<string, ModelState>();
  private readonly ctx: ProxyContext;
  /** The request path: lookup, admission, hold, version choice, the proxied request (entry.ts). */
  private readonly entry: RequestEntry;

  /** `onLocalResourceError`: where the gateway's own exhaustion is reported (default: the telemetry log, at most one warning per 10 s). */
  private readonly onDegradation: DegradationListener | undefined;
  /** The LoRA adapters registered, by name: a request naming one goes to its model's workers (adapters.ts). */
  readonly adapters = new AdapterIndex();
  /** Each model's most wanted adapters, loaded ahead of their requests (prefetch.ts); its timer stops at close. */
  readonly prefetcher: AdapterPrefetcher;
  private readonly adapterLoader: AdapterLoader | undefined;
  /** Idle upstream connections by origin, shared by the workers there (upstream-origin.ts); counts and caps stay per worker. */
  private readonly origins = new UpstreamOrigins();

  /** `onDegradation`: told when a model's degradation level changes (the control plane's event and audit). */
  constructor(
    cfg: GatewayConfig,
    telemetry: Telemetry,
    opts: {
      picker?: Picker;
      rand?: () => number;
      onLocalResourceError?: LocalResourceReporter;
      onDegradation?: DegradationListener;
      /** Loads LoRA adapters onto workers (providers/lora.ts); absent: no adapter is served. */
      adapterLoader?: AdapterLoader;
    } = {},
  ) {
    this.cfg = cfg;
    this.onDegradation = opts.onDegradation;
    this.telemetry = telemetry;
    this.ctx = {
      cfg,
      telemetry,
      metrics: telemetry.metrics,
      picker: opts.picker ?? createPicker(cfg.picker, opts.rand),
      onLocalResourceError: opts.onLocalResourceError ?? localResourceLog(telemetry.log),
    };
    this.adapterLoader = opts.adapterLoader;
    this.prefetcher = new AdapterPrefetcher(cfg.adapterPrefetch, this.models, this.adapters, opts.adapterLoader, telemetry.metrics);
    this.entry = new RequestEntry(this.ctx, this.models, this.adapters, opts.adapterLoader, this.prefetcher, opts.rand ?? Math.random);
    this.prefetcher.start();
  }

  // ---- control surface (called by the control plane; never on the request path) ----------

  /** Replace a model's LoRA adapters (names share one namespace with the models'). */
  setAdapters(model: string, specs: readonly AdapterSpec[]): void {
    this.model(model);
    this.adapters.set(model, specs, new Set(this.models.keys()));
  }

  /**
   * Unload the adapter served as `servedAs` from every worker of `model` once no request uses it there
   * (an adapter canary's candidate rolled back, the version a promotion replaced); no request takes it
   * meanwhile. Waits at most `timeoutMs` for the requests still running on it: the workers it was
   * unloaded from, those whose engine refused (named with why), and those still serving it (each
   * unloads it when its last request there ends).
   */
  async retireAdapter(model: string, servedAs: string, timeoutMs: number): Promise<{ unloaded: number; failed: string[]; pending: string[] }> {
    const loader = this.adapterLoader;
    const st = this.model(model);
    // a request that chose it before and loads it again later (a retry, a resumed stream) unloads it after itself
    this.adapters.retire(servedAs);
    if (loader === undefined) return { unloaded: 0, failed: [], pending: [] };
    const workers = [...st.pools.values()].flatMap((p) => p.workers).filter((w) => w.adapters.has(servedAs));
    /** Per worker: undefined while it still serves it, then null (unloaded) or why the unload failed. */
    const outcome: (string | null | undefined)[] = workers.map(() => undefined);
    const all = Promise.all(
      workers.map((w, i) =>
        w.adapters.retire(w, servedAs, loader).then(
          () => (outcome[i] = null),
          (err: unknown) => (outcome[i] = (err as Error).message),
        ),
      ),
    );
    // bounded: a request that runs on goes on, and its worker unloads it once it ends
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
    const failed: string[] = [];
    const pending: string[] = [];
    workers.forEach((w, i) => {
      const o = outcome[i];
      if (o === undefined) pending.push(w.id);
      else if (o !== null) failed.push(`${w.id}: ${o}`);
    });
    return { unloaded: workers.length - failed.length - pending.length, failed, pending };
  }

  /** Add a model with its versions (pools start empty) and its first route. */
  addModel(reg: ModelRegistration): RouteSnapshot {
    if (this.models.has(reg.model)) throw new ConflictError('model_exists', `model ${reg.model} is already registered`);
    const known = new Set(reg.versions.map((v) => v.id));
    const route = this.validate(reg.route, 1, known, undefined);
    const state = new ModelState(reg.model, new SplitState(route, this.cfg.stickySalt));
    for (const v of reg.versions) state.pools.set(v.id, new VersionPool(reg.model, v.id, v.cardChecksum, this.telemetry.forVersion(reg.model, v.id)));
    this.models.set(reg.model, state);
    this.publishRouteMetrics(undefined, route);
    return route;
  }

  /** Make a version known to the data plane (its pool starts empty), with what its engine can do. */
  addVersion(model: string, version: string, cardChecksum: string, traits?: EngineTraits): void {
    const st = this.model(model);
    const existing = st.pools.get(version);
    if (existing) {
      if (existing.cardChecksum !== cardChecksum) {
        throw new ConflictError('card_mismatch', `version ${version} of ${model} already has card ${existing.cardChecksum}, not ${cardChecksum}`);
      }
      if (traits !== undefined) existing.setTraits(traits);
      return;
    }
    st.pools.set(version, new VersionPool(model, version, cardChecksum, this.telemetry.forVersion(model, version), traits));
    st.admission?.shareSlots();
  }

  /** Forget a version. Refused while the route still names it or requests are in flight. */
  async removeVersion(model: string, version: string): Promise<void> {
    const st = this.model(model);
    const pool = st.pools.get(version);
    if (!pool) return;
    if (st.route.versions.some((v) => v.id === version) || Object.values(st.route.overrides).includes(version) || st.route.shadow?.version === version) {
      throw new ConflictError('version_in_route', `version ${version} is still in ${model}'s route`);
    }
    await pool.idle();
    st.pools.delete(version);
    for (const w of pool.workers) await w.close();
  }

  /**
   * Replace a version's workers. Workers that stay (same id and URL) keep their connections and
   * load counters; removed ones close after their in-flight requests finish.
   */
  setWorkers(model: string, version: string, specs: readonly WorkerSpec[]): void {
    const pool = this.pool(model, version);
    // check every spec before touching the pool: a bad one changes nothing
    const ids = new Set<string>();
    for (const s of specs) {
      if (typeof s.id !== 'string' || s.id === '') throw new BadRequestError('invalid_worker', `${model}/${version}: a worker needs a non-empty id`);
      if (ids.has(s.id)) throw new BadRequestError('invalid_worker', `${model}/${version}: worker id ${JSON.stringify(s.id)} is listed twice`);
      ids.add(s.id);
      let u: URL | undefined;
      try {
        u = new URL(s.url);
      } catch {
        u = undefined;
      }
      if (u === undefined || (u.protocol !== 'http:' && u.protocol !== 'https:')) {
        throw new BadRequestError(
          'invalid_worker',
          `${model}/${version}: worker ${s.id} has URL ${JSON.stringify(s.url)}; expected http(s)://HOST:PORT[/prefix]`,
        );
      }
    }
    const old = new Map(pool.workers.map((w) => [w.id, w]));
    const next: Worker[] = [];
    for (const s of specs) {
      const prev = old.get(s.id);
      if (prev && prev.url === s.url) {
        next.push(prev);
        old.delete(s.id);
      } else {
        next.push(
          new Worker(s, version, {
            connectTimeoutMs: this.cfg.connectTimeoutMs,
            connections: this.cfg.connectionsPerWorker,
            keepAliveTimeoutMs: DEFAULTS.gateway.upstreamKeepAliveMs,
            queueMax: this.cfg.workerQueueMax,
            queueTimeoutMs: this.cfg.queueTimeoutMs,
            preconnectRatio: this.cfg.preconnect.ratio,
            preconnectMax: this.cfg.preconnect.maxPerWorker,
            origins: this.origins,
          }),
        );
      }
    }
    pool.workers = next;
    this.models.get(model)?.admission?.reassess();
    for (const w of next) this.telemetry.metrics.workerUp.labels(model, version, w.id).set(w.routable ? 1 : 0);
    for (const w of old.values()) {
      w.routable = false;
      this.telemetry.metrics.workerUp.remove(model, version, w.id);
      // the pool's close waits for the worker's in-flight requests
      void w.close();
    }
  }

  /** Mark a worker routable or not (asleep, awake). */
  setWorkerRoutable(model: string, version: string, workerId: string, routable: boolean): void {
    const w = this.worker(model, version, workerId);
    w.routable = routable;
    this.refreshed(model, version);
    this.telemetry.metrics.workerUp.labels(model, version, workerId).set(routable ? 1 : 0);
  }

  /** The health controller's routing verdict for a worker: its weight, and for a half-open trial how many picks it holds for. */
  setWorkerHealth(model: string, version: string, workerId: string, weight: number, budget = Infinity): void {
    this.worker(model, version, workerId).setHealth(weight, budget);
    this.refreshed(model, version);
  }

  /**
   * Wait (bounded) until nothing is in flight on one worker, then abort what is left (VersionPool.drainWorker);
   * its weight must already be 0. `why`: `unhealthy` ends its streams, `removed` continues them elsewhere.
   */
  drainWorker(
    model: string,
    version: string,
    workerId: string,
    timeoutMs: number,
    why: 'unhealthy' | 'removed' = 'unhealthy',
  ): Promise<{ aborted: number; elapsedMs: number }> {
    return this.pool(model, version).drainWorker(this.worker(model, version, workerId), timeoutMs, why);
  }

  /** Send a health probe to one worker over its traffic connections (never counted as traffic). */
  probe(model: string, version: string, workerId: string, path: string, body: unknown, timeoutMs: number): Promise<ProbeOutcome> {
    return sendProbe(this.worker(model, version, workerId), path, body, timeoutMs, DEFAULTS.gateway.probeMaxBytes);
  }

  private worker(model: string, version: string, workerId: string): Worker {
    const w = this.pool(model, version).workers.find((x) => x.id === workerId);
    if (!w) throw new NotFoundError('worker_not_found', `no worker ${workerId} in ${model}/${version}`);
    return w;
  }

  /**
   * Atomically replace a model's route: validated first; on any problem the old route stays and
   * the error names it. Returns the new snapshot. `expectRevision` makes it compare-and-set.
   */
  setRoute(spec: RouteSpec, expectRevision?: number): RouteSnapshot {
    const st = this.model(spec.model);
    const prev = st.route;
    if (expectRevision !== undefined && expectRevision !== prev.revision) {
      throw new ConflictError('route_revision_conflict', `route of ${spec.model} is at revision ${prev.revision}, not ${expectRevision}`);
    }
    const route = this.validate(spec, prev.revision + 1, new Set(st.pools.keys()), prev);
    for (const v of route.versions) {
      const pool = st.pools.get(v.id) as VersionPool;
      if (v.weight > 0 && pool.workers.length === 0) {
        throw new BadRequestError('route_no_workers', `version ${v.id} of ${spec.model} has weight ${v.weight} but no workers`);
      }
      if (v.weight > 0 && pool.draining) {
        throw new BadRequestError('route_draining', `version ${v.id} of ${spec.model} is draining and cannot receive traffic`);
      }
    }
    // the switch itself: one reference assignment
    st.split = new SplitState(route, this.cfg.stickySalt);
    this.publishRouteMetrics(prev, route);
    st.admission?.reassess();
    return route;
  }

  /** A pool's routable workers or weights changed: the picker's list, and the model's capacity. */
  private refreshed(model: string, version: string): void {
    this.pool(model, version).refresh();
    this.models.get(model)?.admission?.reassess();
  }

  /** A model's priority tiers and degradation (from its config); its level is assessed at once. */
  setAdmission(model: string, tiers: TierConfig | undefined, degradation: DegradationConfig | undefined): void {
    const st = this.model(model);
    st.admission?.close();
    st.admission = new Admission(st, tiers, degradation, this.telemetry.metrics, this.onDegradation);
    st.admission.reassess();
  }

  /** Restore a persisted route exactly (revision included), e.g. after a restart. */
  restoreRoute(spec: RouteSpec, revision: number): RouteSnapshot {
    const st = this.model(spec.model);
    const prev = st.route;
    const route = this.validate(spec, revision, new Set(st.pools.keys()), prev);
    st.split = new SplitState(route, this.cfg.stickySalt);
    // zero the versions the restored route replaces, or their old weights stay on /metrics
    this.publishRouteMetrics(prev, route);
    return route;
  }

  private validate(spec: RouteSpec, revision: number, known: Set<string>, prev: RouteSnapshot | undefined): RouteSnapshot {
    try {
      return buildRoute(spec, revision, known, Date.now(), prev);
    } catch (err) {
      if (err instanceof RouteValidationError) throw new BadRequestError('invalid_route', `${spec.model}: ${err.message}`);
      throw err;
    }
  }

  private publishRouteMetrics(prev: RouteSnapshot | undefined, route: RouteSnapshot): void {
    const m = this.telemetry.metrics;
    if (prev) for (const v of prev.versions) m.routeWeight.labels(route.model, v.id).set(0);
    for (const v of route.versions) m.routeWeight.labels(route.model, v.id).set(v.weight);
    m.routeRevision.labels(route.model).set(route.revision);
  }

  /**
   * Drain a pool: no new requests (the route must no longer send it traffic), in-flight ones
   * finish; at the timeout the rest are aborted with `drain_aborted` and counted.
   */
  async drain(model: string, version: string, timeoutMs = this.cfg.drainTimeoutMs): Promise<DrainResult> {
    const pool = this.pool(model, version);
    const started = performance.now();
    pool.draining = true;
    const before = pool.inflight.size;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      pool.idle().then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    if (timer) clearTimeout(timer);
    let aborted = 0;
    if (timedOut) {
      aborted = pool.inflight.size;
      for (const r of [...pool.inflight]) r.abortForDrain();
      await pool.idle();
    }
    return { model, version, drained: before - aborted, aborted, elapsedMs: performance.now() - started };
  }

  /** Let a drained pool take traffic again. */
  undrain(model: string, version: string): void {
    this.pool(model, version).draining = false;
  }

  /** Copy a sampled share of a model's responses (and every shadow pair) to `tap`; undefined stops it. */
  setTap(model: string, tap: ResponseTap | undefined): void {
    this.model(model).tap = tap;
  }

  /**
   * Hold a model's new requests in a bounded FIFO (drain-first swaps; a time-shared model asleep, with
   * its own limits, reason and a watch on the queue's depth). Each holder (`owner`, default `rollout`)
   * releases only its own hold: the queue goes when the last one lets go. The first holder's limits
   * and reason stand.
   */
  hold(model: string, opts: HoldOptions = {}): void {
    const st = this.model(model);
    st.holders.set(opts.owner ?? DEFAULT_HOLDER, opts.onDepth);
    if (st.hold) return;
    const gauge = this.telemetry.metrics.holdQueue.labels(model);
    st.hold = new HoldQueue(
      opts.max ?? this.cfg.holdQueueMax,
      opts.timeoutMs ?? this.cfg.holdQueueTimeoutMs,
      (d) => {
        gauge.set(d);
        for (const watch of st.holders.values()) watch?.(d);
      },
      opts.why,
    );
  }

  /** Requests of a model in flight on its workers (every version). */
  inflight(model: string): number {
    let n = 0;
    for (const pool of this.model(model).pools.values()) n += pool.inflight.size;
    return n;
  }

  /**
   * `owner`'s hold ends; when no other holder is left, the held requests go in arrival order (they see
   * the route in force now). Returns how many went.
   */
  release(model: string, owner = DEFAULT_HOLDER): number {
    const st = this.model(model);
    const q = st.hold;
    if (!st.holders.has(owner)) return 0;
    if (q === undefined || st.holders.size > 1) {
      st.holders.delete(owner);
      return 0;
    }
    st.hold = undefined;
    // the last holder hears the queue empty too
    const n = q.releaseAll();
    st.holders.delete(owner);
    return n;
  }

  model(name: string): ModelState {
    const st = this.models.get(name);
    if (!st) throw new NotFoundError('model_not_found', `model ${JSON.stringify(name)} does not exist`);
    return st;
  }

  pool(model: string, version: string): VersionPool {
    const p = this.model(model).pools.get(version);
    if (!p) throw new NotFoundError('version_not_found', `model ${model} has no version ${JSON.stringify(version)}`);
    return p;
  }

  /** True when every model has a route and at least one routable worker for each version with weight. */
  ready(now = Date.now()): { ready: boolean; problems: string[] } {
    const problems: string[] = [];
    if (this.models.size === 0) problems.push('no models');
    for (const st of this.models.values()) {
      let any = false;
      for (const v of st.route.versions) {
        const pool = st.pools.get(v.id);
        if (v.weight > 0 && pool && pool.routableCount(now) > 0) any = true;
      }
      if (!any) problems.push(`${st.name}: no healthy worker for any routed version`);
    }
    return { ready: problems.length === 0, problems };
  }

  close(): Promise<void> {
    this.prefetcher.stop();
    for (const st of this.models.values()) {
      st.hold?.closeAll();
      st.admission?.close();
      for (const p of st.pools.values()) for (const w of p.workers) w.destroy();
    }
    return Promise.resolve();
  }

  // ---- the request path ------------------------------------------------------------------

  /** Handle POST /v1/chat/completions or /v1/completions (the body is complete: the front read it). Never throws. */
  handle(req: FrontRequest, res: FrontResponse, endpoint: Endpoint): void {
    this.entry.handle(req, res, endpoint);
  }
}
