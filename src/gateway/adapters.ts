// LoRA adapters on a version's workers (docs/multi-model.md): which adapters each worker has loaded
// (at most its engine's max_loras, least recently used first out), loading one on demand (once per
// worker and adapter: whoever asks meanwhile waits for the same load), never evicting one a request
// is using, and picking a worker for an adapter's request — one that has it, unless that one is
// busier than the least busy by more than the bound, then the least busy, which loads it (or, with
// `gateway.adapter_routing: random`, any worker that can take it); the prefetcher's loads go the same way.
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, ConflictError, NotFoundError, UnavailableError } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { eligible } from './pick.js';
import { stickyPoint } from './split.js';
import type { Pickable, Picker } from './pick.js';

/** A registered adapter, served on its base model's workers under its own name. */
export interface AdapterSpec {
  name: string;
  /** The base model whose workers serve it. */
  model: string;
  /** Where the engine loads it from (vLLM's `lora_path`). */
  source: string;
  version?: string | undefined;
  /**
   * The name the engine has it loaded under (vLLM's `lora_name`), and the `model` of the requests sent
   * there: the adapter's own name, unless a canary put another version beside it (`<name>--<version>`,
   * both loaded at once on a worker), which keeps that name once promoted. The client sees `name`.
   */
  servedAs: string;
}

/** Loads and unloads adapters on an engine (vLLM's `/v1/load_lora_adapter`; providers/lora.ts). */
export interface AdapterLoader {
  load(workerUrl: string, name: string, source: string): Promise<void>;
  unload(workerUrl: string, name: string): Promise<void>;
}

interface Slot {
  /** What it was loaded from: a registration with another source (a new version) loads it again. */
  source: string;
  /** Requests of this adapter running on the worker: never evicted while > 0 (counted once it is loaded). */
  inUse: number;
  /** Resolves when loaded; rejects when the load failed (the slot is gone then). */
  ready: Promise<void>;
  loaded: boolean;
  /** Being unloaded once its last request ends (`retire`): no request takes it meanwhile; settles when unloaded. */
  retiring: { done: () => void; promise: Promise<void> } | undefined;
}

/** Why a load was asked: a request that needs the adapter, or the prefetcher (prefetch.ts) ahead of its requests. */
export type LoadTrigger = 'demand' | 'prefetch';

const NONE: ReadonlySet<string> = new Set();

/** What a worker needs to load adapters: its URL and its engine's slot count. */
export interface AdapterHost {
  readonly url: string;
  readonly id: string;
}

/** One worker's adapters, in least-recently-used order (a Map's insertion order, moved to the end on use). */
export class AdapterSlots {
  private readonly slots = new Map<string, Slot>();

  /** Loaded or loading. */
  has(name: string): boolean {
    return this.slots.has(name);
  }

  /** Loaded (not still loading). */
  ready(name: string): boolean {
    return this.slots.get(name)?.loaded === true;
  }

  /** A load of another adapter can go here: a slot is free, or one holds an adapter no request uses. */
  roomFor(max: number): boolean {
    if (this.slots.size < max) return true;
    for (const s of this.slots.values()) if (s.loaded && s.inUse === 0 && s.retiring === undefined) return true;
    return false;
  }

  /**
   * The adapter a load evicts: the least recently used that is loaded and that no request uses, one
   * outside `keep` (the prefetcher's top-k) first; with `strict`, only one outside `keep`.
   */
  private victim(keep: ReadonlySet<string>, strict: boolean): [string, Slot] | undefined {
    let spare: [string, Slot] | undefined;
    for (const e of this.slots) {
      const [name, s] = e;
      if (!s.loaded || s.inUse > 0 || s.retiring !== undefined) continue;
      if (!keep.has(name)) return e;
      spare ??= e;
    }
    return strict ? undefined : spare;
  }

  names(): string[] {
    return [...this.slots.keys()];
  }

  /** Each slot by the name it is served as. */
  loaded(): { name: string; inUse: number; loaded: boolean }[] {
    return [...this.slots].map(([name, s]) => ({ name, inUse: s.inUse, loaded: s.loaded }));
  }

