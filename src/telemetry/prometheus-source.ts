// Prometheus as the controllers' metric source (`metrics_source: { kind: prometheus }`,
// docs/cluster.md): what the gateways export per (model, version) — request counts, version errors,
// the TTFT / TPOT / duration histograms, completion tokens — read over a time window and summed over
// every replica Prometheus scrapes, so a canary is judged on all the fleet's traffic, not one
// replica's share.
//
// A window is two instant queries, at its start and at its end, of the raw cumulative series (one
// regex on __name__ reads them all); the increase of each series is end - start, or end where the
// series restarted (a replica's counter reset) or was born inside the window. No rate() or
// increase(): their extrapolation to the window's edges gives fractional counts, and a series that
// appears inside the range loses its first samples. The price: the counts at each end are those of
// the last scrape before it (the window's edges are as sharp as the scrape interval).
import type { PrometheusSourceConfig } from '../config/types.js';
import { GlidepathError } from '../errors.js';
import { PromClient } from './prometheus.js';
import type { PromSample } from './prometheus.js';

/** A histogram's observations in a window: bucket upper bounds (ascending, `Infinity` last) and how many fell in each (not cumulative). */
export interface Binned {
  readonly bounds: readonly number[];
  readonly counts: readonly number[];
}

/** One version's traffic over a window, summed over every replica scraped. */
export interface VersionReading {
  /** Requests finished, client errors (4xx, 499) left out, as the local samples count them. */
  requests: number;
  /** Requests that failed by the version's fault (glidepath_version_errors_total). */
  errors: number;
  /** Seconds. */
  ttft: Binned;
  tpot: Binned;
  latency: Binned;
  /** Summed request durations (s): the serving time behind `outputTokens`. */
  busyS: number;
  outputTokens: number;
  /** Distinct scrape targets (`instance`) that reported the version. */
  replicas: number;
}

/** A source of per-version series other than this process's windows. */
export interface RemoteMetrics {
  /** Where it reads, for messages. */
  readonly where: string;
  /** The monitor's window (ms). */
  readonly monitorWindowMs: number;
  /** Each of `versions`' traffic between `fromMs` and `toMs` (at most the configured max_window_ms back). */
  read(model: string, versions: readonly string[], fromMs: number, toMs: number): Promise<Map<string, VersionReading>>;
  /**
   * Completion tokens each engine generated between `fromMs` and `toMs`, by scrape target (`host:port`
   * of the worker's URL), from its own `vllm:generation_tokens_total`; targets without the series are absent.
   */
  engineTokens(instances: readonly string[], fromMs: number, toMs: number): Promise<Map<string, number>>;
}

const FAMILIES = {
  requests: 'glidepath_requests_total',
  errors: 'glidepath_version_errors_total',
  ttft: 'glidepath_time_to_first_token_seconds_bucket',
  tpot: 'glidepath_time_per_output_token_seconds_bucket',
  latency: 'glidepath_request_duration_seconds_bucket',
  busy: 'glidepath_request_duration_seconds_sum',
  tokens: 'glidepath_tokens_total',
} as const;

const NAME_REGEX = `glidepath_(${Object.values(FAMILIES)
  .map((n) => n.slice('glidepath_'.length))
  .join('|')})`;

/** A PromQL string literal (Go's escapes are JSON's for these characters). */
const promString = (s: string): string => JSON.stringify(s);
const regexEscape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The selector of every series a window reads for `model`'s `versions`. */
export function windowSelector(model: string, versions: readonly string[], labels: Readonly<Record<string, string>>): string {
  const matchers = [
    `__name__=~${promString(NAME_REGEX)}`,
    `model=${promString(model)}`,
    `version=~${promString(versions.map(regexEscape).join('|'))}`,
    ...Object.entries(labels).map(([k, v]) => `${k}=${promString(v)}`),
  ];
  return `{${matchers.join(',')}}`;
}

const seriesKey = (l: Readonly<Record<string, string>>): string =>
  Object.keys(l)
    .sort()
    .map((k) => `${k}\u0000${l[k]}`)
    .join('\u0001');

/** Each series' increase between two instant vectors of the same selector (a reset or a series born inside: its end value). */
export function increases(start: readonly PromSample[], end: readonly PromSample[]): PromSample[] {
  const before = new Map(start.map((s) => [seriesKey(s.labels), s.value]));
  const out: PromSample[] = [];
  for (const s of end) {
    if (!Number.isFinite(s.value)) continue;
    const b = before.get(seriesKey(s.labels));
    out.push({ labels: s.labels, value: b === undefined || !Number.isFinite(b) || s.value < b ? s.value : s.value - b });
  }
  return out;
}

const leOf = (v: string | undefined): number => (v === '+Inf' ? Infinity : Number(v));

/** Cumulative `le` buckets (summed over series) to per-bucket counts; a count that would go negative (replicas with different buckets) is 0. */
export function binned(cumulative: ReadonlyMap<number, number>): Binned {
  const bounds = [...cumulative.keys()].filter((b) => !Number.isNaN(b)).sort((x, y) => x - y);
  const counts: number[] = [];
  let prev = 0;
  for (const b of bounds) {
    const c = cumulative.get(b) ?? 0;
    counts.push(Math.max(0, c - prev));
    prev = Math.max(prev, c);
  }
  return { bounds, counts };
}

