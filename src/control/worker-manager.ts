// Worker lifecycle for the control plane: place on GPUs, start via the provider, warm up (warmup.ts), record,
// publish to the data plane, notice unexpected exits, adopt survivors after a restart, sleep and
// wake (the sleep state is owned and persisted here, nowhere else), stop; one worker at a time too
// (replacements and hot spares), with each worker's role and health persisted beside it (worker-meta.ts).
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError } from '../errors.js';
import { engineTraitsOf, kvRoleAt, kvRoleMismatch } from '../domain/spec.js';
import type { KvRole } from '../domain/spec.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { GpuInventory } from '../fleet/inventory.js';
import type { Providers, StartRequest, WorkerHandle } from '../providers/index.js';
import type { Store } from '../store/types.js';
import { routingWeightOf } from '../health/persisted.js';
import type { WorkerHealth } from '../health/machine.js';
import type { WorkerInfo, WorkerRole } from '../rollout/ports.js';
import type { EventBus } from './events.js';
import { warmUp } from './warmup.js';
import { Sleep } from './sleep.js';
import { adoptVersion, discardVersion, releaseOrphanGpus } from './adoption.js';
import type { AdoptionHost, WorkerMeta } from './adoption.js';
import { WorkerCounts } from './worker-counts.js';
import { Starts, stopEverything } from './starts.js';
import { WorkerMetas } from './worker-meta.js';
import { workerId, workerRecord } from './worker-record.js';

export interface StartedVersion {
  workers: WorkerHandle[];
  gpus: string[];
  loadTimeMs: number;
}

export type ExitListener = (w: WorkerInfo, detail: string) => void;

export class WorkerManager {
  /** worker id → live handle. */
  readonly handles = new Map<string, WorkerHandle>();
  /** worker id → role and health, persisted, and who hears of a health change (worker-meta.ts). */
  readonly meta: WorkerMetas;
  private stopping = new Set<string>();
  /** Exited unexpectedly, its exit being recorded: out of rotation, still listed (see adoptHandle). */
  private readonly exiting = new Set<string>();
  /** model/version → the highest worker index this process has used (see nextWorkerId). */
  private readonly highestIndex = new Map<string, number>();
  private exitListeners: ExitListener[] = [];
  /** Claims on versions' worker counts and the scheduler's targets (worker-counts.ts). */
  readonly counts = new WorkerCounts();
  /** Starts in flight (whole versions and single workers), cancelled by `stopAll`. */
  private readonly starts = new Starts();

  /** Which workers sleep, persisted (sleep.ts). */
  private readonly sleep: Sleep;
  /** What adoption after a restart works with (adoption.ts). */
  private readonly adoption: AdoptionHost;

  constructor(
    private readonly store: Store,
    private readonly inventory: GpuInventory,
    private readonly providers: Providers,
    private readonly dp: DataPlane,
    private readonly events: EventBus,
    private readonly workDir: string,
  ) {
    this.meta = new WorkerMetas(store);
    this.sleep = new Sleep(store, providers, dp);
    this.adoption = {
      store,
      inventory,
      providers,
      dp,
      sleeping: this.sleep.levels,
      record: (v, h, meta) => this.adoptHandle(v, h, meta),
      publish: (model, version) => this.publish(model, version),
      live: (id) => this.handles.has(id),
    };
  }