  /** The engine does not have `name` (it said so): the slot goes, whatever uses it; the next load of the name loads it again. */
  forget(name: string): void {
    const s = this.slots.get(name);
    if (s === undefined || !s.loaded) return;
    this.slots.delete(name);
    s.retiring?.done();
  }

  /** A request of the adapter served as `name` lets go of this worker (the last one of a retiring adapter unloads it). */
  done(name: string): void {
    const s = this.slots.get(name);
    if (s !== undefined && s.inUse > 0) s.inUse--;
    if (s?.inUse === 0 && s.retiring !== undefined) s.retiring.done();
  }

  /**
   * Unload the adapter served as `name` from this worker once no request uses it (an adapter canary's
   * candidate rolled back, the version a promotion replaced): no request takes it from now on. The slot
   * stays taken until the engine answered (a load of the name meanwhile is refused, retryable, rather
   * than racing the unload). Resolves when it is gone (at once when the worker does not have it);
   * rejects when the unload fails (the slot is dropped either way: the engine keeps an adapter nothing
   * routes to, and a later load of the name unloads it first).
   */
  retire(w: AdapterHost, name: string, loader: AdapterLoader): Promise<void> {
    const s = this.slots.get(name);
    if (s === undefined) return Promise.resolve();
    if (s.retiring !== undefined) return s.retiring.promise;
    let done!: () => void;
    const idle = new Promise<void>((resolve) => (done = resolve));
    const promise = (async () => {
      await s.ready.catch(() => undefined);
      if (!s.loaded) return; // its load failed: nothing on the engine (and its slot is gone)
      if (s.inUse > 0) await idle;
      try {
        await loader.unload(w.url, name);
      } finally {
        if (this.slots.get(name) === s) this.slots.delete(name);
      }
    })();
    s.retiring = { done, promise };
    return promise;
  }

  /**
   * Make sure the worker has `a` (from its registered source) and count a request of it here (`done` lets go): 'hit' at once when
   * loaded; 'miss' after loading it (evicting the least recently used adapter no request uses when
   * the worker's `max` slots are taken; one outside `keep`, the prefetcher's top-k, if there is one).
   * Throws a retryable 503, counting nothing, when every slot holds an adapter in use or the load fails.
   * `retired`: a version no longer registered (a request that chose it before a canary ended, now
   * retried or resumed elsewhere): served, then unloaded here once its last request ends.
   */
  async acquire(
    w: AdapterHost,
    a: AdapterSpec,
    max: number,
    loader: AdapterLoader,
    metrics: GatewayMetrics,
    keep: ReadonlySet<string> = NONE,
    retired = false,
  ): Promise<'hit' | 'miss'> {
    const r = await this.take(w, a, max, loader, metrics, keep);
    if (retired) this.retire(w, a.servedAs, loader).catch(() => undefined);
    return r;
  }

  private async take(
    w: AdapterHost,
    a: AdapterSpec,
    max: number,
    loader: AdapterLoader,
    metrics: GatewayMetrics,
    keep: ReadonlySet<string>,
  ): Promise<'hit' | 'miss'> {
    const s = this.slots.get(a.servedAs);
    if (s !== undefined && s.source !== a.source) {
      // registered again with another source (a new version): the old weights go before the new load
      if (!s.loaded) {
        // (a load of the old source under way, a prefetch's perhaps): once it settled, unloaded and loaded again
        await s.ready.catch(() => undefined);
        return this.take(w, a, max, loader, metrics, keep);
      }
      if (s.inUse > 0)
        throw new UnavailableError(
          'adapter_load_failed',
          `worker ${w.id} still serves the previous ${a.name} (${s.source}); its new source loads once that is done`,
          {
            retryAfterS: 1,
          },
        );
      this.slots.delete(a.servedAs);
      return this.load(w, a, loader, metrics, 'demand', loader.unload(w.url, a.servedAs));
    }
    if (s !== undefined) {
      if (s.retiring !== undefined) throw unloading(w, a);
      // most recently used: to the end
      this.slots.delete(a.servedAs);
      this.slots.set(a.servedAs, s);
      if (s.loaded) {
        s.inUse++;
        return 'hit';
      }
      // another request is loading it here: the same load (a slot still loading is never evicted)
      try {
        await s.ready;
      } catch (err) {
        throw new UnavailableError('adapter_load_failed', `worker ${w.id} could not load adapter ${a.name}: ${(err as Error).message}`, { retryAfterS: 1 });
      }
      if (s.retiring !== undefined) throw unloading(w, a);
      s.inUse++;
      return 'miss';
    }
    const room = this.makeRoom(w, a, max, loader, metrics, keep, 'demand');
    if (room === undefined)
      throw new UnavailableError('adapter_slots_busy', `worker ${w.id}: all ${max} LoRA slots hold adapters in use; ${a.name} cannot be loaded now`, {
        retryAfterS: 1,
      });
    return this.load(w, a, loader, metrics, 'demand', room);
  }

