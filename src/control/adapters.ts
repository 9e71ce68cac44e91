// The LoRA adapter registry: each model's adapters, from its config (`models[].adapters`) and those
// registered through the admin API (kept in the store), handed to the data plane, which routes a
// request naming one to its model's workers and loads it there on demand (gateway/adapters.ts); and
// what an adapter canary changes: a candidate beside an adapter, its promotion, unloading a version.
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
  /** The lock an adapter's canary holds (by the adapter's name): a registration waits for its steps. */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T>;
}

const KEY = 'adapters.registered';
/** A config-defined adapter a canary promoted: served from the candidate while the config still names what it replaced. */
const PROMOTED = 'adapters.promoted';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

export interface AdapterView {
  name: string;
  model: string;
  source: string;
  version: string | null;
  /** The name the engines have it loaded under (another than `name` once a canary promoted a version). */
  served_as: string;
  /** `config`: from glidepath.yaml (changed there; a canary's promotion overrides it in the store); `api`: registered at run time. */
  from: 'config' | 'api';
  /** An adapter canary's candidate and its share of the adapter's requests (null: none runs). */
  canary: { source: string; version: string | null; served_as: string; share: number } | null;
  /** Workers of the model that hold it or its candidate now (and how many of their requests use it). */
  workers: { worker: string; version: string; served_as: string; loaded: boolean; in_use: number }[];
}

type Stored = Omit<AdapterSpec, 'model' | 'servedAs'> & { servedAs?: string | undefined };
type Registered = Record<string, Stored[]>;
type Promoted = Record<string, Stored & { model: string; servedAs: string; replaces: string }>;

export class AdapterRegistry {
  constructor(private readonly cp: AdapterHost) {}

  /**
   * At boot: every model's adapters to the data plane, the config's first. One registered through the
   * API whose name the config now gives a model or an adapter (made permanent there) is set aside,
   * said, and kept in the store: a config change never stops the gateway from starting.
   */
  async restore(onSkipped: (why: string) => void = () => undefined): Promise<void> {
    this.promoted = await this.readPromoted(onSkipped);
    const reg = await this.registered();
    const taken = this.configNames();
    for (const m of this.cp.cfg.models) {
      // a follower's data plane has a model once the leader published it (the mirror restores again then)
      if (!this.cp.dp.models.has(m.name)) continue;
      for (const a of reg[m.name] ?? [])
        if (taken.has(a.name))
          onSkipped(`adapter ${a.name} of ${m.name}, registered through the API, is not served: the config gives its name to a model or an adapter`);
      this.cp.dp.setAdapters(m.name, this.served(m.name, reg[m.name] ?? []));
    }
  }

  /** Names the config gives to models and adapters: an API registration of one is set aside (kept in the store, not served). */
  private configNames(): Set<string> {
    return new Set(this.cp.cfg.models.flatMap((m) => [m.name, ...(m.adapters ?? []).map((a) => a.name)]));
  }

  /** A model's adapters as the data plane serves them: the config's, then the API's not set aside. */
  private served(model: string, api: readonly Stored[]): AdapterSpec[] {
    const taken = this.configNames();
    return [...this.fromConfig(model), ...api.filter((a) => !taken.has(a.name)).map((a) => spec(model, a))];
  }

  /**
   * Under the adapter's lock (its canary's steps run under it) and one change at a time: refused while
   * a canary of it is unfinished (its candidate stands beside it, or its promotion or rollback runs).
   */
  private change<T>(name: string, what: string, fn: () => Promise<T>): Promise<T> {
    return this.cp.exclusive(name, () =>
      this.serial(async () => {
        const running = (await this.cp.store.listActiveRollouts()).find((r) => r.model === name);
        if (running !== undefined)
          throw new ConflictError('rollout_in_progress', `adapter ${name} has a canary in progress (${running.id}): it cannot be ${what} until that ends`);
        return fn();
      }),
    );
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
      .map((a) => {
        const c = this.cp.dp.adapters.candidate(a.name);
        const names = new Set([a.servedAs, ...(c === undefined ? [] : [c.spec.servedAs])]);
        return {
          name: a.name,
          model,
          source: a.source,
          version: a.version ?? null,
          served_as: a.servedAs,
          from: config.has(a.name) ? 'config' : 'api',
          canary: c === undefined ? null : { source: c.spec.source, version: c.spec.version ?? null, served_as: c.spec.servedAs, share: c.share },
          workers: [...st.pools.values()].flatMap((p) =>
            p.workers.flatMap((w) =>
              w.adapters
                .loaded()
                .filter((s) => names.has(s.name))
                .map((s) => ({ worker: w.id, version: p.version, served_as: s.name, loaded: s.loaded, in_use: s.inUse })),
            ),
          ),
        };
      });
  }

  /** Register (or replace: a new source or version of the same name) an adapter of `model`. */
  async register(model: string, a: { name: string; source: string; version?: string | undefined }, actor: Actor): Promise<AdapterView> {
    this.cp.modelConfig(model);
    if (!NAME.test(a.name) || a.name.includes('--'))
      throw new BadRequestError(
        'invalid_body',
        `name: ${JSON.stringify(a.name)} is not an adapter name (letters, digits, . _ : / -, no "--", which its versions' names use; at most 128)`,
      );
    if (a.source.trim() === '') throw new BadRequestError('invalid_body', 'source: a path or URI the engine loads the adapter from');
    if (this.fromConfig(model).some((c) => c.name === a.name))
      throw new ConflictError('adapter_name_taken', `adapter ${a.name} of ${model} is defined in the config: change it there`);
    return this.change(a.name, 'registered again', () =>
      this.cp.audited(actor, 'adapter.register', `${model}/${a.name}`, a, async () => {
        const reg = await this.registered();
        const next = [...(reg[model] ?? []).filter((x) => x.name !== a.name), { name: a.name, source: a.source, version: a.version }];
        await this.write(model, reg, next);
        return this.list(model).find((v) => v.name === a.name) as AdapterView;
      }),
    );
  }