  /** The live workers as controllers see them (src/rollout/ports.ts), of one version or all. */
  infos(model?: string, version?: string): WorkerInfo[] {
    const out: WorkerInfo[] = [];
    for (const h of this.handles.values())
      if ((model === undefined || h.model === model) && (version === undefined || h.version === version)) out.push(this.info(h));
    return out.sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /** One live worker as controllers see it. */
  private info(h: WorkerHandle): WorkerInfo {
    const m = this.meta.get(h.id);
    return {
      id: h.id,
      model: h.model,
      version: h.version,
      url: h.url,
      provider: h.provider,
      role: m?.role ?? 'serving',
      startedAt: m?.startedAt ?? 0,
      health: m?.health,
      replaceable: h.provider !== 'static',
      gpus: h.gpus,
      kvRole: m?.kvRole,
    };
  }

  /** The version's live workers (not one whose unexpected exit is being recorded). */
  of(model: string, version: string): WorkerHandle[] {
    return [...this.handles.values()].filter((h) => h.model === model && h.version === version && !this.exiting.has(h.id));
  }

  /** Told when a worker exits without being asked to; returns the unsubscribe function. */
  onExit(l: ExitListener): () => void {
    this.exitListeners.push(l);
    return () => {
      this.exitListeners = this.exitListeners.filter((x) => x !== l);
    };
  }

  /**
   * Bring a version's workers up (all `replicas`, then its hot spares), warm each, and publish them
   * to the data plane (spares at weight 0). All-or-nothing: on any failure the started workers are
   * stopped and their GPUs released.
   */
  startVersion(v: VersionConfig, onProgress?: (m: string) => void): Promise<StartedVersion> {
    return this.starts.track(this.startVersionNow(v, onProgress));
  }

  private async startVersionNow(v: VersionConfig, onProgress?: (m: string) => void): Promise<StartedVersion> {
    const t0 = performance.now();
    const provider = this.providers.for(v.provider.kind);
    // the last `spares` workers are the version's hot spares (for static, the last of its endpoints)
    const replicas = v.provider.kind === 'static' ? v.provider.endpoints.length : v.replicas + (v.spares ?? 0);
    const firstSpare = replicas - (v.spares ?? 0);
    // GPUs are taken up front, in one store transaction, so two deploys never race for them
    const groups =
      v.provider.kind === 'static'
        ? Array.from({ length: replicas }, () => [] as string[])
        : await this.inventory.place(
            v,
            replicas,
            `${v.model}/${v.id}`,
            (i) => ({ model: v.model, versionId: v.id, workerId: workerId(v, i) }),
            this.gpusOf(v),
            Date.now(),
          );
    const started: WorkerHandle[] = [];
    this.dp.addVersion(v.model, v.id, v.cardChecksum, engineTraitsOf(v));
    const role = (i: number): WorkerRole => (i >= firstSpare ? 'spare' : 'serving');
    try {
      const results = await Promise.allSettled(
        groups.map((gpus, i) =>
          provider.start({
            version: v,
            workerId: workerId(v, i),
            gpus,
            workDir: path.join(this.workDir, 'workers'),
            onProgress: (m) => onProgress?.(m),
            onSpawn: this.recordStarting(v, workerId(v, i), gpus, { role: role(i), health: undefined, startedAt: Date.now(), kvRole: kvRoleAt(v, i) }),
            kvRole: kvRoleAt(v, i),
            signal: this.starts.signal,
          }),
        ),
      );
      for (const r of results) if (r.status === 'fulfilled') started.push(r.value);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      for (const h of started) {
        onProgress?.(`${h.id}: warming up (${v.warmup.requests} request(s) × ${v.warmup.maxTokens} tokens)`);
        await warmUp(h.url, v, this.starts.signal);
      }
      this.starts.check(`${v.model}/${v.id}`);
    } catch (err) {
      await Promise.all(started.map((h) => provider.stop(h, DEFAULTS.control.failedStartStopGraceMs).catch(() => undefined)));
      for (const i of groups.keys()) await this.store.deleteWorker(workerId(v, i)).catch(() => undefined);
      await this.inventory.releaseVersion(v.model, v.id);
      throw err;
    }
    const now = Date.now();
    // serving workers passed their warm-up and are judged by the probe set's recording; spares are admitted by probes
    for (const [i, h] of started.entries()) await this.adoptHandle(v, h, { role: role(i), health: undefined, startedAt: now, kvRole: kvRoleAt(v, i) });
    this.publish(v.model, v.id);
    const loadTimeMs = performance.now() - t0;
    return { workers: started, gpus: groups.flat(), loadTimeMs };
  }

  /**
   * Start one more worker of a version (a replacement, a hot spare, a rolling update's new worker) on
   * free GPUs, warm it and publish it at the weight its health says (pending: 0, until admitted).
   */
  startWorker(v: VersionConfig, role: WorkerRole, health: WorkerHealth, onProgress?: (m: string) => void, kvRole?: KvRole): Promise<WorkerHandle> {
    return this.starts.track(this.startWorkerNow(v, role, health, onProgress, kvRole));
  }

  private async startWorkerNow(
    v: VersionConfig,
    role: WorkerRole,
    health: WorkerHealth,
    onProgress?: (m: string) => void,
    kvRole?: KvRole,
  ): Promise<WorkerHandle> {
    this.starts.check(`${v.model}/${v.id}`);
    const wrong = kvRoleMismatch(v, kvRole);
    if (wrong !== undefined) throw new BadRequestError('invalid_worker', wrong);
    const provider = this.providers.for(v.provider.kind);
    const id = this.nextWorkerId(v);
    const [gpus] = await this.inventory.place(
      v,
      1,
      `${v.model}/${v.id} (${role === 'spare' ? 'spare' : 'replacement'})`,
      () => ({ model: v.model, versionId: v.id, workerId: id }),
      this.gpusOf(v),
      Date.now(),
    );
    let h: WorkerHandle | undefined;
    try {
      h = await provider.start({
        version: v,
        workerId: id,
        gpus: gpus ?? [],
        workDir: path.join(this.workDir, 'workers'),
        onProgress: (m) => onProgress?.(m),
        onSpawn: this.recordStarting(v, id, gpus ?? [], { role, health, startedAt: Date.now(), kvRole }),
        kvRole,
        signal: this.starts.signal,
      });
      await warmUp(h.url, v, this.starts.signal);
      this.starts.check(id);
    } catch (err) {
      if (h) await provider.stop(h, DEFAULTS.control.failedStartStopGraceMs).catch(() => undefined);
      await this.store.deleteWorker(id).catch(() => undefined);
      await this.inventory.releaseWorker(v.model, v.id, id);
      throw err;
    }
    await this.adoptHandle(v, h, { role, health, startedAt: Date.now(), kvRole });
    try {
      this.publish(v.model, v.id);
      // a version put to sleep (a standby, a time-shared model between turns) gets its new worker asleep
      // too: it takes no traffic meanwhile (held, or weight 0), and frees the GPU for the awake one
      const level = await this.sleep.level(v.model, v.id);
      if (level !== undefined) await this.sleep.put([h], v.model, v.id, level);
    } catch (err) {
      // the version left the data plane while the worker started (unloaded), or would not sleep: nothing may be left behind
      await this.stopWorker(h.id, DEFAULTS.control.failedStartStopGraceMs);
      throw err;
    }
    return h;
  }

  /**
   * A start's onSpawn: the worker is recorded as starting from the moment its process exists, so a
   * control plane killed before it is warm finds it after the restart and stops it (a worker never
   * warmed is not adopted) instead of leaving it running unknown on its GPUs.
   */
  private recordStarting(v: VersionConfig, id: string, gpus: readonly string[], meta: WorkerMeta): NonNullable<StartRequest['onSpawn']> {
    return (s) => this.store.upsertWorker(workerRecord(v, { ...s, id, provider: v.provider.kind, gpus: [...gpus] }, meta, 'starting'));
  }

  /** The GPUs a version's workers run on. */
  private gpusOf(v: VersionConfig): string[] {
    return this.of(v.model, v.id).flatMap((h) => h.gpus);
  }

  /** Its record says `draining`: what mirrors the store (a cluster's followers) routes nothing new to it. */
  async markDraining(id: string): Promise<void> {
    await this.store.tx(async (t) => {
      const rec = await t.getWorker(id);
      if (rec && rec.state !== 'draining') await t.upsertWorker({ ...rec, state: 'draining', updatedAt: Date.now() });
    });
  }

  /** Stop one worker, forget it and free its GPUs (its version stays). */
  async stopWorker(id: string, graceMs: number = DEFAULTS.control.stopGraceMs): Promise<void> {
    const h = this.handles.get(id);
    const rec = await this.store.getWorker(id);
    const model = h?.model ?? rec?.model;
    const version = h?.version ?? rec?.versionId;
    if (model === undefined || version === undefined) return;
    this.stopping.add(id);
    try {
      if (h)
        await this.providers
          .for(h.provider as 'sim')
          .stop(h, graceMs)
          .catch(() => undefined);
      this.handles.delete(id);
      this.meta.delete(id);
      this.sleep.levels.delete(id);
      await this.store.deleteWorker(id);
      await this.inventory.releaseWorker(model, version, id);
    } finally {
      this.stopping.delete(id);
    }
    try {
      this.publish(model, version);
    } catch {
      // the version is gone from the data plane already
    }
  }

  /**
   * A new worker id for the version: one past the highest index it has used (every worker it runs,
   * adopted after a restart too, passed through adoptHandle), so a replacement never takes the id of
   * the worker it replaces.
   */
  private nextWorkerId(v: VersionConfig): string {
    const key = `${v.model}/${v.id}`;
    const next = (this.highestIndex.get(key) ?? -1) + 1;
    this.highestIndex.set(key, next);
    return workerId(v, next);
  }

  /** Record a live handle, watch it, make it known (not yet published). */
  private async adoptHandle(v: VersionConfig, h: WorkerHandle, meta: WorkerMeta): Promise<void> {
    this.handles.set(h.id, h);
    const key = `${v.model}/${v.id}`;
    this.highestIndex.set(key, Math.max(this.highestIndex.get(key) ?? -1, Number(h.id.split('/').pop())));
    this.meta.set(h.id, meta);
    const rec = workerRecord(v, h, meta, 'ready');
    await this.store.upsertWorker(rec);
    void h.exited.then(async (e) => {
      if (this.handles.get(h.id) !== h) return;
      if (e.expected || this.stopping.has(h.id)) {
        this.handles.delete(h.id);
        return;
      }
      // an unexpected exit: out of rotation at once, then recorded, then the listeners (the health
      // controller replaces it: its record goes after this one is written, never before). It stays
      // listed until then, so nothing mistakes its absence for a free place.
      const detail = `worker ${h.id} exited unexpectedly (code ${String(e.code)}, signal ${String(e.signal)})`;
      this.exiting.add(h.id);
      try {
        this.publish(v.model, v.id);
      } catch {
        // version already removed
      }
      this.events.emit({ kind: 'worker_exited', model: v.model, version: v.id, message: detail, data: e });
      try {
        const cur = (await this.store.getWorker(h.id)) ?? rec;
        await this.store.upsertWorker({ ...cur, state: 'exited', updatedAt: Date.now(), info: { ...cur.info, exitCode: e.code, signal: e.signal } });
      } catch (err) {
        this.events.emit({
          kind: 'store_error',
          model: v.model,
          version: v.id,
          message: `worker ${h.id}: recording its exit failed: ${(err as Error).message}`,
          data: {},
        });
      }
      // its meta stays until it is stopped (stopWorker, stopVersion): the health controller still
      // records the dead worker's health, and its record with it
      this.exiting.delete(h.id);
      if (this.handles.get(h.id) !== h) return;
      this.handles.delete(h.id);
      const info = this.info(h);
      for (const l of this.exitListeners) l(info, detail);
    });
  }

  /**
   * Push the current live workers of a version to the data plane (one list swap). A worker new to
   * the data plane starts at the weight its role and health say (a spare or an unadmitted worker at
   * 0); the ones already there keep theirs (the health controller moves them).
   */
  publish(model: string, version: string): void {
    const hs = this.of(model, version).sort((a, b) => (a.id < b.id ? -1 : 1));
    this.dp.setWorkers(
      model,
      version,
      hs.map((h) => {
        const m = this.meta.get(h.id);
        return { id: h.id, url: h.url, weight: m ? routingWeightOf(m.role, m.health) : 1, kvRole: m?.kvRole };
      }),
    );
    for (const h of hs) if (this.sleep.levels.has(h.id)) this.dp.setWorkerRoutable(model, version, h.id, false);
  }

  /** After a restart: adopt recorded workers that are still alive; returns how many (adoption.ts). */
  adopt(v: VersionConfig): Promise<number> {
    return adoptVersion(this.adoption, v);
  }

  /** After a restart: stop and forget the recorded workers of a version that is not served (its load was cut short). */
  discard(v: VersionConfig): Promise<{ records: number; stopped: number }> {
    return discardVersion(this.adoption, v);
  }

  /** After a restart's adoptions: free GPUs held for workers that have no record; returns how many. */
  releaseOrphanGpus(): Promise<number> {
    return releaseOrphanGpus(this.adoption);
  }

  /** Stop every worker of a version, free its GPUs and drop it from the data plane; returns the GPUs freed. */
  async unloadVersion(model: string, version: string, graceMs: number = DEFAULTS.control.stopGraceMs): Promise<number> {
    const freed = await this.stopVersion(model, version, graceMs);
    // never known to the data plane: nothing to remove; still named by the route (a stop-start routes
    // away later): its pool stays, emptied, so that nothing is sent to the stopped workers
    await this.dp.removeVersion(model, version).catch(() => {
      if (this.dp.models.get(model)?.pools.has(version)) this.dp.setWorkers(model, version, []);
    });
    return freed;
  }

  /** Stop every worker of a version and free its GPUs; it is no longer asleep either. */
  async stopVersion(model: string, version: string, graceMs: number = DEFAULTS.control.stopGraceMs): Promise<number> {
    const hs = this.of(model, version);
    for (const h of hs) this.stopping.add(h.id);
    await Promise.all(
      hs.map(async (h) => {
        const p = this.providers.for(h.provider as 'sim' | 'static' | 'process');
        await p.stop(h, graceMs).catch(() => undefined);
        this.handles.delete(h.id);
        this.meta.delete(h.id);
        this.sleep.levels.delete(h.id);
        await this.store.deleteWorker(h.id);
        this.stopping.delete(h.id);
      }),
    );
    // the records left: workers that exited and were never stopped (their meta goes with them)
    for (const r of await this.store.listWorkers({ model, versionId: version })) {
      this.meta.delete(r.id);
      await this.store.deleteWorker(r.id);
    }
    await this.sleep.forget(model, version);
    return this.inventory.releaseVersion(model, version);
  }

  /** Put a version's workers to sleep (out of rotation, weights off the GPU), remembered across restarts (sleep.ts). */
  sleepVersion(model: string, version: string, level: 1 | 2): Promise<void> {
    return this.sleep.put(this.of(model, version), model, version, level);
  }

  /** The level a version was put to sleep at and not woken since (survives restarts). */
  sleptLevel(model: string, version: string): Promise<1 | 2 | undefined> {
    return this.sleep.level(model, version);
  }

  /** Wake a version's sleeping workers; whether any slept or not, it stays awake across restarts. */
  wakeVersion(model: string, version: string): Promise<void> {
    return this.sleep.wake(this.of(model, version), model, version);
  }

  isAsleep(model: string, version: string): boolean {
    // asked per version every health tick: nothing asleep (the common case) needs no scan of every worker
    if (this.sleep.levels.size === 0) return false;
    return this.of(model, version).some((h) => this.sleep.levels.has(h.id));
  }

  /** Cancel the starts in flight (a signal while `up` boots, a stop that leaves the workers running); resolves once they have settled. */
  cancelStarts(): Promise<unknown> {
    return this.starts.cancel();
  }

  /**
   * Stop everything this process started (shutdown of `glidepath up`): starts in flight are cancelled
   * while the known workers stop (starts.ts).
   */
  stopAll(graceMs: number = DEFAULTS.control.stopGraceMs): Promise<void> {
    return stopEverything(
      this.starts,
      () => [...this.handles.values()].filter((h) => !this.exiting.has(h.id)),
      (h) => {
        this.stopping.add(h.id);
        return this.providers
          .for(h.provider as 'sim')
          .stop(h, graceMs)
          .catch(() => undefined);
      },
    );
  }
}
