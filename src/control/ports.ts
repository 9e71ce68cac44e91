// The ports (src/rollout/ports.ts) implemented over the control plane: the data plane for traffic
// and telemetry, the registry and the store for persistence, the worker manager for workers.
import type { ModelConfig } from '../config/types.js';
import { NotFoundError } from '../errors.js';
import type { Version } from '../domain/version.js';
import type { Clock, ControllerPorts, RolloutsPort, WorkerInfo } from '../rollout/ports.js';
import { claimedKind, parseRolloutState, rolloutScope, rowPhase, toStoredState } from '../rollout/rollout-record.js';
import type { RolloutKind, StateOfKind, StoredRollout } from '../rollout/rollout-record.js';
import { notify } from '../rollout/webhooks.js';
import type { RolloutRecord, Store } from '../store/types.js';
import { scrape } from '../gateway/engine-load.js';
import { DEFAULTS } from '../defaults.js';
import { engineTraitsOf } from '../domain/spec.js';
import type { ControlPlane } from './plane.js';
import { PrometheusSource } from '../telemetry/prometheus-source.js';

/** The process's clock: Date.now and unref'd timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref(); // a controller's timer never keeps the process alive
    return () => clearTimeout(t);
  },
};

export function controlPorts(cp: ControlPlane, clock: Clock = systemClock): ControllerPorts {
  const { registry, workers, dp, store, inventory, events } = cp;
  return {
    clock,
    models: {
      config: (name: string): ModelConfig => cp.modelConfig(name),
      names: () => cp.cfg.models.map((m) => m.name),
      timeShared: () => cp.cfg.timeSharing,
    },
    routes: {
      current: (model) => cp.route(model),
      publish: (spec) => cp.publishRoute(spec),
      drain: async (model, version, timeoutMs) => {
        const d = await dp.drain(model, version, timeoutMs ?? cp.cfg.gateway.drainTimeoutMs);
        return { drained: d.drained, aborted: d.aborted, elapsedMs: d.elapsedMs };
      },
      undrain: (model, version) => dp.undrain(model, version),
      latencyFactor: (model) => DEFAULTS.gateway.degradationLatencyFactor[dp.models.get(model)?.admission?.level ?? 0],
      hold: (model, opts) => dp.hold(model, opts),
      release: (model, owner) => void dp.release(model, owner),
      inflight: (model) => dp.inflight(model),
    },
    versions: {
      get: (model, id) => cp.version(model, id),
      list: (model, status) => registry.list(model, status),
      active: (model) => registry.active(model),
      standby: (model) => registry.standby(model),
      transition: (model, id, to, patch, opts) => registry.transition(model, id, to, patch, opts),
      promote: (model, id, opts) => registry.promote(model, id, opts),
      rollback: (model, opts) => registry.rollback(model, opts),
      setProbes: (model, id, probes) => registry.update(model, id, { probes }),
    },
    workers: {
      load: (v, actor, onProgress) => cp.load(v, actor, onProgress ?? (() => undefined)),
      unload: (model, version) => workers.unloadVersion(model, version),
      sleep: (model, version, level) => workers.sleepVersion(model, version, level),
      wake: (model, version) => workers.wakeVersion(model, version),
      isAsleep: (model, version) => workers.isAsleep(model, version),
      list: (model, version) => workers.infos(model, version),
      probe: (w, body, timeoutMs) => dp.probe(w.model, w.version, w.id, PROBE_PATH, body, timeoutMs),
      setWeight: (w, weight, budget) => dp.setWorkerHealth(w.model, w.version, w.id, weight, budget),
      drainOne: async (w, timeoutMs, why) => {
        // in the store first: other replicas (cluster mode) stop sending it requests before it stops
        await workers.markDraining(w.id).catch(() => undefined);
        const t0 = Date.now();
        const r = await dp.drainWorker(w.model, w.version, w.id, timeoutMs, why);
        // this replica's requests are done; the others' are seen by the engine itself
        if (cp.cfg.store.kind === 'etcd') await engineIdle(w.url, t0 + timeoutMs);
        return r;
      },
      saveHealth: (w, h) => workers.meta.saveHealth(w, h),
      setRole: (w, role) => workers.meta.setRole(w.id, role),
      start: async (model, version, role, health, opts) => {
        const v = await cp.version(model, version);
        if (opts?.newPool === true) dp.addVersion(model, version, v.cardChecksum, engineTraitsOf(v));
        const h = await workers.startWorker(v, role, health, undefined, opts?.kvRole);
        return workers.infos(model, version).find((x) => x.id === h.id) as WorkerInfo;
      },
      stop: (w) => workers.stopWorker(w.id),
      claim: (model, version, by) => workers.counts.claim(model, version, by),
      claimedBy: (model, version) => workers.counts.claimedBy(model, version),
      setTarget: (model, version, n) => workers.counts.setTarget(model, version, n),
      target: (model, version) => workers.counts.target(model, version),
      onExit: (l) => workers.onExit(l),
      onHealth: (l) => workers.meta.onHealth(l),
      onLoaded: (l) => {
        const hook = (v: Version, ids: string[]) =>
          l(
            v,
            workers.infos(v.model, v.id).filter((w) => ids.includes(w.id)),
          );
        cp.loadHooks.push(hook);
        return () => {
          const i = cp.loadHooks.indexOf(hook);
          if (i >= 0) cp.loadHooks.splice(i, 1);
        };
      },
    },
    telemetry: {
      stats: (model, version, now) => dp.telemetry.stats(model, version, now),
      subscribe: (listener) => dp.telemetry.subscribe(listener),
      subscribeFaults: (listener) => dp.telemetry.subscribeFaults(listener),
      remote: cp.cfg.metricsSource.kind === 'prometheus' ? new PrometheusSource(cp.cfg.metricsSource) : undefined,
      health: dp.telemetry.metrics.health,
      canary: dp.telemetry.metrics.canary,
      adapterCanary: dp.telemetry.metrics.adapterCanary,
      scheduler: dp.telemetry.metrics.scheduler,
    },
    rollouts: storeRollouts(store, clock),
    settings: {
      get: <T>(key: string) => store.getSetting<T>(key),
      set: (key, value) => store.setSetting(key, value, clock.now()),
      delete: async (key) => void (await store.deleteSetting(key)),
    },
    gpus: {
      total: () => inventory.total,
      free: async () => (await inventory.free()).map((g) => ({ id: g.id, memoryGb: g.memoryGb })),
    },
    adapters: {
      get: (name) => dp.adapters.get(name),
      setCandidate: (name, c) => dp.adapters.setCandidate(name, c),
      promote: async (name, c) => {
        await cp.adapters.promote(c.model, name, c);
        dp.adapters.setCandidate(name, undefined);
      },
      retire: (model, servedAs) => dp.retireAdapter(model, servedAs, cp.cfg.gateway.drainTimeoutMs),
      taken: (name) => dp.models.has(name) || dp.adapters.get(name) !== undefined || dp.adapters.isServed(name),
    },
    exclusive: (model, fn) => cp.exclusive(model, fn),
    audited: (actor, action, target, params, fn) => cp.audited(actor, action, target, params, fn),
    emit: (e) => void events.emit(e),
    notify: (e) => notify(cp.cfg.notifications.webhooks, e, { events, audit: store }).catch(() => []),
  };
}

/** Probes are completions: no chat template between the prompt and the tokens compared. */
const PROBE_PATH = '/v1/completions';

