// What the pipeline runner reads from the admin API: trigger stats per scope (active, canary,
// stable) from GET /status, and the `wait_for` conditions (on versions, health, the canary and the
// rolling update). The API sits behind a one-method seam.
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

export interface RollingJson {
  from: string;
  to: string;
  phase: string;
  /** back: going to `from` again (an abort, a rollback); the roles' `ready` are then `from`'s. */
  direction?: string;
  step?: number;
  paused_reason?: string | null;
  rollback_reason?: string | null;
  message?: string | null;
  roles?: Record<string, { desired: number; ready: number; old: number }>;
  weights?: Record<string, number>;
}

/** Phases that end a canary or a rolling update other than by succeeding (the two name them alike). */
const ENDED_BADLY = ['rolled_back', 'aborted', 'failed'];

/** What the conditions on a canary or a rolling update read of its view, in the same words for both. */
interface Reading {
  /** The version it moves to. */
  target: string;
  phase: string;
  /** Where it is, after "is paused" / "is progressing": `at 25%`. */
  at: string;
  /** More about an ongoing one, after `at`. */
  progress: string;
  pausedReason: string | null | undefined;
  /** Why it ended, when it ended other than by succeeding. */
  endReason: string | null | undefined;
}

interface RolloutKind<T> {
  /** `canary of v2`, `rolling update to v2`. */
  noun: string;
  prep: string;
  path(model: string): string;
  /** What a human does about a paused one. */
  hint: string;
  read(v: T): Reading;
}

const CANARY: RolloutKind<CanaryJson> = {
  noun: 'canary',
  prep: 'of',
  path: (model) => `/models/${enc(model)}/canary`,
  hint: 'canary resume|promote|abort',
  read: (c) => ({
    target: c.canary,
    phase: c.phase,
    at: `at ${c.percent ?? '?'}%`,
    progress: ` (stage ${(c.stage_index ?? 0) + 1}/${c.stages?.length ?? '?'})`,
    pausedReason: c.paused_reason,
    endReason: c.rollback?.reason ?? c.message,
  }),
};

/** `at step 3 (2/4 v2 worker(s) ready, 2 v1 serving)`, summed over the roles, in the way it goes now. */
function rollingAt(r: RollingJson): string {
  const roles = Object.values(r.roles ?? {});
  if (roles.length === 0) return `at step ${r.step ?? '?'}`;
  const [coming, going] = r.direction === 'back' ? [r.from, r.to] : [r.to, r.from];
  const sum = (k: 'desired' | 'ready' | 'old') => roles.reduce((n, x) => n + x[k], 0);
  return `at step ${r.step ?? '?'} (${sum('ready')}/${sum('desired')} ${coming} worker(s) ready, ${sum('old')} ${going} serving)`;
}

const ROLLING: RolloutKind<RollingJson> = {
  noun: 'rolling update',
  prep: 'to',
  path: (model) => `/models/${enc(model)}/rolling`,
  hint: 'rollout resume|abort',
  read: (r) => {
    const share = r.weights?.[r.to];
    const back = r.phase === 'rolling_back' && r.rollback_reason ? `; going back: ${r.rollback_reason}` : '';
    return {
      target: r.to,
      phase: r.phase,
      at: rollingAt(r),
      progress: `${share === undefined ? '' : `; ${r.to} has ${Math.round(share * 1000) / 10}% of traffic`}${back}`,
      pausedReason: r.paused_reason,
      endReason: r.rollback_reason ?? r.message,
    };
  },
};

/**
 * canary_succeeded / rollout_done and rolling_succeeded / rolling_done: the model's running or
 * last canary or rolling update, of `version` when given. `mustSucceed`: an end other than
 * `succeeded` fails the step; else any end passes.
 */
async function pollRollout<T>(api: AdminApi, model: string, kind: RolloutKind<T>, mustSucceed: boolean, version: string | undefined): Promise<Poll> {
  let view: T;
  try {
    view = await api.get<T>(kind.path(model));
  } catch (err) {
    if (httpStatus(err) === 404) return { state: 'waiting', detail: `${model} has no ${kind.noun} yet` };
    throw err;
  }
  const r = kind.read(view);
  // the last one may be an older one: only the target version's counts
  if (version !== undefined && r.target !== version)
    return { state: 'waiting', detail: `the last ${kind.noun} of ${model} is ${kind.prep} ${r.target}, not ${version}` };
  const name = `${kind.noun} ${kind.prep} ${r.target}`;
  if (r.phase === 'succeeded') return { state: 'done', detail: `${name} succeeded` };
  if (ENDED_BADLY.includes(r.phase)) {
    const detail = `${name} ended ${r.phase}${r.endReason ? `: ${r.endReason}` : ''}`;
    return mustSucceed ? { state: 'failed', detail } : { state: 'done', detail };
  }
  if (r.phase === 'paused')
    return { state: 'waiting', detail: `${name} is paused ${r.at}${r.pausedReason ? `: ${r.pausedReason}` : ''} (waiting for a human: ${kind.hint})` };
  return { state: 'waiting', detail: `${name} is ${r.phase} ${r.at}${r.progress}` };
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
  if (cond === 'canary_succeeded' || cond === 'rollout_done') return pollRollout(api, model, CANARY, cond === 'canary_succeeded', version);
  if (cond === 'rolling_succeeded' || cond === 'rolling_done') return pollRollout(api, model, ROLLING, cond === 'rolling_succeeded', version);
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
