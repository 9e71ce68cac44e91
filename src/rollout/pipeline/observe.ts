// What the pipeline runner reads from the admin API: trigger stats per scope (active, canary,
// stable) from GET /status, and the `wait_for` conditions. The API sits behind a one-method seam.
// The bodies are declared here only as far as they are read: the controllers' layer may not import
// src/api/types.ts, and test/unit/pipeline/observe.test.ts checks that those types fit these.
import type { MetricValues, TriggerStats } from './trigger.js';
import type { WaitCondition } from './defaults.js';

/** The part of the admin client the runner needs (the CLI passes its AdminClient). */
export interface AdminApi {
  get<T = unknown>(path: string): Promise<T>;
}

interface Pcts {
  p50?: number | null;
  p99?: number | null;
}
/** A telemetry window as the API renders it (null where there is no data). */
export interface WindowJson {
  requests?: number;
  error_rate?: number | null;
  latency_ms?: Pcts;
  ttft_ms?: Pcts;
  tpot_ms?: Pcts;
}
export interface StatusJson {
  /** The data plane's readiness, and what keeps it from being ready. */
  ready?: { ready: boolean; problems?: string[] };
  models: {
    model: string;
    active: string | null;
    standby?: string | null;
    route?: { stable?: string | null; weights?: Record<string, number> } | null;
    versions: { version: string; status: string; window?: WindowJson }[];
  }[];
}

const enc = encodeURIComponent;

export function metricValues(w: WindowJson | undefined): MetricValues {
  if (!w) return {};
  const requests = w.requests ?? 0;
  return {
    requests,
    // an error rate of 0 out of 0 requests is no data, not a healthy 0
    error_rate: requests > 0 ? (w.error_rate ?? null) : null,
    p99_latency: w.latency_ms?.p99 ?? null,
    p50_latency: w.latency_ms?.p50 ?? null,
    p99_ttft: w.ttft_ms?.p99 ?? null,
    p99_tpot: w.tpot_ms?.p99 ?? null,
  };
}

/** Which versions the scopes mean, and their values. */
export interface Observed {
  versions: Partial<Record<'active' | 'canary' | 'stable', string>>;
  stats: TriggerStats;
}

/**
 * active: the model's active version. stable: the route's stable version (else the active one).
 * canary: the version other than stable with the largest positive route weight.
 */
export function observe(status: StatusJson, model: string): Observed {
  const m = status.models.find((x) => x.model === model);
  if (!m) throw new Error(`the admin API does not know model "${model}" (it serves: ${status.models.map((x) => x.model).join(', ') || 'none'})`);
  const byId = new Map(m.versions.map((v) => [v.version, v]));
  const stable = m.route?.stable ?? m.active ?? undefined;
  const canary = Object.entries(m.route?.weights ?? {})
    .filter(([id, w]) => id !== stable && w > 0)
    .sort((a, b) => b[1] - a[1])[0]?.[0];
  const versions: Observed['versions'] = {};
  const stats: TriggerStats = {};
  for (const [scope, id] of [
    ['active', m.active],
    ['stable', stable],
    ['canary', canary],
  ] as const) {
    if (id === null || id === undefined) continue;
    versions[scope] = id;
    stats[scope] = metricValues(byId.get(id)?.window);
  }
  return { versions, stats };
}

export async function readStats(api: AdminApi, model: string): Promise<Observed> {
  return observe(await api.get<StatusJson>('/status'), model);
}

/** One poll of a wait_for condition: done, keep waiting (with why), or failed for good. */
export type Poll = { state: 'done'; detail: string } | { state: 'waiting'; detail: string } | { state: 'failed'; detail: string };

function httpStatus(err: unknown): number | undefined {
  const s = (err as { status?: unknown }).status;
  return typeof s === 'number' ? s : undefined;
}

export interface VersionJson {
  status: string;
  failure?: { message?: string } | null;
  health?: { state?: string };
}

export interface CanaryJson {
  canary: string;
  phase: string;
  stages?: number[];
  stage_index?: number;
  percent?: number;
  paused_reason?: string | null;
  message?: string | null;
  rollback?: { reason?: string } | null;
}

const CANARY_FAILED = ['rolled_back', 'aborted', 'failed'];