  /**
   * The prefetcher's load (prefetch.ts): `a` loaded here ahead of its requests, through the same
   * path as a request's (one load per worker and adapter, the evicted adapter unloaded first), no
   * request counted in it. Only into a free slot or over the least recently used adapter that no
   * request uses and that is not in `keep` (the top-k: one of them never makes room for another).
   * Undefined, having done nothing, when the worker has it already or has no such room; else settled
   * once the load is done (or failed: counted, and left to a request to load it on demand).
   */
  prefetch(
    w: AdapterHost,
    a: AdapterSpec,
    max: number,
    loader: AdapterLoader,
    metrics: GatewayMetrics,
    keep: ReadonlySet<string>,
  ): Promise<boolean> | undefined {
    if (this.slots.has(a.servedAs)) return undefined;
    const room = this.makeRoom(w, a, max, loader, metrics, keep, 'prefetch', true);
    if (room === undefined) return undefined;
    return this.load(w, a, loader, metrics, 'prefetch', room).then(
      () => true,
      () => false,
    );
  }

  /** A free slot for a load of `a` (resolved at once), or the unload of the adapter it evicts; undefined: none can go. */
  private makeRoom(
    w: AdapterHost,
    a: AdapterSpec,
    max: number,
    loader: AdapterLoader,
    metrics: GatewayMetrics,
    keep: ReadonlySet<string>,
    trigger: LoadTrigger,
    strict = false,
  ): Promise<void> | undefined {
    if (this.slots.size < max) return Promise.resolve();
    const victim = this.victim(keep, strict);
    if (victim === undefined) return undefined;
    const [name, slot] = victim;
    this.slots.delete(name);
    metrics.adapterEvictions.labels(a.model, trigger).inc();
    // the engine's slot is free once the unload answered; an unload that fails leaves the adapter
    // where it was (the map keeps agreeing with the engine) and this load fails, to be retried elsewhere
    return loader.unload(w.url, name).catch((err: unknown) => {
      if (!this.slots.has(name)) this.slots.set(name, slot);
      throw new Error(`unloading ${name} to make room failed: ${(err as Error).message}`);
    });
  }

  /**
   * Load `a` once `before` (an unload) is done; the slot is taken at once, so no other load counts it
   * free meanwhile. A request's load counts it in the slot in the same step that marks it loaded: in
   * between, another load could evict it.
   */
  private async load(
    w: AdapterHost,
    a: AdapterSpec,
    loader: AdapterLoader,
    metrics: GatewayMetrics,
    trigger: LoadTrigger,
    before: Promise<void>,
  ): Promise<'miss'> {
    const t0 = performance.now();
    const ready = before.then(() => loader.load(w.url, a.servedAs, a.source));
    const s: Slot = { source: a.source, inUse: 0, ready, loaded: false, retiring: undefined };
    this.slots.set(a.servedAs, s);
    try {
      await ready;
    } catch (err) {
      if (this.slots.get(a.servedAs) === s) this.slots.delete(a.servedAs);
      // (a failed unload before it already put its adapter back)
      metrics.adapterLoads.labels(a.model, 'failed', trigger).inc();
      throw new UnavailableError('adapter_load_failed', `worker ${w.id} could not load adapter ${a.name}: ${(err as Error).message}`, { retryAfterS: 1 });
    }
    s.loaded = true;
    if (trigger === 'demand') s.inUse++;
    metrics.adapterLoads.labels(a.model, 'loaded', trigger).inc();
    metrics.adapterLoadSeconds.labels(a.model).observe((performance.now() - t0) / 1000);
    return 'miss';
  }
}

