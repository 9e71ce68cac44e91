// The LoRA adapter prefetcher (docs/multi-model.md): recent demand per registered adapter (counts that
// decay with a half-life) and, every interval, each model's top-k adapters loaded onto enough workers
// of its active version ahead of their requests, through AdapterSlots' own load path.
import { performance } from 'node:perf_hooks';
import type { AdapterPrefetchConfig } from '../config/types.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import type { AdapterIndex, AdapterLoader, AdapterSpec } from './adapters.js';
import type { ModelState } from './model-state.js';
import type { VersionPool } from './pool.js';

/** A count that decayed below this is forgotten (an adapter asked for once falls under it after ~7 half-lives). */
const FORGET_BELOW = 0.01;
const EMPTY: ReadonlySet<string> = new Set();

/**
 * Recent requests per adapter: each count halves every `halfLifeMs`. Only adapters the registry knows
 * are counted, and those it no longer knows are dropped at the next read: memory is bounded by the
 * registry, whatever names clients send.
 */
export class AdapterDemand {
  private readonly counts = new Map<string, { n: number; at: number }>();

  constructor(
    private readonly halfLifeMs: number,
    private readonly registered: (name: string) => boolean,
  ) {}

  get size(): number {
    return this.counts.size;
  }

  record(name: string, now: number): void {
    const c = this.counts.get(name);
    if (c !== undefined) {
      c.n = c.n * this.decay(now - c.at) + 1;
      // (never back: a caller's time may come a little before the last one's)
      c.at = Math.max(c.at, now);
    } else if (this.registered(name)) this.counts.set(name, { n: 1, at: now });
  }

  /** Each adapter's demand at `now` (requests, decayed); forgotten and unregistered ones are dropped. */
  scores(now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, c] of this.counts) {
      const n = c.n * this.decay(now - c.at);
      if (n < FORGET_BELOW || !this.registered(name)) this.counts.delete(name);
      else out.set(name, n);
    }
    return out;
  }

  private decay(ms: number): number {
    return ms <= 0 ? 1 : Math.pow(2, -ms / this.halfLifeMs);
  }
}

/** What the plan needs of a worker: its id, its requests in flight, its adapters least recently used first. */
export interface PrefetchWorker {
  readonly id: string;
  readonly outstanding: number;
  readonly slots: readonly { readonly name: string; readonly loaded: boolean; readonly inUse: number }[];
}

/** One load the prefetcher asks for: `adapter` onto `worker`, over `evicts` (undefined: a free slot). */
export interface PrefetchLoad {
  worker: string;
  adapter: string;
  evicts: string | undefined;
}

/**
 * Which loads bring a model's top-k adapters onto enough of its workers (`max` LoRA slots each):
 * the top `topK` by demand; each on ceil(its share of the model's demand × workers) workers, at least
 * one (a share of the demand is about that many workers' worth of requests when they are busy).
 * A worker takes one into a free slot or over its least recently used adapter that no request uses
 * and that is not in the top-k (one of them never makes room for another: no thrashing); free slots
 * first, then the workers holding the fewest top-k adapters (affinity sends each one's requests to its
 * holders: they spread), then the least busy; and holds at most `max - 1` top-k adapters (one slot is
 * left for the requests of the others). Pure: the order of `demand` and of `workers` does not matter.
 */
export function planPrefetch(
  demand: ReadonlyMap<string, number>,
  workers: readonly PrefetchWorker[],
  max: number,
  topK: number,
): { top: string[]; loads: PrefetchLoad[] } {
  let total = 0;
  for (const n of demand.values()) total += n;
  const top = [...demand]
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, topK)
    .map(([name]) => name);
  const keep = new Set(top);
  const state = [...workers]
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((w) => ({
      id: w.id,
      outstanding: w.outstanding,
      has: new Set(w.slots.map((s) => s.name)),
      // what a prefetch may evict, least recently used first
      evictable: w.slots.filter((s) => s.loaded && s.inUse === 0 && !keep.has(s.name)).map((s) => s.name),
      size: w.slots.length,
      topHeld: w.slots.filter((s) => keep.has(s.name)).length,
    }));
  const loads: PrefetchLoad[] = [];
  for (const name of top) {
    const want = Math.min(state.length, Math.max(1, Math.ceil(((demand.get(name) as number) / total) * state.length)));
    let need = want - state.filter((w) => w.has.has(name)).length;
    if (need <= 0) continue;
    const room = state
      .filter((w) => !w.has.has(name) && w.topHeld < max - 1 && (w.size < max || w.evictable.length > 0))
      .sort((a, b) => Number(b.size < max) - Number(a.size < max) || a.topHeld - b.topHeld || a.outstanding - b.outstanding);
    for (const w of room) {
      if (need-- <= 0) break;
      const evicts = w.size < max ? undefined : w.evictable.shift();
      if (evicts === undefined) w.size++;
      else w.has.delete(evicts);
      w.has.add(name);
      w.topHeld++;
      loads.push({ worker: w.id, adapter: name, evicts });
    }
  }
  return { top, loads };
}

/** A failing prefetch load waits at most interval × 2^6 (64 rounds) before it is tried again. */
const FAILED_MAX_DOUBLINGS = 6;

/** The prefetcher: demand recorded by the request path (entry.ts), a plan per model every interval. */
export class AdapterPrefetcher {
  readonly demand: AdapterDemand;
  private timer: NodeJS.Timeout | undefined;
  /** Each model's top-k at the last round: a request's load evicts one of them only when nothing else can go. */
  private readonly keep = new Map<string, ReadonlySet<string>>();
  /** `worker\0adapter` → a prefetch load that failed: not tried again there before `until` (mono), the wait doubling each time. */
  private readonly failed = new Map<string, { until: number; n: number }>();