/** The increases of one window, sorted into each version's reading. */
export function readings(versions: readonly string[], inc: readonly PromSample[]): Map<string, VersionReading> {
  const acc = new Map<
    string,
    { r: VersionReading; ttft: Map<number, number>; tpot: Map<number, number>; latency: Map<number, number>; instances: Set<string> }
  >();
  for (const v of versions) {
    const empty = { bounds: [], counts: [] };
    acc.set(v, {
      r: { requests: 0, errors: 0, ttft: empty, tpot: empty, latency: empty, busyS: 0, outputTokens: 0, replicas: 0 },
      ttft: new Map(),
      tpot: new Map(),
      latency: new Map(),
      instances: new Set(),
    });
  }
  const addLe = (m: Map<number, number>, le: string | undefined, v: number) => {
    const b = leOf(le);
    m.set(b, (m.get(b) ?? 0) + v);
  };
  for (const { labels: l, value } of inc) {
    const a = acc.get(l.version ?? '');
    if (a === undefined) continue;
    a.instances.add(l.instance ?? '');
    switch (l.__name__) {
      case FAMILIES.requests: {
        const code = Number(l.code);
        // client errors and hang-ups are not the version's (telemetry/record.ts isVersionError)
        if (!(code >= 400 && code < 500)) a.r.requests += value;
        break;
      }
      case FAMILIES.errors:
        a.r.errors += value;
        break;
      case FAMILIES.ttft:
        addLe(a.ttft, l.le, value);
        break;
      case FAMILIES.tpot:
        addLe(a.tpot, l.le, value);
        break;
      case FAMILIES.latency:
        addLe(a.latency, l.le, value);
        break;
      case FAMILIES.busy:
        a.r.busyS += value;
        break;
      case FAMILIES.tokens:
        if (l.kind === 'completion') a.r.outputTokens += value;
        break;
    }
  }
  const out = new Map<string, VersionReading>();
  for (const [v, a] of acc) {
    out.set(v, { ...a.r, ttft: binned(a.ttft), tpot: binned(a.tpot), latency: binned(a.latency), replicas: a.instances.size });
  }
  return out;
}

/** Several readings as one (a model's versions together): counts added, histograms bucket by bucket. */
export function mergeReadings(rs: readonly VersionReading[]): VersionReading {
  const hist = (pick: (r: VersionReading) => Binned): Binned => {
    const cum = new Map<number, number>();
    for (const r of rs) {
      let acc = 0;
      const h = pick(r);
      h.bounds.forEach((b, i) => cum.set(b, (cum.get(b) ?? 0) + (acc += h.counts[i] ?? 0)));
    }
    return binned(cum);
  };
  const sum = (pick: (r: VersionReading) => number): number => rs.reduce((a, r) => a + pick(r), 0);
  return {
    requests: sum((r) => r.requests),
    errors: sum((r) => r.errors),
    ttft: hist((r) => r.ttft),
    tpot: hist((r) => r.tpot),
    latency: hist((r) => r.latency),
    busyS: sum((r) => r.busyS),
    outputTokens: sum((r) => r.outputTokens),
    replicas: Math.max(0, ...rs.map((r) => r.replicas)),
  };
}

/** The Authorization header of a config: a bearer token or basic credentials, read from the environment at each query. */
function authorization(cfg: PrometheusSourceConfig, env: NodeJS.ProcessEnv): (() => string | undefined) | undefined {
  const need = (name: string): string => {
    const v = env[name];
    if (v === undefined || v === '') throw new GlidepathError('metrics_source_error', `environment variable ${name} (metrics_source) is not set`);
    return v;
  };
  if (cfg.bearerTokenEnv !== undefined) {
    const name = cfg.bearerTokenEnv;
    return () => `Bearer ${need(name)}`;
  }
  const basic = cfg.basicAuth;
  if (basic !== undefined) return () => `Basic ${Buffer.from(`${basic.username}:${need(basic.passwordEnv)}`).toString('base64')}`;
  return undefined;
}

export class PrometheusSource implements RemoteMetrics {
  private readonly client: PromClient;
  readonly monitorWindowMs: number;

  constructor(
    private readonly cfg: PrometheusSourceConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.client = new PromClient({ url: cfg.url, timeoutMs: cfg.timeoutMs, maxResponseBytes: cfg.maxResponseBytes, authorization: authorization(cfg, env) });
    this.monitorWindowMs = cfg.monitorWindowMs;
  }

  get where(): string {
    return `Prometheus at ${this.cfg.url}`;
  }

  async read(model: string, versions: readonly string[], fromMs: number, toMs: number): Promise<Map<string, VersionReading>> {
    const q = windowSelector(model, versions, this.cfg.labels);
    const from = Math.max(fromMs, toMs - this.cfg.maxWindowMs);
    const [start, end] = await Promise.all([this.client.instant(q, from), this.client.instant(q, toMs)]);
    return readings(versions, increases(start, end));
  }

  async engineTokens(instances: readonly string[], fromMs: number, toMs: number): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (instances.length === 0) return out;
    const q = `{__name__="vllm:generation_tokens_total",instance=~${promString(instances.map(regexEscape).join('|'))}}`;
    const from = Math.max(fromMs, toMs - this.cfg.maxWindowMs);
    const [start, end] = await Promise.all([this.client.instant(q, from), this.client.instant(q, toMs)]);
    for (const { labels, value } of increases(start, end)) {
      const i = labels.instance ?? '';
      out.set(i, (out.get(i) ?? 0) + value);
    }
    return out;
  }
}
