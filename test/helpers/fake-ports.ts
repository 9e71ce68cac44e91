// An in-memory world behind the controllers' ports (src/rollout/ports.ts): a fake clock that runs
// timers only when the test advances it, routes built and validated by the real domain rules, the
// real registry and rollout records over an in-memory SQLite store, workers that load, sleep and
// unload instantly, and telemetry the test feeds record by record. Not a mock: it keeps state and
// enforces the same rules, so a controller under test behaves as it would on the control plane.
//
// `fleet.ports()` is what one control-plane process would build; calling it again over the same
// fleet is a restart: new locks, same persisted world.
import { SchedulerMetrics } from '../../src/telemetry/scheduler-metrics.js';
import { kvRoleAt } from '../../src/domain/spec.js';
import { parseConfig } from '../../src/config/load.js';
import type { GlidepathConfig } from '../../src/config/types.js';
import { storeRollouts } from '../../src/control/ports.js';
import { FakeAdapters } from './fake-adapters.js';
import { buildRoute, routeToSpec } from '../../src/domain/route.js';
import type { RouteSnapshot, RouteSpec } from '../../src/domain/route.js';
import { NotFoundError, UnavailableError, UpstreamError } from '../../src/errors.js';
import type { Version } from '../../src/domain/version.js';
import type { WorkerHealth } from '../../src/health/machine.js';
import { AdapterCanaryMetrics, CanaryMetrics, HealthMetrics } from '../../src/telemetry/control-metrics.js';
import type { WorkerFault } from '../../src/telemetry/telemetry.js';
import { Registry as PromRegistry } from 'prom-client';
import type { ControlEventInput, ControllerPorts, WorkerInfo } from '../../src/rollout/ports.js';
import type { NotifyEvent } from '../../src/rollout/webhooks.js';
import { Registry } from '../../src/store/registry.js';
import { openMemoryStore } from '../../src/store/sqlite.js';
import type { SqliteStore } from '../../src/store/sqlite.js';
import type { RequestRecord } from '../../src/telemetry/record.js';
import type { WindowStats } from '../../src/telemetry/window.js';
import type { RemoteMetrics } from '../../src/telemetry/prometheus-source.js';

export { FakeClock, FakeWorker, emptyStats, requestRecord } from './fake-world.js';
export type { FakeMode } from './fake-world.js';
import { FakeClock, FakeWorker, emptyStats, requestRecord } from './fake-world.js';
import type { FakeMode } from './fake-world.js';

export interface FakeFleetOptions {
  /** `models:` of glidepath.yaml (snake_case, parsed by the real config pipeline); versions use the static provider. */
  models: Record<string, unknown>[];
  gpus?: number;
  /** `scheduler:` of glidepath.yaml. */
  scheduler?: Record<string, unknown>;
  /** `time_sharing:` of glidepath.yaml. */
  timeSharing?: Record<string, unknown>[];
  /** Free GPUs are those no live worker holds (one each); by default every GPU is free. */
  countGpus?: boolean;
}