/** What the adapter picker needs of a worker. */
export interface AdapterPickable extends Pickable {
  readonly adapters: AdapterSlots;
}

/**
 * A picker for one adapter's requests: among the eligible workers that have it (loaded or loading),
 * the least busy — unless it is busier than the least busy eligible worker by more than
 * DEFAULTS.gateway.adapterAffinitySlack, then the base picker's choice over all (which loads it).
 */
export class AdapterPicker implements Picker {
  readonly name: string;
  constructor(
    private readonly base: Picker,
    private readonly adapter: string,
    /** LoRA slots per worker (the pool's max_loras). */
    private readonly max: number,
  ) {
    this.name = `${base.name}+adapter`;
  }

  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    let best: W | undefined;
    let bestLoaded: W | undefined;
    let least = Infinity;
    const room: W[] = [];
    for (const w of workers) {
      if (!eligible(w, now, exclude)) continue;
      if (w.outstanding < least) least = w.outstanding;
      const slots = (w as unknown as AdapterPickable).adapters;
      if (slots.has(this.adapter)) {
        if (best === undefined || w.outstanding < best.outstanding) best = w;
        if (slots.ready(this.adapter) && (bestLoaded === undefined || w.outstanding < bestLoaded.outstanding)) bestLoaded = w;
      } else if (slots.roomFor(this.max)) room.push(w);
    }
    const slack = least + DEFAULTS.gateway.adapterAffinitySlack;
    // a holder that has it loaded before one still loading it (a prefetch's second copy): a hit, not a wait
    if (bestLoaded !== undefined && bestLoaded.outstanding <= slack) return bestLoaded;
    if (best !== undefined && best.outstanding <= slack) return best;
    // elsewhere only where it can be loaded (a worker whose slots all hold adapters in use cannot); else the busy holder
    return this.base.pick(room, now, exclude) ?? best ?? this.base.pick(workers, now, exclude);
  }
}

/**
 * `gateway.adapter_routing: random`: an adapter's request goes to any eligible worker that has it or
 * can load it, drawn uniformly, blind to where it is loaded (else the base picker's choice over all).
 * The baseline the affinity picker is measured against (bench/multi-model.ts).
 */
export class RandomAdapterPicker implements Picker {
  readonly name: string;
  constructor(
    private readonly base: Picker,
    private readonly adapter: string,
    private readonly max: number,
    private readonly rand: () => number,
  ) {
    this.name = `${base.name}+adapter-random`;
  }

  pick<W extends Pickable>(workers: readonly W[], now: number, exclude?: ReadonlySet<W>): W | undefined {
    const ok = workers.filter((w) => {
      const slots = (w as unknown as AdapterPickable).adapters;
      return eligible(w, now, exclude) && (slots.has(this.adapter) || slots.roomFor(this.max));
    });
    return ok.length > 0 ? ok[Math.floor(this.rand() * ok.length)] : this.base.pick(workers, now, exclude);
  }
}

/** An adapter canary's candidate and the share of the adapter's requests it gets (src/rollout/adapter-canary.ts). */
export interface AdapterCandidate {
  spec: AdapterSpec;
  /** 0-1. */
  share: number;
  /** Salts the sticky choice: a user keeps its side while the share grows, and each canary draws its own cohort. */
  salt: string;
}

/** The adapters the control plane registered, by name (one namespace with the models'). */
export class AdapterIndex {
  private readonly byName = new Map<string, AdapterSpec>();
  private readonly candidates = new Map<string, AdapterCandidate>();
  /** Names adapter versions were served under and no longer are (a canary's end): unloaded wherever a late request loads them. */
  private readonly retiredNames = new Set<string>();

  get(name: string): AdapterSpec | undefined {
    return this.byName.get(name);
  }

