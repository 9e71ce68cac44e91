// What the dashboard charts over time: once a second, each model's route weights and each routed or
// loaded version's live window (request and error rate, TTFT and TPOT p50/p99), kept in a bounded
// ring per model and pushed to subscribers (the SSE stream of routes/series.ts) — while someone
// watches, and for as long as the ring covers after (so a page opened again finds its history). Also a canary's two
// latency distributions as ECDFs on a shared grid, for the evidence view.
import type { ControlPlane } from '../control/plane.js';
import { DEFAULTS } from '../defaults.js';
import type { WindowStats } from '../telemetry/window.js';

/** One version's numbers at one sample; null where the window had nothing to say. */
export interface VersionPointView {
  requests: number;
  rps: number;
  error_rate: number | null;
  ttft_p50: number | null;
  ttft_p99: number | null;
  tpot_p50: number | null;
  tpot_p99: number | null;
}

export interface SeriesPointView {
  at: number;
  revision: number;
  /** The route's weights, keyed by version id. */
  weights: Record<string, number>;
  versions: Record<string, VersionPointView>;
}

export interface SeriesView {
  model: string;
  interval_ms: number;
  points: SeriesPointView[];
}

/** One sample of every model, as the stream sends it. */
export interface SeriesSampleView {
  at: number;
  models: Record<string, SeriesPointView>;
}

function fin(x: number): number | null {
  return Number.isFinite(x) ? x : null;
}

function versionPoint(w: WindowStats): VersionPointView {
  return {
    requests: w.requests,
    rps: w.rps,
    error_rate: fin(w.errorRate),
    ttft_p50: fin(w.ttftMs.p50),
    ttft_p99: fin(w.ttftMs.p99),
    tpot_p50: fin(w.tpotMs.p50),
    tpot_p99: fin(w.tpotMs.p99),
  };
}

type Listener = (s: SeriesSampleView) => void;

export class SeriesRecorder {
  private readonly rings = new Map<string, SeriesPointView[]>();
  private readonly listeners = new Set<Listener>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cp: Pick<ControlPlane, 'dp'>,
    readonly intervalMs: number = DEFAULTS.dashboard.seriesIntervalMs,
    private readonly capacity: number = DEFAULTS.dashboard.seriesPoints,
  ) {}

  /** When someone last watched (a stream open, the history read): sampling runs only while someone has, recently. */
  private wantedAt = -Infinity;

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      // nobody watching for as long as the ring covers: no cost at all (a fleet of many models
      // would otherwise compute every window once a second for nothing)
      const now = Date.now();
      if (this.listeners.size > 0) this.wantedAt = now;
      if (now - this.wantedAt <= this.capacity * this.intervalMs) this.sample(now);
    }, this.intervalMs);
    // sampling never keeps the process up
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.listeners.clear();
  }

  /** Take one sample of every model now (the timer calls this; tests call it directly). */
  sample(now: number = Date.now()): SeriesSampleView {
    const models: Record<string, SeriesPointView> = {};
    for (const [name, st] of this.cp.dp.models) {
      const weights = Object.fromEntries(st.route.versions.map((v) => [v.id, v.weight]));
      const ids = new Set([...Object.keys(weights), ...st.pools.keys()]);
      const versions: Record<string, VersionPointView> = {};
      for (const id of ids) versions[id] = versionPoint(this.cp.dp.telemetry.stats(name, id, now));
      const point: SeriesPointView = { at: now, revision: st.route.revision, weights, versions };
      let ring = this.rings.get(name);
      if (ring === undefined) this.rings.set(name, (ring = []));
      ring.push(point);
      if (ring.length > this.capacity) ring.splice(0, ring.length - this.capacity);
      models[name] = point;
    }
    const s: SeriesSampleView = { at: now, models };
    for (const l of this.listeners) l(s);
    return s;
  }

  history(model: string): SeriesView {
    this.wantedAt = Date.now();
    return { model, interval_ms: this.intervalMs, points: [...(this.rings.get(model) ?? [])] };
  }

  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

/** Two samples' empirical CDFs on one grid (uPlot draws series over one x axis). */
export interface EcdfPairView {
  x: number[];
  stable: (number | null)[];
  canary: (number | null)[];
  n_stable: number;
  n_canary: number;
}

function ecdfAt(sorted: Float64Array, x: number): number {
  // the count of values ≤ x, by binary search
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo / sorted.length;
}

/**
 * Both ECDFs at `points` x values evenly spaced from the smallest sample to the largest of both
 * sides. A side without samples is all null (the chart shows a gap, not a made-up curve).
 */
export function ecdfPair(stable: readonly number[], canary: readonly number[], points: number = DEFAULTS.dashboard.distributionPoints): EcdfPairView {
  const a = Float64Array.from(stable.filter(Number.isFinite)).sort();
  const b = Float64Array.from(canary.filter(Number.isFinite)).sort();
  const all = [a[0], a[a.length - 1], b[0], b[b.length - 1]].filter((v): v is number => v !== undefined);
  if (all.length === 0) return { x: [], stable: [], canary: [], n_stable: 0, n_canary: 0 };
  const lo = Math.min(...all);
  const hi = Math.max(...all);
  const n = hi > lo ? Math.max(2, points) : 1;
  const x = Array.from({ length: n }, (_, i) => (n === 1 ? lo : lo + ((hi - lo) * i) / (n - 1)));
  return {
    x,
    stable: x.map((v) => (a.length === 0 ? null : ecdfAt(a, v))),
    canary: x.map((v) => (b.length === 0 ? null : ecdfAt(b, v))),
    n_stable: a.length,
    n_canary: b.length,
  };
}
