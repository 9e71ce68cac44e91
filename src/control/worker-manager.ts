// Worker lifecycle for the control plane: place on GPUs, start via the provider, warm up, record,
// publish to the data plane, notice unexpected exits, adopt survivors after a restart, sleep and
// wake (the sleep state is owned and persisted here, nowhere else), stop.
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { GpuInventory } from '../fleet/inventory.js';
import type { Providers, WorkerHandle } from '../providers/index.js';
import type { Store, WorkerRecord } from '../store/types.js';
import type { EventBus } from './events.js';

export interface StartedVersion {
  workers: WorkerHandle[];
  gpus: string[];
  loadTimeMs: number;
}

export class WorkerManager {
  /** worker id → live handle. */
  readonly handles = new Map<string, WorkerHandle>();
  /** worker id → sleep level while asleep. */
  readonly sleeping = new Map<string, 1 | 2>();
  private stopping = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly inventory: GpuInventory,
    private readonly providers: Providers,
    private readonly dp: DataPlane,
    private readonly events: EventBus,
    private readonly workDir: string,
  ) {}

  of(model: string, version: string): WorkerHandle[] {
    return [...this.handles.values()].filter((h) => h.model === model && h.version === version);
  }

  /**
   * Bring a version's workers up (all `replicas`), warm each, and publish them to the data plane.
   * All-or-nothing: on any failure the started workers are stopped and their GPUs released.
   */
  async startVersion(v: VersionConfig, onProgress?: (m: string) => void): Promise<StartedVersion> {
    const t0 = performance.now();
    const provider = this.providers.for(v.provider.kind);
    const replicas = v.provider.kind === 'static' ? v.provider.endpoints.length : v.replicas;
    // GPUs are taken up front, in one store transaction, so two deploys never race for them
    const groups =
      v.provider.kind === 'static'
        ? Array.from({ length: replicas }, () => [] as string[])
        : await this.inventory.take(
            replicas,
            v.tp,
            v.gpuMemoryGb / v.tp,
            `${v.model}/${v.id}`,
            (i) => ({ model: v.model, versionId: v.id, workerId: workerId(v, i) }),
            Date.now(),
          );
    const started: WorkerHandle[] = [];
    this.dp.addVersion(v.model, v.id, v.cardChecksum);
    try {
      const results = await Promise.allSettled(
        groups.map((gpus, i) =>
          provider.start({ version: v, workerId: workerId(v, i), gpus, workDir: path.join(this.workDir, 'workers'), onProgress: (m) => onProgress?.(m) }),
        ),
      );
      for (const r of results) if (r.status === 'fulfilled') started.push(r.value);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      for (const h of started) {
        onProgress?.(`${h.id}: warming up (${v.warmup.requests} request(s) × ${v.warmup.maxTokens} tokens)`);
        await warmUp(h.url, v);
      }
    } catch (err) {
      await Promise.all(started.map((h) => provider.stop(h, 1_000).catch(() => undefined)));
      await this.inventory.releaseVersion(v.model, v.id);
      throw err;
    }
    for (const h of started) await this.adoptHandle(v, h);
    this.publish(v.model, v.id);
    const loadTimeMs = performance.now() - t0;
    return { workers: started, gpus: groups.flat(), loadTimeMs };
  }

  /** Record a live handle, watch it, make it known (not yet published). */
  private async adoptHandle(v: VersionConfig, h: WorkerHandle): Promise<void> {
    this.handles.set(h.id, h);
    const rec: WorkerRecord = {
      id: h.id,
      model: v.model,
      versionId: v.id,
      endpoint: h.url,
      provider: h.provider,
      pid: h.pid,
      state: 'ready',
      gpus: [...h.gpus],
      startedAt: Date.now(),
      updatedAt: Date.now(),
      info: h.info,
    };
    await this.store.upsertWorker(rec);
    void h.exited.then(async (e) => {
      if (this.handles.get(h.id) !== h) return;
      this.handles.delete(h.id);
      if (e.expected || this.stopping.has(h.id)) return;
      // an unexpected exit: out of rotation at once (before the record is written); the record stays for the operator
      try {
        this.publish(v.model, v.id);
      } catch {
        // version already removed
      }
      this.events.emit({
        kind: 'worker_exited',
        model: v.model,
        version: v.id,
        message: `worker ${h.id} exited unexpectedly (code ${String(e.code)}, signal ${String(e.signal)})`,
        data: e,
      });
      await this.store
        .upsertWorker({ ...rec, state: 'exited', updatedAt: Date.now(), info: { ...rec.info, exitCode: e.code, signal: e.signal } })
        .catch((err: unknown) =>
          this.events.emit({
            kind: 'store_error',
            model: v.model,
            version: v.id,
            message: `worker ${h.id}: recording its exit failed: ${(err as Error).message}`,
            data: {},
          }),
        );
    });
  }

  /** Push the current live workers of a version to the data plane (one list swap). */
  publish(model: string, version: string): void {
    const hs = this.of(model, version).sort((a, b) => (a.id < b.id ? -1 : 1));
    this.dp.setWorkers(
      model,
      version,
      hs.map((h) => ({ id: h.id, url: h.url })),
    );
    for (const h of hs) if (this.sleeping.has(h.id)) this.dp.setWorkerRoutable(model, version, h.id, false);
  }

  /** After a restart: adopt recorded workers that are still alive; returns how many. */
  async adopt(v: VersionConfig): Promise<number> {
    const recs = await this.store.listWorkers({ model: v.model, versionId: v.id });
    const provider = this.providers.for(v.provider.kind);
    let n = 0;
    this.dp.addVersion(v.model, v.id, v.cardChecksum);
    for (const r of recs) {
      if (r.state === 'exited' || r.state === 'stopped') {
        await this.store.deleteWorker(r.id);
        continue;
      }
      const h = provider.adopt ? await provider.adopt({ id: r.id, version: v, url: r.endpoint, pid: r.pid, gpus: r.gpus }) : undefined;
      if (h) {
        await this.adoptHandle(v, h);
        // adoptHandle recorded a fresh ready worker: keep what the record knew (asleep, sleep level,
        // log file, start time) so a second restart still knows the worker is asleep
        const level = (r.info?.sleepLevel as 1 | 2 | undefined) ?? 1;
        if (r.state === 'sleeping') this.sleeping.set(h.id, level);
        const fresh = await this.store.getWorker(h.id);
        if (fresh)
          await this.store.upsertWorker({
            ...fresh,
            state: r.state === 'sleeping' ? 'sleeping' : fresh.state,
            startedAt: r.startedAt,
            info: { ...r.info, ...fresh.info },
          });
        n++;
      } else {
        await this.store.deleteWorker(r.id);
        await this.inventory.releaseWorker(v.model, v.id, r.id);
      }
    }
    if (n > 0) this.publish(v.model, v.id);
    return n;
  }

  /** Stop every worker of a version, free its GPUs and drop it from the data plane; returns the GPUs freed. */
  async unloadVersion(model: string, version: string, graceMs: number = DEFAULTS.control.stopGraceMs): Promise<number> {
    const freed = await this.stopVersion(model, version, graceMs);
    // a version the data plane never knew (never loaded) is fine: nothing to remove
    await this.dp.removeVersion(model, version).catch(() => undefined);
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
        this.sleeping.delete(h.id);
        await this.store.deleteWorker(h.id);
        this.stopping.delete(h.id);
      }),
    );
    for (const r of await this.store.listWorkers({ model, versionId: version })) await this.store.deleteWorker(r.id);
    await this.store.deleteSetting(sleepKey(model, version));
    return this.inventory.releaseVersion(model, version);
  }

  /**
   * Put a version's workers to sleep (out of rotation, weights off the GPU) and remember it: a
   * restarted control plane that has to reload the version puts it back to sleep (see `sleptLevel`).
   */
  async sleepVersion(model: string, version: string, level: 1 | 2): Promise<void> {
    for (const h of this.of(model, version)) {
      await this.providers.for(h.provider as 'sim').sleep(h, level);
      this.sleeping.set(h.id, level);
      this.dp.setWorkerRoutable(model, version, h.id, false);
      const rec = await this.store.getWorker(h.id);
      if (rec) await this.store.upsertWorker({ ...rec, state: 'sleeping', updatedAt: Date.now(), info: { ...rec.info, sleepLevel: level } });
    }
    await this.store.setSetting(sleepKey(model, version), level, Date.now());
  }

  /** The level a version was put to sleep at and not woken since (survives restarts). */
  async sleptLevel(model: string, version: string): Promise<1 | 2 | undefined> {
    const l = await this.store.getSetting<number>(sleepKey(model, version));
    return l === 1 || l === 2 ? l : undefined;
  }

  /** Wake a version's sleeping workers; whether any slept or not, it stays awake across restarts. */
  async wakeVersion(model: string, version: string): Promise<void> {
    await this.store.deleteSetting(sleepKey(model, version));
    await Promise.all(
      this.of(model, version).map(async (h) => {
        if (!this.sleeping.has(h.id)) return;
        await this.providers.for(h.provider as 'sim').wake(h);
        this.sleeping.delete(h.id);
        this.dp.setWorkerRoutable(model, version, h.id, true);
        const rec = await this.store.getWorker(h.id);
        if (rec) await this.store.upsertWorker({ ...rec, state: 'ready', updatedAt: Date.now() });
      }),
    );
  }

  isAsleep(model: string, version: string): boolean {
    return this.of(model, version).some((h) => this.sleeping.has(h.id));
  }

  /** Stop everything this process started (shutdown of `glidepath up`). */
  async stopAll(graceMs: number = DEFAULTS.control.stopGraceMs): Promise<void> {
    const byVersion = new Set([...this.handles.values()].map((h) => `${h.model}\u0000${h.version}`));
    await Promise.all(
      [...byVersion].map(async (k) => {
        const [m, v] = k.split('\u0000') as [string, string];
        for (const h of this.of(m, v)) this.stopping.add(h.id);
        await Promise.all(
          this.of(m, v).map((h) =>
            this.providers
              .for(h.provider as 'sim')
              .stop(h, graceMs)
              .catch(() => undefined),
          ),
        );
      }),
    );
  }
}

/** The one place the sleep record's key is built. */
function sleepKey(model: string, version: string): string {
  return `sleep:${model}/${version}`;
}

export function workerId(v: { model: string; id: string }, i: number): string {
  return `${v.model}/${v.id}/${i}`;
}

/** Send the version's warm-up requests straight to one worker; any failure fails the load. */
async function warmUp(url: string, v: VersionConfig): Promise<void> {
  for (let i = 0; i < v.warmup.requests; i++) {
    let res;
    try {
      res = await request(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: v.model, prompt: `warm-up ${i}`, max_tokens: v.warmup.maxTokens, temperature: 0 }),
        headersTimeout: DEFAULTS.control.warmupTimeoutMs,
        bodyTimeout: DEFAULTS.control.warmupTimeoutMs,
      });
    } catch (err) {
      throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} failed: ${(err as Error).message}`);
    }
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new UnavailableError('warmup_failed', `warm-up request ${i + 1} to ${url} answered ${res.statusCode}: ${text.slice(0, 200)}`);
  }
}
