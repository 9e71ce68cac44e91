// A model's capacity in completion tokens/s: the healthy workers of the versions its route sends
// traffic to, each worth its health weight × its throughput — measured from its engine's metrics every
// few seconds where the engine exports them, the configured worth until then (docs/resilience.md).
import { DEFAULTS } from '../defaults.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import type { RouteSnapshot } from '../domain/route.js';
import { EngineLoad, scrape } from './engine-load.js';
import type { VersionPool, Worker } from './pool.js';

/** The model as its capacity sees it: its route and its versions' pools (the data plane's ModelState). */
export interface AdmittedModel {
  readonly name: string;
  readonly route: RouteSnapshot;
  readonly pools: ReadonlyMap<string, VersionPool>;
}

export interface CapacitySettings {
  /** What a healthy worker is worth (tokens/s) until its engine's metrics say otherwise. */
  readonly workerTokensPerS: number;
  /** How often the engines' metrics are read (ms); 0: never, the configured worth only. */
  readonly measureIntervalMs: number;
}

/** One routed worker's part of the capacity (the admin API's view). */
export interface WorkerCapacity {
  version: string;
  worker: string;
  weight: number;
  /** What it is worth now: measured, or the configured worth. */
  capacityTokensPerS: number;
  measured: boolean;
  load: EngineLoad | undefined;
}

export class Capacity {
  private readonly loads = new WeakMap<Worker, EngineLoad>();
  private timer: NodeJS.Timeout | undefined;
  private measuring = false;
  private closed = false;
  /** The `glidepath_worker_capacity_tokens_per_s` series last set: `version\0worker` → its labels. */
  private series = new Map<string, [string, string]>();

  constructor(
    private readonly m: AdmittedModel,
    private readonly s: CapacitySettings,
    private readonly metrics: GatewayMetrics,
    /** Told after every round of measurements. */
    private readonly measured: () => void,
  ) {
    if (s.measureIntervalMs > 0) {
      this.timer = setInterval(() => void this.measure(), s.measureIntervalMs);
      this.timer.unref();
    }
  }

  /** The routed workers that count (routable, with a health weight, of a version with a weight in the route). */
  private *routed(): Generator<[VersionPool, Worker]> {
    for (const v of this.m.route.versions) {
      if (v.weight <= 0) continue;
      const pool = this.m.pools.get(v.id);
      if (pool !== undefined) for (const w of pool.candidates) yield [pool, w];
    }
  }

  /** Tokens/s the model serves at most now: Σ over routed workers of min(1, health weight) × worth. */
  total(): number {
    let n = 0;
    for (const [, w] of this.routed()) n += Math.min(1, w.weight) * this.worth(w);
    return n;
  }

  private worth(w: Worker): number {
    return this.loads.get(w)?.capacity ?? this.s.workerTokensPerS;
  }

  /** Each routed worker's part, for the admin API. */
  workers(): WorkerCapacity[] {
    return [...this.routed()].map(([p, w]) => {
      const load = this.loads.get(w);
      const measured = load !== undefined && load.error === undefined && load.at > 0;
      return { version: p.version, worker: w.id, weight: Math.min(1, w.weight), capacityTokensPerS: this.worth(w), measured, load };
    });
  }

  /** Read every routed worker's engine metrics once (a round still running is not doubled), then tell. */
  async measure(): Promise<void> {
    if (this.measuring) return;
    this.measuring = true;
    try {
      const timeoutMs = Math.min(DEFAULTS.gateway.capacityScrapeTimeoutMs, this.s.measureIntervalMs || Infinity);
      const rounds: Promise<void>[] = [];
      for (const [pool, w] of this.routed()) {
        let load = this.loads.get(w);
        if (load === undefined) this.loads.set(w, (load = new EngineLoad(this.s.workerTokensPerS)));
        const l = load;
        const url = `${w.upstream.origin}${w.upstream.pathPrefix}/metrics`;
        rounds.push(
          scrape(url, timeoutMs).then(
            // every slot the gateway gives it in use: full too (not merely lower tiers held back by a level's share)
            (sample) => l.observe(sample, Date.now(), pool.maxNumSeqs, w.upstream.busy >= w.upstream.limit),
            (err: unknown) => l.failed(Date.now(), (err as Error).message),
          ),
        );
      }
      await Promise.all(rounds);
    } finally {
      this.measuring = false;
    }
    // a round that ends after close (the model's admission replaced) tells nobody
    if (this.closed) return;
    this.publish();
    this.measured();
  }

  /** Each routed worker's worth as a gauge; the series of workers no longer routed go. */
  private publish(): void {
    const g = this.metrics.workerCapacity;
    const now = new Map<string, [string, string]>();
    for (const [pool, w] of this.routed()) {
      now.set(`${pool.version}\0${w.id}`, [pool.version, w.id]);
      g.labels(this.m.name, pool.version, w.id).set(this.worth(w));
    }
    for (const [k, [v, id]] of this.series) if (!now.has(k)) g.remove(this.m.name, v, id);
    this.series = now;
  }

  close(): void {
    this.closed = true;
    for (const [v, id] of this.series.values()) this.metrics.workerCapacity.remove(this.m.name, v, id);
    this.series.clear();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