/** Rollout records as the store keeps them ↔ validated states of one discriminated union. */
export function storeRollouts(store: Store, clock: Pick<Clock, 'now'>): RolloutsPort {
  const read = (rec: RolloutRecord): StoredRollout => ({
    state: parseRolloutState(rec.state, rec),
    revision: rec.revision,
    createdAt: rec.createdAt,
    updatedAt: rec.updatedAt,
  });
  /** Rows of one kind, newest first, read (and validated) only once their kind matches. */
  const ofKind = async <K extends RolloutKind>(model: string, kind: K, limit: number): Promise<StoredRollout<StateOfKind<K>>[]> => {
    const out: StoredRollout<StateOfKind<K>>[] = [];
    // the table holds every kind: scan the model's newest rows and keep the asked kind only
    for (const rec of await store.listRollouts({ model, limit: DEFAULTS.store.listLimit })) {
      if (claimedKind(rec.state) !== kind) continue;
      const r = read(rec);
      if (r.state.kind === kind) out.push({ ...r, state: r.state as StateOfKind<K> });
      if (out.length >= limit) break;
    }
    return out;
  };
  return {
    create: async (state) =>
      (await store.putRollout({ id: state.id, model: rolloutScope(state), ...rowPhase(state), state: toStoredState(state) }, clock.now())).revision,
    save: (state, revision, event) =>
      store.tx(async (t) => {
        const rec = await t.putRollout({ id: state.id, model: rolloutScope(state), ...rowPhase(state), state: toStoredState(state) }, clock.now(), revision);
        if (event) await t.appendRolloutEvent({ rolloutId: state.id, at: event.at, kind: event.kind, message: event.message, data: event.data });
        return rec.revision;
      }),
    get: async (id) => {
      const rec = await store.getRollout(id);
      return rec ? read(rec) : undefined;
    },
    latest: async (model, kind) => (await ofKind(model, kind, 1))[0],
    history: (model, kind, limit) => ofKind(model, kind, limit),
    unfinished: async () => {
      const rollouts: StoredRollout[] = [];
      const unreadable: Error[] = [];
      for (const rec of await store.listActiveRollouts()) {
        try {
          rollouts.push(read(rec));
        } catch (err) {
          unreadable.push(err as Error);
        }
      }
      return { rollouts, unreadable };
    },
    inProgress: async (model) => {
      const rec = (await store.listActiveRollouts()).find((r) => r.model === model);
      return rec ? { id: rec.id, kind: claimedKind(rec.state) ?? 'unknown' } : undefined;
    },
    appendEvent: async (id, e) => void (await store.appendRolloutEvent({ rolloutId: id, at: e.at, kind: e.kind, message: e.message, data: e.data })),
    events: async (id, page) => {
      if (!(await store.getRollout(id))) throw new NotFoundError('rollout_not_found', `no rollout ${id}`);
      return store.rolloutEvents(id, page);
    },
  };
}

/**
 * Until the engine at `url` runs and queues no request (its vLLM metrics), or `deadline`: a worker that
 * other replicas also send requests to is drained when the engine says so, not when this one's are done.
 * An engine that does not answer its metrics is not waited for.
 */
async function engineIdle(url: string, deadline: number): Promise<void> {
  // the other replicas hear of the drain by watch (p99 well under 50 ms): a request they sent just before is running by then
  await new Promise((r) => setTimeout(r, Math.max(0, Math.min(DEFAULTS.cluster.drainSettleMs, deadline - Date.now()))));
  while (Date.now() < deadline) {
    const s = await scrape(url, DEFAULTS.cluster.drainPollMs * 10).catch(() => undefined);
    if (s === undefined || s.running === undefined || (s.running ?? 0) + (s.waiting ?? 0) === 0) return;
    await new Promise((r) => setTimeout(r, DEFAULTS.cluster.drainPollMs));
  }
}
