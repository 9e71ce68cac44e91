// The LoRA adapter registry: each model's adapters, from its config (`models[].adapters`) and those
// registered through the admin API (kept in the store), handed to the data plane, which routes a
// request naming one to its model's workers and loads it there on demand (gateway/adapters.ts).
import type { Actor } from '../rollout/ports.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { AdapterSpec } from '../gateway/adapters.js';
import type { GlidepathConfig, ModelConfig } from '../config/types.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { Store } from '../store/types.js';

/** What the registry needs of the control plane. */
export interface AdapterHost {
  readonly cfg: GlidepathConfig;
  readonly dp: DataPlane;
  readonly store: Store;
  modelConfig(name: string): ModelConfig;
  audited<T>(actor: Actor, action: string, target: string, params: unknown, fn: () => Promise<T>): Promise<T>;
}

const KEY = 'adapters.registered';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

export interface AdapterView {
  name: string;
  model: string;
  source: string;
  version: string | null;
  /** `config`: from glidepath.yaml (changed there); `api`: registered at run time. */
  from: 'config' | 'api';
  /** Workers of the model that hold it now (and how many of their requests use it). */
  workers: { worker: string; version: string; loaded: boolean; in_use: number }[];
}

type Registered = Record<string, Omit<AdapterSpec, 'model'>[]>;

export class AdapterRegistry {
  constructor(private readonly cp: AdapterHost) {}

  /**
   * At boot: every model's adapters to the data plane, the config's first. One registered through the
   * API whose name the config now gives a model or an adapter (made permanent there) is set aside,
   * said, and kept in the store: a config change never stops the gateway from starting.
   */
  async restore(onSkipped: (why: string) => void = () => undefined): Promise<void> {
    const reg = await this.registered();
    const taken = new Set(this.cp.cfg.models.flatMap((m) => [m.name, ...this.fromConfig(m.name).map((a) => a.name)]));
    for (const m of this.cp.cfg.models) {
      const api = (reg[m.name] ?? []).filter((a) => {
        if (!taken.has(a.name)) return true;
        onSkipped(`adapter ${a.name} of ${m.name}, registered through the API, is not served: the config gives its name to a model or an adapter`);
        return false;
      });
      for (const a of api) taken.add(a.name);
      this.cp.dp.setAdapters(m.name, [...this.fromConfig(m.name), ...api.map((a) => ({ ...a, model: m.name }))]);
    }
  }

  /** Registrations and removals one at a time: each reads, changes and writes the stored list. */
  private queue: Promise<unknown> = Promise.resolve();
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  list(model: string): AdapterView[] {
    this.cp.modelConfig(model);
    const config = new Set(this.fromConfig(model).map((a) => a.name));
    const st = this.cp.dp.model(model);
    return this.cp.dp.adapters
      .list()
      .filter((a) => a.model === model)
      .map((a) => ({
        name: a.name,
        model,
        source: a.source,
        version: a.version ?? null,
        from: config.has(a.name) ? 'config' : 'api',
        workers: [...st.pools.values()].flatMap((p) =>
          p.workers.flatMap((w) =>
            w.adapters
              .loaded()
              .filter((s) => s.name === a.name)
              .map((s) => ({ worker: w.id, version: p.version, loaded: s.loaded, in_use: s.inUse })),
          ),
        ),
      }));
  }

  /** Register (or replace: a new source or version of the same name) an adapter of `model`. */
  async register(model: string, a: { name: string; source: string; version?: string | undefined }, actor: Actor): Promise<AdapterView> {
    this.cp.modelConfig(model);
    if (!NAME.test(a.name))
      throw new BadRequestError('invalid_body', `name: ${JSON.stringify(a.name)} is not an adapter name (letters, digits, . _ : / -; at most 128)`);
    if (a.source.trim() === '') throw new BadRequestError('invalid_body', 'source: a path or URI the engine loads the adapter from');
    if (this.fromConfig(model).some((c) => c.name === a.name))
      throw new ConflictError('adapter_name_taken', `adapter ${a.name} of ${model} is defined in the config: change it there`);
    return this.serial(() =>
      this.cp.audited(actor, 'adapter.register', `${model}/${a.name}`, a, async () => {
        const reg = await this.registered();
        const next = [...(reg[model] ?? []).filter((x) => x.name !== a.name), { name: a.name, source: a.source, version: a.version }];
        // the data plane checks the namespace (another model's adapter, a model's name) before anything is kept
        this.cp.dp.setAdapters(model, [...this.fromConfig(model), ...next.map((x) => ({ ...x, model }))]);
        await this.cp.store.setSetting(KEY, { ...reg, [model]: next }, Date.now());
        return this.list(model).find((v) => v.name === a.name) as AdapterView;
      }),
    );
  }

  async remove(model: string, name: string, actor: Actor): Promise<{ removed: string }> {
    this.cp.modelConfig(model);
    if (this.fromConfig(model).some((c) => c.name === name))
      throw new ConflictError('adapter_name_taken', `adapter ${name} of ${model} is defined in the config: remove it there`);
    return this.serial(async () => {
      const reg = await this.registered();
      if (!(reg[model] ?? []).some((x) => x.name === name)) throw new NotFoundError('adapter_not_found', `${model} has no registered adapter ${name}`);
      return this.cp.audited(actor, 'adapter.remove', `${model}/${name}`, { name }, async () => {
        const next = (reg[model] ?? []).filter((x) => x.name !== name);
        this.cp.dp.setAdapters(model, [...this.fromConfig(model), ...next.map((x) => ({ ...x, model }))]);
        await this.cp.store.setSetting(KEY, { ...reg, [model]: next }, Date.now());
        return { removed: name };
      });
    });
  }

  private fromConfig(model: string): AdapterSpec[] {
    return (this.cp.modelConfig(model).adapters ?? []).map((a) => ({ name: a.name, source: a.source, version: a.version, model }));
  }

  /** What the API registered, by model; an unreadable entry is dropped. */
  private async registered(): Promise<Registered> {
    const raw: unknown = await this.cp.store.getSetting(KEY);
    const out: Registered = {};
    if (typeof raw !== 'object' || raw === null) return out;
    for (const [model, list] of Object.entries(raw as Record<string, unknown>)) {
      if (!Array.isArray(list)) continue;
      out[model] = list.filter(
        (a): a is Omit<AdapterSpec, 'model'> =>
          typeof a === 'object' && a !== null && typeof (a as AdapterSpec).name === 'string' && typeof (a as AdapterSpec).source === 'string',
      );
    }
    return out;
  }
}