export class FakeFleet {
  /** LoRA adapters: the registry, candidates, promotions and unloads (fake-adapters.ts). */
  readonly adapters = new FakeAdapters();
  readonly clock = new FakeClock();
  readonly cfg: GlidepathConfig;
  readonly store: SqliteStore = openMemoryStore();
  readonly registry: Registry;
  /** What the controllers did, in order (`publish llama v1=0.9,v2=0.1`, `drain llama/v2`, …). */
  readonly log: string[] = [];
  readonly events: ControlEventInput[] = [];
  readonly notified: NotifyEvent[] = [];
  readonly audit: { actor: string; action: string; target: string; result: 'ok' | 'error' }[] = [];
  /** Models whose requests are held: each holder's options (a test calls `onDepth` as requests arrive). */
  readonly holds = new Map<string, Map<string, { max?: number; timeoutMs?: number; why?: string; onDepth?: (depth: number) => void; owner?: string }>>();
  /** Requests in flight per model, as a test sets them. */
  readonly inflight = new Map<string, number>();
  /** `model/version` with workers, and those asleep (the workers port's own state). */
  readonly loaded = new Set<string>();
  readonly asleep = new Map<string, 1 | 2>();
  /** `model/version` → the message its wakes fail with (while set). */
  readonly failWake = new Map<string, string>();
  /** `model/version` → the message its next load fails with. */
  readonly failLoad = new Map<string, string>();
  private readonly routeOf = new Map<string, RouteSnapshot>();
  /** A remote metric source the telemetry port offers (Prometheus's place; undefined: local), as a test sets it. */
  remote: RemoteMetrics | undefined = undefined;
  /** model → the factor on its latency gates (a degraded model's; 1 when unset). */
  readonly latencyFactors = new Map<string, number>();
  private readonly stats = new Map<string, WindowStats>();
  private readonly listeners = new Set<(r: RequestRecord) => void>();
  private readonly faultListeners = new Set<(f: WorkerFault) => void>();
  private readonly exitListeners = new Set<(w: WorkerInfo, detail: string) => void>();
  private readonly healthListeners = new Set<(w: WorkerInfo, h: WorkerHealth) => void>();
  private readonly loadHooks: ((v: Version, ws: WorkerInfo[]) => Promise<void>)[] = [];
  /** Every worker that lives or lived, by id. */
  readonly workers = new Map<string, FakeWorker>();
  /** Starts that fail, next first (a message each, or the error to throw). */
  readonly failStarts: (string | Error)[] = [];
  /** Weight changes that fail, next first (the message each throws): a worker the data plane no longer lists. */
  readonly failWeights: string[] = [];
  /** Stops that fail, next first (the message each throws); the worker lives on. */
  readonly failStops: string[] = [];
  /** While set, starts begun now go on only when it resolves (a worker still loading). */
  startGate: Promise<void> | undefined = undefined;
  /** While set, drains end only when it resolves (a worker still draining its streams). */
  drainGate: Promise<void> | undefined = undefined;
  /** Rollout writes refused next, one each (a store that does not answer: an etcd blip). */
  failSaves = 0;
  /** The modes the next started workers answer their probes in, one per start ('ok' when empty). */
  readonly startModes: FakeMode[] = [];
  /** Health metrics over a registry of the fleet's own (checked by tests through `metricsText`). */
  readonly promRegistry = new PromRegistry();
  readonly healthMetrics = new HealthMetrics(this.promRegistry);
  readonly canaryMetrics = new CanaryMetrics(this.promRegistry);
  readonly adapterCanaryMetrics = new AdapterCanaryMetrics(this.promRegistry);
  readonly schedulerMetrics = new SchedulerMetrics(this.promRegistry);

  /** The store's rollouts, whose writes fail while `failSaves` says so. */
  private rollouts(): ControllerPorts['rollouts'] {
    const base = storeRollouts(this.store, this.clock);
    return {
      ...base,
      save: (state, revision, event) => {
        if (this.failSaves <= 0) return base.save(state, revision, event);
        this.failSaves--;
        return Promise.reject(new UnavailableError('store_unavailable', 'store etcd 127.0.0.1:2379: deadline exceeded (a test)'));
      },
    };
  }

  /** A fleet booted as `glidepath up` boots on a first start. */
  static async create(opts: FakeFleetOptions): Promise<FakeFleet> {
    const f = new FakeFleet(opts);
    await f.boot();
    return f;
  }