/** canary_succeeded / rollout_done: GET /models/:model/canary (the running or last canary). */
async function pollCanary(api: AdminApi, model: string, cond: 'canary_succeeded' | 'rollout_done', version: string | undefined): Promise<Poll> {
  let c: CanaryJson;
  try {
    c = await api.get<CanaryJson>(`/models/${enc(model)}/canary`);
  } catch (err) {
    if (httpStatus(err) === 404) return { state: 'waiting', detail: `${model} has no canary yet` };
    throw err;
  }
  // the last canary may be an older one: only the target version's counts
  if (version !== undefined && c.canary !== version) return { state: 'waiting', detail: `the last canary of ${model} is of ${c.canary}, not ${version}` };
  const why = c.rollback?.reason ?? c.message ?? undefined;
  if (c.phase === 'succeeded') return { state: 'done', detail: `canary of ${c.canary} succeeded` };
  if (CANARY_FAILED.includes(c.phase)) {
    const detail = `canary of ${c.canary} ended ${c.phase}${why ? `: ${why}` : ''}`;
    return cond === 'rollout_done' ? { state: 'done', detail } : { state: 'failed', detail };
  }
  if (c.phase === 'paused')
    return {
      state: 'waiting',
      detail: `canary of ${c.canary} is paused at ${c.percent ?? '?'}%${c.paused_reason ? `: ${c.paused_reason}` : ''} (waiting for a human: canary resume|promote|abort)`,
    };
  return {
    state: 'waiting',
    detail: `canary of ${c.canary} is ${c.phase} at ${c.percent ?? '?'}% (stage ${(c.stage_index ?? 0) + 1}/${c.stages?.length ?? '?'})`,
  };
}

/** A version's view, or undefined while it is not registered (404). */
async function registeredVersion(api: AdminApi, model: string, version: string): Promise<VersionJson | undefined> {
  try {
    return await api.get<VersionJson>(`/models/${enc(model)}/versions/${enc(version)}`);
  } catch (err) {
    if (httpStatus(err) === 404) return undefined;
    throw err;
  }
}

export async function pollCondition(api: AdminApi, model: string, cond: WaitCondition, version: string | undefined): Promise<Poll> {
  if (cond === 'canary_succeeded' || cond === 'rollout_done') return pollCanary(api, model, cond, version);
  if (cond === 'version_ready') {
    if (version === undefined) return { state: 'failed', detail: 'version_ready needs a version: give the step a version: or set $VERSION' };
    const v = await registeredVersion(api, model, version);
    if (v === undefined) return { state: 'waiting', detail: `${version} is not registered yet` };
    if (['ready', 'active', 'standby'].includes(v.status)) return { state: 'done', detail: `${version} is loaded (${v.status})` };
    if (v.status === 'failed') return { state: 'failed', detail: `${version} failed to load${v.failure?.message ? `: ${v.failure.message}` : ''}` };
    if (v.status === 'retired') return { state: 'failed', detail: `${version} was retired` };
    return { state: 'waiting', detail: `${version} is ${v.status}` };
  }
  if (cond === 'green_ready') {
    if (version === undefined) {
      const st = await api.get<StatusJson>('/status');
      const ready = st.models.find((x) => x.model === model)?.versions.find((v) => v.status === 'ready');
      return ready ? { state: 'done', detail: `${ready.version} is ready` } : { state: 'waiting', detail: `no version of ${model} is ready yet` };
    }
    // the deploy may not have registered it yet
    const v = await registeredVersion(api, model, version);
    if (v === undefined) return { state: 'waiting', detail: `${version} is not registered yet` };
    if (v.status === 'ready') return { state: 'done', detail: `${version} is ready` };
    if (v.status === 'failed') return { state: 'failed', detail: `${version} failed to load${v.failure?.message ? `: ${v.failure.message}` : ''}` };
    if (v.status === 'retired') return { state: 'failed', detail: `${version} was retired` };
    if (v.status === 'active') return { state: 'failed', detail: `${version} is already active (nothing to deploy green)` };
    return { state: 'waiting', detail: `${version} is ${v.status}` };
  }
  const st = await api.get<StatusJson>('/status');
  const m = st.models.find((x) => x.model === model);
  if (!m) return { state: 'failed', detail: `the admin API does not know model "${model}"` };
  if (st.ready?.ready === false) {
    const why = st.ready.problems ?? [];
    return { state: 'waiting', detail: `the gateway is not ready${why.length > 0 ? ` (${why.join('; ')})` : ''}` };
  }
  if (!m.active) return { state: 'waiting', detail: `${model} has no active version` };
  const v = await api.get<VersionJson>(`/models/${enc(model)}/versions/${enc(m.active)}`);
  const h = v.health?.state ?? 'unknown';
  if (h === 'unhealthy' || h === 'degraded') return { state: 'waiting', detail: `${m.active} is ${h}` };
  const workers = await api.get<{ version: string; routable: boolean }[]>(`/workers?model=${enc(model)}`);
  const routable = workers.filter((w) => w.version === m.active && w.routable).length;
  if (routable === 0) return { state: 'waiting', detail: `${m.active} has no routable worker` };
  return { state: 'done', detail: `${m.active} is active with ${routable} routable worker(s), health ${h}` };
}