  /** Whether some registered adapter (or a candidate) is served under `servedAs` on the engines. */
  isServed(servedAs: string): boolean {
    for (const a of this.byName.values()) if (a.servedAs === servedAs) return true;
    for (const c of this.candidates.values()) if (c.spec.servedAs === servedAs) return true;
    return false;
  }

  /** A version no longer served under `servedAs` (at most 10,000 remembered, the oldest forgotten first). */
  retire(servedAs: string): void {
    this.retiredNames.delete(servedAs);
    this.retiredNames.add(servedAs);
    if (this.retiredNames.size > 10_000) this.retiredNames.delete(this.retiredNames.values().next().value as string);
  }

  /** Whether `servedAs` names a version retired and not served since (a request still holding it unloads it after itself). */
  isRetired(servedAs: string): boolean {
    return this.retiredNames.has(servedAs) && !this.isServed(servedAs);
  }

  /** Put a candidate beside adapter `name` at a share (undefined: none; its requests all go to the registered one). */
  setCandidate(name: string, c: AdapterCandidate | undefined): void {
    if (c === undefined) {
      this.candidates.delete(name);
      return;
    }
    const a = this.byName.get(name);
    if (a === undefined) throw new NotFoundError('adapter_not_found', `no adapter ${name} is registered`);
    if (c.spec.name !== name || c.spec.model !== a.model || c.spec.servedAs === a.servedAs)
      throw new BadRequestError('invalid_body', `a candidate of ${name} is the same adapter of ${a.model}, served under another name`);
    this.candidates.set(name, c);
  }

  candidate(name: string): AdapterCandidate | undefined {
    return this.candidates.get(name);
  }

  /**
   * The version of adapter `a` one request gets: the candidate for its share of the requests, by the
   * request's sticky key (the same user on the same side; `u` drawn when it has none), else `a`.
   */
  variant(a: AdapterSpec, key: string | undefined, rand: () => number): AdapterSpec {
    if (this.candidates.size === 0) return a;
    const c = this.candidates.get(a.name);
    if (c === undefined || c.share <= 0) return a;
    const u = key === undefined ? rand() : stickyPoint(c.salt, key);
    return u < c.share ? c.spec : a;
  }

  list(): AdapterSpec[] {
    return [...this.byName.values()];
  }

  /** Replace `model`'s adapters; a name taken by a model or another model's adapter changes nothing and says so. */
  set(model: string, specs: readonly AdapterSpec[], models: ReadonlySet<string>): void {
    const names = new Set<string>();
    for (const a of specs) {
      if (models.has(a.name)) throw new ConflictError('adapter_name_taken', `adapter ${a.name}: a model has that name`);
      const other = this.byName.get(a.name);
      if (other !== undefined && other.model !== model) throw new ConflictError('adapter_name_taken', `adapter ${a.name} is registered for ${other.model}`);
      if (names.has(a.name)) throw new ConflictError('adapter_name_taken', `adapter ${a.name} is listed twice`);
      // one name on the engines: another adapter's version may be loaded under it
      for (const o of [...this.byName.values(), ...[...this.candidates.values()].map((c) => c.spec)])
        if (o.name !== a.name && (o.servedAs === a.name || o.servedAs === a.servedAs))
          throw new ConflictError('adapter_name_taken', `adapter ${a.name}: ${o.servedAs} is the name a version of ${o.name} is loaded under`);
      names.add(a.name);
    }
    for (const [n, a] of this.byName) if (a.model === model) this.byName.delete(n);
    for (const a of specs) this.byName.set(a.name, { ...a, model });
    // a candidate whose adapter is gone (or now served under its name) goes with it
    for (const [n, c] of this.candidates) {
      const a = this.byName.get(n);
      if (a === undefined || a.servedAs === c.spec.servedAs) this.candidates.delete(n);
    }
  }
}

/** A request for an adapter version its worker is unloading: retryable, on another worker. */
function unloading(w: AdapterHost, a: AdapterSpec): UnavailableError {
  return new UnavailableError('adapter_load_failed', `worker ${w.id} is unloading a version of ${a.name}`, { retryAfterS: 1 });
}