  constructor(
    readonly cfg: AdapterPrefetchConfig,
    private readonly models: ReadonlyMap<string, ModelState>,
    private readonly index: AdapterIndex,
    private readonly loader: AdapterLoader | undefined,
    private readonly metrics: GatewayMetrics,
  ) {
    this.demand = new AdapterDemand(cfg.halfLifeMs, (n) => index.get(n) !== undefined);
  }

  /**
   * A request for a registered adapter (counted only while the prefetcher is on). `now` is monotonic
   * (performance.now(), as `round`'s `mono`): a wall clock stepped back would stop the counts' decay.
   */
  requested(name: string, now: number): void {
    if (this.cfg.enabled) this.demand.record(name, now);
  }

  /** The adapters a request's load should not evict while another can go (the model's top-k). */
  keepFor(model: string): ReadonlySet<string> {
    return this.keep.get(model) ?? EMPTY;
  }

  /** Rounds every interval, on a timer that never keeps the process alive; off when disabled or nothing loads adapters. */
  start(): void {
    if (!this.cfg.enabled || this.loader === undefined || this.timer !== undefined) return;
    this.timer = setInterval(() => this.round(Date.now(), performance.now()), this.cfg.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * One round: for each model with demand, the routable workers of each version its route sends
   * requests to (the stable one, a canary's too), when its engine has LoRA slots and it is not
   * prefill/decode; the loads of planPrefetch started there, per version.
   * Returns the loads asked for, and when they are all settled. `now` is the wall clock (workers'
   * ejections are in it), `mono` the demand's monotonic one. A model whose requests are held (a
   * drain-first swap, a time-shared model asleep) gets nothing: its workers are about to change.
   */
  round(now: number, mono: number): { loads: PrefetchLoad[]; settled: Promise<void> } {
    const started: PrefetchLoad[] = [];
    const pending: Promise<void>[] = [];
    const loader = this.loader;
    if (loader === undefined) return { loads: started, settled: Promise.resolve() };
    const scores = this.demand.scores(mono);
    // planned by the names the engines have them loaded under (a promoted canary's `<name>--<version>`)
    const byModel = new Map<string, Map<string, number>>();
    const specs = new Map<string, AdapterSpec>();
    for (const [name, n] of scores) {
      const a = this.index.get(name);
      if (a === undefined) continue;
      let m = byModel.get(a.model);
      if (m === undefined) byModel.set(a.model, (m = new Map<string, number>()));
      m.set(a.servedAs, n);
      specs.set(a.servedAs, a);
    }
    for (const [model, st] of this.models) {
      const demand = byModel.get(model);
      // every version the route sends requests to (a canary's too: its share of the adapters' requests hit there as well)
      const pools =
        demand === undefined || st.hold !== undefined
          ? []
          : st.route.versions
              .filter((v) => v.weight > 0)
              .map((v) => st.pools.get(v.id))
              .filter((p): p is VersionPool => p !== undefined && !p.draining && !p.disaggregated && p.maxLoras > 0);
      if (demand === undefined || pools.length === 0) {
        this.keep.delete(model);
        continue;
      }
      for (const pool of pools) this.plan(model, pool, demand, specs, loader, now, mono, started, pending);
    }
    // bounded: a failure whose wait is over is forgotten (one tried again this round is written again
    // as it settles, its count kept), as is one of an adapter no longer registered
    for (const [key, f] of this.failed) if (f.until <= mono || !this.index.isServed(key.slice(key.indexOf('\0') + 1))) this.failed.delete(key);
    return { loads: started, settled: Promise.all(pending).then(() => undefined) };
  }

  /** One routed version's loads (planPrefetch over its routable workers), started; the model's top-k kept. */
  private plan(
    model: string,
    pool: VersionPool,
    demand: ReadonlyMap<string, number>,
    specs: ReadonlyMap<string, AdapterSpec>,
    loader: AdapterLoader,
    now: number,
    mono: number,
    started: PrefetchLoad[],
    pending: Promise<void>[],
  ): void {
    const workers = pool.candidates.filter((w) => w.ejectedUntil <= now);
    const plan = planPrefetch(
      demand,
      workers.map((w) => ({ id: w.id, outstanding: w.outstanding, slots: w.adapters.loaded() })),
      pool.maxLoras,
      this.cfg.topK,
    );
    const keep = new Set(plan.top);
    this.keep.set(model, keep);
    for (const l of plan.loads) {
      const w = workers.find((x) => x.id === l.worker);
      const spec = specs.get(l.adapter);
      const key = `${l.worker}\0${l.adapter}`;
      const f = this.failed.get(key);
      // a load that keeps failing (a broken source) is not asked of the engine every round
      if (f !== undefined && mono < f.until) continue;
      const p = w === undefined || spec === undefined ? undefined : w.adapters.prefetch(w, spec, pool.maxLoras, loader, this.metrics, keep);
      if (p === undefined) continue;
      started.push(l);
      pending.push(
        p.then((ok) => {
          if (ok) this.failed.delete(key);
          else {
            const n = (f?.n ?? 0) + 1;
            this.failed.set(key, { n, until: mono + this.cfg.intervalMs * 2 ** Math.min(n, FAILED_MAX_DOUBLINGS) });
          }
        }),
      );
    }
  }
}
