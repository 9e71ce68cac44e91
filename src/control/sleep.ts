// Which workers sleep and at what level (out of rotation, their weights off the GPU), persisted per
// version so that a restarted control plane that has to reload a version puts it back to sleep.
// Owned by the worker manager; nothing else puts workers to sleep or wakes them.
import type { DataPlane } from '../gateway/dataplane.js';
import type { Providers, WorkerHandle } from '../providers/index.js';
import type { Store } from '../store/types.js';

export class Sleep {
  /** worker id → sleep level while asleep. */
  readonly levels = new Map<string, 1 | 2>();

  constructor(
    private readonly store: Store,
    private readonly providers: Providers,
    private readonly dp: DataPlane,
  ) {}

  /** Put these workers of a version to sleep and remember the version sleeps. */
  async put(hs: readonly WorkerHandle[], model: string, version: string, level: 1 | 2): Promise<void> {
    for (const h of hs) {
      // out of rotation before the engine sleeps: no request is sent to it meanwhile
      this.dp.setWorkerRoutable(model, version, h.id, false);
      try {
        await this.providers.for(h.provider as 'sim').sleep(h, level);
      } catch (err) {
        this.dp.setWorkerRoutable(model, version, h.id, true);
        throw err;
      }
      this.levels.set(h.id, level);
      const rec = await this.store.getWorker(h.id);
      if (rec) await this.store.upsertWorker({ ...rec, state: 'sleeping', updatedAt: Date.now(), info: { ...rec.info, sleepLevel: level } });
    }
    await this.store.setSetting(key(model, version), level, Date.now());
  }

  /** The level a version was put to sleep at and not woken since. */
  async level(model: string, version: string): Promise<1 | 2 | undefined> {
    const l = await this.store.getSetting<number>(key(model, version));
    return l === 1 || l === 2 ? l : undefined;
  }

  /** Wake these workers of a version if they sleep; the version stays awake across restarts either way. */
  async wake(hs: readonly WorkerHandle[], model: string, version: string): Promise<void> {
    await this.forget(model, version);
    await Promise.all(
      hs.map(async (h) => {
        if (!this.levels.has(h.id)) return;
        await this.providers.for(h.provider as 'sim').wake(h);
        this.levels.delete(h.id);
        this.dp.setWorkerRoutable(model, version, h.id, true);
        const rec = await this.store.getWorker(h.id);
        if (rec) await this.store.upsertWorker({ ...rec, state: 'ready', updatedAt: Date.now() });
      }),
    );
  }

  /** The version is no longer remembered asleep (woken, or stopped). */
  async forget(model: string, version: string): Promise<void> {
    await this.store.deleteSetting(key(model, version));
  }
}

/** The one place the sleep record's key is built. */
function key(model: string, version: string): string {
  return `sleep:${model}/${version}`;
}