  async remove(model: string, name: string, actor: Actor): Promise<{ removed: string }> {
    this.cp.modelConfig(model);
    if (this.fromConfig(model).some((c) => c.name === name))
      throw new ConflictError('adapter_name_taken', `adapter ${name} of ${model} is defined in the config: remove it there`);
    return this.change(name, 'removed', async () => {
      const reg = await this.registered();
      if (!(reg[model] ?? []).some((x) => x.name === name)) throw new NotFoundError('adapter_not_found', `${model} has no registered adapter ${name}`);
      return this.cp.audited(actor, 'adapter.remove', `${model}/${name}`, { name }, async () => {
        await this.write(
          model,
          reg,
          (reg[model] ?? []).filter((x) => x.name !== name),
        );
        return { removed: name };
      });
    });
  }

  /**
   * An adapter canary's promotion: the candidate is the adapter from now on, under the name it is
   * loaded under (no worker loads it again). One registered through the API is rewritten in the store;
   * one from the config is overridden there, for as long as the config names the source it replaced.
   */
  promote(model: string, name: string, c: AdapterSpec): Promise<void> {
    return this.serial(async () => {
      const configured = this.cp.modelConfig(model).adapters?.find((a) => a.name === name);
      const stored: Stored = { name, source: c.source, version: c.version, servedAs: c.servedAs };
      if (configured !== undefined) {
        const before = this.promoted;
        this.promoted = { ...before, [name]: { ...stored, model, servedAs: c.servedAs, replaces: configured.source } };
        try {
          // the data plane first (it checks the names): nothing is kept that it refused
          this.cp.dp.setAdapters(model, this.served(model, (await this.registered())[model] ?? []));
        } catch (err) {
          this.promoted = before;
          throw err;
        }
        await this.cp.store.setSetting(PROMOTED, this.promoted, Date.now());
        return;
      }
      const reg = await this.registered();
      if (!(reg[model] ?? []).some((x) => x.name === name)) throw new NotFoundError('adapter_not_found', `${model} has no adapter ${name}`);
      await this.write(
        model,
        reg,
        (reg[model] ?? []).map((x) => (x.name === name ? stored : x)),
      );
    });
  }

  /** The model's API-registered adapters become `next`: to the data plane (which checks the namespace first), then kept. */
  private async write(model: string, reg: Registered, next: Stored[]): Promise<void> {
    this.cp.dp.setAdapters(model, this.served(model, next));
    await this.cp.store.setSetting(KEY, { ...reg, [model]: next }, Date.now());
  }

  /** Config-defined adapters a canary promoted (read at restore). */
  private promoted: Promoted = {};

  private fromConfig(model: string): AdapterSpec[] {
    return (this.cp.modelConfig(model).adapters ?? []).map((a) => {
      const p = this.promoted[a.name];
      // a promotion holds while the config still names the source it replaced
      return p !== undefined && p.model === model && p.replaces === a.source
        ? { name: a.name, source: p.source, version: p.version, servedAs: p.servedAs, model }
        : { name: a.name, source: a.source, version: a.version, servedAs: a.name, model };
    });
  }

  /** Promotions of config-defined adapters whose config entry still has the source they replaced; the others are said and dropped. */
  private async readPromoted(onSkipped: (why: string) => void): Promise<Promoted> {
    const raw: unknown = await this.cp.store.getSetting(PROMOTED);
    const out: Promoted = {};
    if (typeof raw !== 'object' || raw === null) return out;
    for (const [name, p] of Object.entries(raw as Record<string, unknown>)) {
      if (typeof p !== 'object' || p === null) continue;
      const q = p as Promoted[string];
      if (typeof q.model !== 'string' || typeof q.source !== 'string' || typeof q.servedAs !== 'string' || typeof q.replaces !== 'string') continue;
      const c = this.cp.cfg.models.find((m) => m.name === q.model)?.adapters?.find((a) => a.name === name);
      if (c?.source === q.replaces) out[name] = { ...q, name };
      else
        onSkipped(
          `adapter ${name} of ${q.model}: the config changed since a canary promoted ${q.source} over ${q.replaces}; the config's ${c === undefined ? '(removed)' : c.source} is served`,
        );
    }
    return out;
  }

  /** What the API registered, by model; an unreadable entry is dropped. */
  private async registered(): Promise<Registered> {
    const raw: unknown = await this.cp.store.getSetting(KEY);
    const out: Registered = {};
    if (typeof raw !== 'object' || raw === null) return out;
    for (const [model, list] of Object.entries(raw as Record<string, unknown>)) {
      if (!Array.isArray(list)) continue;
      out[model] = list.filter(
        (a): a is Stored => typeof a === 'object' && a !== null && typeof (a as AdapterSpec).name === 'string' && typeof (a as AdapterSpec).source === 'string',
      );
    }
    return out;
  }
}

/** A stored registration as the data plane serves it (under its own name unless a canary promoted another). */
function spec(model: string, a: Stored): AdapterSpec {
  return { name: a.name, source: a.source, version: a.version, servedAs: typeof a.servedAs === 'string' ? a.servedAs : a.name, model };
}