  private constructor(opts: FakeFleetOptions) {
    this.cfg = parseConfig({
      server: { data_dir: '/nonexistent/fake-fleet' },
      gpus: { count: opts.gpus ?? 8, memory_gb: 80 },
      ...(opts.scheduler ? { scheduler: opts.scheduler } : {}),
      ...(opts.timeSharing ? { time_sharing: opts.timeSharing } : {}),
      models: opts.models.map((m) => ({
        ...m,
        versions: (m.versions as Record<string, unknown>[]).map((v) => ({
          provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] },
          warmup: { requests: 0 },
          ...v,
        })),
      })),
    });
    this.registry = new Registry(this.store, () => this.clock.now());
    this.countGpus = opts.countGpus === true;
  }

  private readonly countGpus: boolean;

  /** What boot does on a first start: load the route's versions, make its stable one active. */
  private async boot(): Promise<void> {
    await this.registry.seedFromConfig(this.cfg);
    for (const m of this.cfg.models) {
      const spec: RouteSpec = { model: m.name, weights: m.route.weights };
      for (const [id, w] of Object.entries(m.route.weights)) {
        if (w <= 0) continue;
        await this.registry.transition(m.name, id, 'loading');
        const v = await this.registry.transition(m.name, id, 'ready', { loadTimeMs: 1 });
        this.loaded.add(`${m.name}/${id}`);
        this.spawnWorkers(v);
      }
      const route = buildRoute(spec, 1, await this.known(m.name), this.clock.now());
      this.routeOf.set(m.name, route);
      await this.registry.promote(m.name, route.stable, { actor: 'config' });
    }
  }

  /** A version's workers: its replicas, then its spares. */
  private spawnWorkers(v: Version): FakeWorker[] {
    // as the worker manager: a static version's endpoints are its workers, the last `spares` of them spares
    const spares = v.spares ?? 0;
    const total = v.provider.kind === 'static' ? v.provider.endpoints.length : v.replicas + spares;
    const out: FakeWorker[] = [];
    for (let i = 0; i < total; i++) {
      const w = new FakeWorker(`${v.model}/${v.id}/${i}`, v.model, v.id, i >= total - spares ? 'spare' : 'serving', v.provider.kind, this.clock.now());
      w.kvRole = kvRoleAt(v, i);
      this.workers.set(w.id, w);
      out.push(w);
    }
    return out;
  }

  /** The live workers of a version. */
  live(model: string, version: string): FakeWorker[] {
    return [...this.workers.values()].filter((w) => w.alive && w.model === model && w.version === version);
  }

  worker(id: string): FakeWorker {
    const w = this.workers.get(id);
    if (!w) throw new Error(`no fake worker ${id}`);
    return w;
  }

  /** The worker's process ends unexpectedly. */
  crash(id: string): void {
    const w = this.worker(id);
    w.alive = false;
    for (const l of this.exitListeners) l(w.info(), `worker ${id} exited unexpectedly (code null, signal SIGKILL)`);
  }

  /** A failed attempt of a request on a worker (a passive signal), as the gateway reports it. */
  fault(f: Omit<WorkerFault, 'at'>): void {
    for (const l of this.faultListeners) l({ ...f, at: this.clock.now() });
  }

  async metricsText(): Promise<string> {
    return this.promRegistry.metrics();
  }

  private async known(model: string): Promise<Set<string>> {
    return new Set((await this.registry.list(model)).map((v) => v.id));
  }

  route(model: string): RouteSnapshot {
    const r = this.routeOf.get(model);
    if (!r) throw new NotFoundError('model_not_found', `no model ${model}`);
    return r;
  }

  /** Weights in force, as `{ v1: 0.9, v2: 0.1 }`. */
  weights(model: string): Record<string, number> {
    return Object.fromEntries(this.route(model).versions.map((v) => [v.id, v.weight]));
  }

  /** One request record to every subscriber, as the gateway produces it. */
  record(r: RequestRecord): void {
    for (const l of this.listeners) l(r);
  }

  /** `n` records of `version`; `f(i)` adjusts each (latency, status…). */
  records(model: string, version: string, n: number, f: (i: number) => Partial<RequestRecord> = () => ({})): void {
    for (let i = 0; i < n; i++) this.record(requestRecord(model, version, { at: this.clock.now(), ...f(i) }));
  }

  setStats(model: string, version: string, s: Partial<WindowStats>): void {
    this.stats.set(`${model}/${version}`, { ...emptyStats(), ...s });
  }

  /** The ports one control-plane process builds over this world (again: a restart). */
  ports(): ControllerPorts {
    const locks = new Map<string, Promise<unknown>>();
    const claims = new Map<string, string>();
    const targets = new Map<string, number>();
    const later = <T>(fn: () => T): Promise<T> => new Promise<T>((resolve) => resolve(fn()));
    const models = {
      config: (name: string) => {
        const m = this.cfg.models.find((x) => x.name === name);
        if (!m) throw new NotFoundError('model_not_found', `model ${JSON.stringify(name)} is not in the config`);
        return m;
      },
      names: () => this.cfg.models.map((m) => m.name),
      timeShared: () => this.cfg.timeSharing,
    };
    return {
      clock: this.clock,
      models,
      routes: {
        current: (model) => this.route(model),
        publish: async (spec) => {
          const known = await this.known(spec.model);
          const prev = this.route(spec.model);
          const route = buildRoute(spec, prev.revision + 1, known, this.clock.now(), prev);
          this.routeOf.set(spec.model, route);
          this.log.push(
            `publish ${spec.model} ${route.versions.map((v) => `${v.id}=${+v.weight.toFixed(4)}`).join(',')}${route.shadow ? ` shadow=${route.shadow.version}` : ''}`,
          );
          return { route, switchMs: 0.01 };
        },
        drain: (model, version) =>
          later(() => {
            this.log.push(`drain ${model}/${version}`);
            return { drained: 0, aborted: 0, elapsedMs: 0 };
          }),
        undrain: (model, version) => void this.log.push(`undrain ${model}/${version}`),
        latencyFactor: (model) => this.latencyFactors.get(model) ?? 1,
        hold: (model, opts) => {
          const owners = this.holds.get(model) ?? new Map<string, NonNullable<typeof opts>>();
          const first = owners.size === 0;
          owners.set(opts?.owner ?? 'rollout', opts ?? {});
          this.holds.set(model, owners);
          if (first) this.log.push(`hold ${model}`);
        },
        release: (model, owner) => {
          const owners = this.holds.get(model);
          if (owners?.delete(owner ?? 'rollout') !== true || owners.size > 0) return;
          this.holds.delete(model);
          this.log.push(`release ${model}`);
        },
        inflight: (model) => this.inflight.get(model) ?? 0,
      },
      versions: {
        get: async (model, id) => {
          models.config(model);
          return this.registry.get(model, id);
        },
        list: (model, status) => this.registry.list(model, status),
        active: (model) => this.registry.active(model),
        standby: (model) => this.registry.standby(model),
        transition: (model, id, to, patch, o) => this.registry.transition(model, id, to, patch, o),
        promote: (model, id, o) => this.registry.promote(model, id, o),
        rollback: (model, o) => this.registry.rollback(model, o),
        setProbes: (model, id, probes) => this.registry.update(model, id, { probes }),
      },
      workers: {
        load: async (v, actor, onProgress) => {
          const key = `${v.model}/${v.id}`;
          await this.registry.transition(v.model, v.id, 'loading', {}, { actor: actor.name });
          onProgress?.(`${key}: loaded`);
          const why = this.failLoad.get(key);
          if (why !== undefined) {
            this.failLoad.delete(key);
            await this.registry.transition(v.model, v.id, 'failed', { failure: { code: 'load_failed', message: why } }, { actor: actor.name });
            throw new Error(why);
          }
          this.loaded.add(key);
          this.log.push(`load ${key}`);
          const ws = this.spawnWorkers(v);
          try {
            for (const hook of this.loadHooks)
              await hook(
                v,
                ws.map((w) => w.info()),
              );
          } catch (err) {
            for (const w of ws) w.alive = false;
            this.loaded.delete(key);
            await this.registry.transition(
              v.model,
              v.id,
              'failed',
              { failure: { code: 'load_failed', message: (err as Error).message } },
              { actor: actor.name },
            );
            throw err;
          }
          return this.registry.transition(v.model, v.id, 'ready', { loadTimeMs: 1 }, { actor: actor.name });
        },
        unload: (model, version) =>
          later(() => {
            for (const w of this.live(model, version)) w.alive = false;
            this.loaded.delete(`${model}/${version}`);
            this.asleep.delete(`${model}/${version}`);
            this.log.push(`unload ${model}/${version}`);
            return 1;
          }),
        sleep: (model, version, level) =>
          later(() => {
            this.asleep.set(`${model}/${version}`, level);
            this.log.push(`sleep ${model}/${version}`);
          }),
        wake: (model, version) =>
          later(() => {
            const fails = this.failWake.get(`${model}/${version}`);
            if (fails !== undefined) throw new UpstreamError('engine_refused', fails);
            if (this.asleep.delete(`${model}/${version}`)) this.log.push(`wake ${model}/${version}`);
          }),
        isAsleep: (model, version) => this.asleep.has(`${model}/${version}`),
        list: (model, version) =>
          [...this.workers.values()]
            .filter((w) => w.alive && (model === undefined || w.model === model) && (version === undefined || w.version === version))
            .map((w) => w.info()),
        probe: (w, body) => later(() => this.worker(w.id).answer(String((body as { prompt: string }).prompt))),
        setWeight: (w, weight, budget) => {
          const why = this.failWeights.shift();
          if (why !== undefined) throw new Error(why);
          const fw = this.worker(w.id);
          fw.weight = weight;
          fw.budget = budget ?? Infinity;
          this.log.push(`weight ${w.id}=${weight}${budget !== undefined && budget !== Infinity ? ` budget ${budget}` : ''}`);
        },
        drainOne: async (w, timeoutMs, why) => {
          await this.drainGate;
          this.log.push(`drain ${w.id} ${timeoutMs === 0 ? 'abort' : 'wait'}${why !== undefined ? ` (${why})` : ''}`);
          return { aborted: 0, elapsedMs: 0 };
        },
        saveHealth: (w, h) =>
          later(() => {
            const fw = this.worker(w.id);
            fw.health = h;
            for (const l of this.healthListeners) l(fw.info(), h);
          }),
        setRole: (w, role) =>
          later(() => {
            this.worker(w.id).role = role;
          }),
        start: async (model, version, role, health, opts) => {
          await this.startGate;
          return later(() => {
            const why = this.failStarts.shift();
            if (why !== undefined) throw typeof why === 'string' ? new Error(why) : why;
            const used = [...this.workers.values()].filter((x) => x.model === model && x.version === version).map((x) => Number(x.id.split('/').pop()));
            const w = new FakeWorker(`${model}/${version}/${Math.max(-1, ...used) + 1}`, model, version, role, 'sim', this.clock.now());
            w.health = health;
            w.kvRole = opts?.kvRole;
            w.mode = this.startModes.shift() ?? 'ok';
            // published at the weight its health says: a pending worker none until admitted
            w.weight = health.state === 'healthy' ? 1 : 0;
            this.workers.set(w.id, w);
            this.log.push(`start ${w.id} ${role}`);
            return w.info();
          });
        },
        stop: (w) =>
          later(() => {
            const why = this.failStops.shift();
            if (why !== undefined) throw new Error(why);
            this.worker(w.id).alive = false;
            this.log.push(`stop ${w.id}`);
          }),
        claim: (model, version, by) => {
          if (by === undefined) claims.delete(`${model}/${version}`);
          else claims.set(`${model}/${version}`, by);
        },
        claimedBy: (model, version) => claims.get(`${model}/${version}`),
        setTarget: (model, version, n) => {
          if (n === undefined) targets.delete(`${model}/${version}`);
          else targets.set(`${model}/${version}`, n);
        },
        target: (model, version) => targets.get(`${model}/${version}`),
        onExit: (l) => {
          this.exitListeners.add(l);
          return () => this.exitListeners.delete(l);
        },
        onHealth: (l) => {
          this.healthListeners.add(l);
          return () => this.healthListeners.delete(l);
        },
        onLoaded: (l) => {
          this.loadHooks.push(l);
          return () => this.loadHooks.splice(this.loadHooks.indexOf(l), 1);
        },
      },
      telemetry: {
        stats: (model, version) => this.stats.get(`${model}/${version}`) ?? emptyStats(),
        subscribe: (l) => {
          this.listeners.add(l);
          return () => this.listeners.delete(l);
        },
        subscribeFaults: (l) => {
          this.faultListeners.add(l);
          return () => this.faultListeners.delete(l);
        },
        remote: this.remote,
        health: this.healthMetrics,
        canary: this.canaryMetrics,
        adapterCanary: this.adapterCanaryMetrics,
        scheduler: this.schedulerMetrics,
      },
      rollouts: this.rollouts(),
      settings: {
        get: <T>(key: string) => this.store.getSetting<T>(key),
        set: (key, value) => this.store.setSetting(key, value, this.clock.now()),
        delete: async (key) => void (await this.store.deleteSetting(key)),
      },
      adapters: this.adapters,
      gpus: {
        total: () => this.cfg.gpus.length,
        free: () =>
          later(() => {
            const held = this.countGpus ? [...this.workers.values()].filter((w) => w.alive).length : 0;
            return this.cfg.gpus.slice(held).map((g) => ({ id: g.id, memoryGb: g.memoryGb }));
          }),
      },
      async exclusive<T>(model: string, fn: () => Promise<T>): Promise<T> {
        const prev = locks.get(model) ?? Promise.resolve();
        const run = prev.then(fn, fn);
        const tail = run.catch(() => undefined);
        locks.set(model, tail);
        try {
          return await run;
        } finally {
          if (locks.get(model) === tail) locks.delete(model);
        }
      },
      audited: async (actor, action, target, _params, fn) => {
        try {
          const r = await fn();
          this.audit.push({ actor: actor.name, action, target, result: 'ok' });
          return r;
        } catch (err) {
          this.audit.push({ actor: actor.name, action, target, result: 'error' });
          throw err;
        }
      },
      emit: (e) => void this.events.push({ ...e, at: e.at ?? this.clock.now() }),
      notify: (e) => {
        this.notified.push(e);
        return Promise.resolve([]);
      },
    };
  }

  /** Kinds of the control events so far (`canary_progressing`, …), optionally of one prefix. */
  eventKinds(prefix = ''): string[] {
    return this.events.map((e) => e.kind).filter((k) => k.startsWith(prefix));
  }

  /** The current route as a spec (for assertions on overrides and shadow). */
  spec(model: string): RouteSpec {
    return routeToSpec(this.route(model));
  }
}
