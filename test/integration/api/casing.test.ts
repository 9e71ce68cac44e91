// Every admin answer is snake_case (docs/admin-api.md), the rollout results too: the canary (start,
// view, history, events, pause and abort), the experiment (create, status, analyze, stop), the
// telemetry windows (status, a version, the canary), the monitor's last check and the judge's
// counters, the strategy plan, the GPUs, the route (GET and PUT), a cache download, over HTTP from an
// in-process control plane; the `data` of the canary's notification as a webhook received it and of
// the canary's and the cache's control events; and `pipeline run -o json` from the built CLI. No key
// at any depth has an uppercase letter, except the keys of the maps keyed by data (version ids in
// weights, windows, previous_weights; categories in a route's overrides): the versions and the
// category here are named with capitals to show that those keys pass untouched.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type {
  CacheResultView,
  CanaryNoticeView,
  CanaryStartView,
  CanaryView,
  ExperimentAnalysisView,
  GpuEntryView,
  PipelineRunView,
  RouteChangeView,
  RouteView,
  StatusView,
  StrategyPlanView,
} from '../../../src/api/types.js';
import { parseConfig } from '../../../src/config/load.js';
import { startGlidepath } from '../../../src/control/app.js';
import type { App } from '../../../src/control/app.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { CLI, ensureBuilt } from '../../helpers/e2e-up.js';

const STABLE = 'Base-V1';
const CANARY = 'Tuned-V2';
const GREEN = 'Exp-V3';
const CATEGORY = 'Beta-Testers';
/** Maps whose keys are data (version ids; a route's categories), never renamed: only their values are checked. */
const KEYED_BY_DATA = new Set(['weights', 'windows', 'previous_weights', 'overrides']);

/** Paths of the keys with an uppercase letter, at any depth. */
function camelKeys(x: unknown, at = '$'): string[] {
  if (Array.isArray(x)) return (x as unknown[]).flatMap((v, i) => camelKeys(v, `${at}[${i}]`));
  if (x === null || typeof x !== 'object') return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(x as Record<string, unknown>)) {
    const p = `${at}.${k}`;
    if (/[A-Z]/.test(k)) out.push(p);
    if (KEYED_BY_DATA.has(k) && v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [id, w] of Object.entries(v as Record<string, unknown>)) out.push(...camelKeys(w, `${p}[${JSON.stringify(id)}]`));
    } else out.push(...camelKeys(v, p));
  }
  return out;
}

let dir: string;
let worker: Server;
let hook: Server;
let hookUrl: string;
/** What the webhook server received, by path. */
const hooked: { path: string; body: { kind: string; data: unknown } }[] = [];
let app: App;
/** Every body read in the tests, by what it was; checked at the end. */
const bodies = new Map<string, unknown>();

async function listen(s: Server): Promise<string> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** One admin call; the answer is kept for the casing check under `name`. */
async function admin<T>(name: string, method: 'GET' | 'POST' | 'PUT', p: string, body?: unknown): Promise<T> {
  const res = await request(`${app.adminUrl}/admin/v1${p}`, {
    method,
    headers: { authorization: 'Bearer op-token', 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.body.json()) as T;
  expect(res.statusCode, `${method} ${p}: ${JSON.stringify(json)}`).toBe(200);
  bodies.set(name, json);
  return json;
}

/** A served request of `version`: latencies spread so that the statistics have something to test. */
function served(version: string, i: number, at: number): RequestRecord {
  const jitter = (i % 10) * 2;
  return {
    model: 'llama',
    version,
    worker: `llama/${version}/0`,
    status: 200,
    errorCode: undefined,
    stream: true,
    ttftMs: 20 + jitter,
    tpotMs: 5 + jitter / 10,
    itlMs: [],
    latencyMs: 100 + jitter * 3,
    promptTokens: 5,
    completionTokens: 12,
    queueMs: 0,
    at,
    retries: 0,
    shadow: false,
  };
}

function feed(version: string, n: number): void {
  const tel = app.cp.dp.telemetry;
  const vt = tel.forVersion('llama', version);
  const now = Date.now();
  for (let i = 0; i < n; i++) tel.record(vt, served(version, i, now));
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gp-casing-'));
  worker = createServer((req, res) => res.writeHead(req.url === '/health' ? 200 : 404).end('ok'));
  hook = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8').on('data', (c: string) => (raw += c));
    req.on('end', () => {
      hooked.push({ path: req.url ?? '', body: JSON.parse(raw) as { kind: string; data: unknown } });
      res.writeHead(204).end();
    });
  });
  const workerUrl = await listen(worker);
  hookUrl = await listen(hook);
  // real weights to cache (a static provider never reads them)
  mkdirSync(path.join(dir, 'weights'));
  for (const id of [STABLE, CANARY, GREEN]) writeFileSync(path.join(dir, 'weights', `${id}.bin`), `weights of ${id}`);
  const v = (id: string) => ({
    id,
    base_model: 'llama-3-8b',
    weights: path.join(dir, 'weights', `${id}.bin`),
    provider: { kind: 'static', endpoints: [workerUrl] },
    warmup: { requests: 0 },
  });
  const cfg = parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir, 'state') },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    gpus: { count: 4, memory_gb: 80 },
    // one version at most: the second download evicts the first (an `evicted` entry to check)
    cache: { dir: path.join(dir, 'cache'), max_versions: 1 },
    notifications: { webhooks: [`${hookUrl}/notify`] },
    // the control loop's own ticks are far apart: the test takes the canary's looks itself
    control: { tick_ms: 3_600_000 },
    // configured so that its counters are in the canary view; it never gets a sample
    judge: { url: workerUrl, model: 'judge', sample_share: 0 },
    models: [
      {
        name: 'llama',
        monitor: { enabled: true, min_requests: 1_000, interval_ms: 3_600_000 },
        // the stub worker answers /health only: no engine to probe
        health: { enabled: false },
        canary: { stages: [50, 100], stage_duration_ms: 3_600_000, min_samples: 20, ignore_first_requests: 0 },
        versions: [v(STABLE), v(CANARY), v(GREEN)],
        route: { weights: { [STABLE]: 1 } },
      },
    ],
  });
  app = await startGlidepath(cfg);
});

afterAll(async () => {
  await app?.close();
  for (const s of [worker, hook]) {
    s?.closeAllConnections();
    await new Promise((r) => s?.close(r));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the check itself', () => {
  it('finds a camelCase key at any depth, and passes the version ids and categories of the maps keyed by them', () => {
    expect(
      camelKeys({ a: [{ b: { fooBar: 1 } }], weights: { [STABLE]: 1 }, windows: { [STABLE]: { errorRate: 0 } }, overrides: { [CATEGORY]: STABLE } }),
    ).toEqual(['$.a[0].b.fooBar', `$.windows["${STABLE}"].errorRate`]);
  });
});

describe('rollout results are snake_case at every depth', () => {
  it('canary: start (with its stage plan), the view with windows and a verdict, pause, abort, history, events', async () => {
    const started = await admin<CanaryStartView>('canary start', 'POST', '/models/llama/canary', { version: CANARY });
    expect(started.stage_plan.stages.map((s) => s.percent)).toEqual([50]);
    // the start answers while the canary version loads; the samples count from the first stage on
    for (let i = 0; (await app.controllers.canary.get('llama')).phase !== 'progressing'; i++) {
      expect(i, 'the canary never reached its first stage').toBeLessThan(200);
      await new Promise((r) => setTimeout(r, 25));
    }
    feed(STABLE, 60);
    feed(CANARY, 60);
    await app.controllers.canary.tick();
    const view = await admin<CanaryView>('canary view', 'GET', '/models/llama/canary');
    // the maps keyed by version id keep the ids as they are
    expect(Object.keys(view.weights).sort()).toEqual([CANARY, STABLE].sort());
    expect(Object.keys(view.windows).sort()).toEqual([CANARY, STABLE].sort());
    expect(view.windows[CANARY]).toMatchObject({ requests: 60, errors: 0, error_rate: 0, latency_ms: { p50: expect.any(Number) as number } });
    expect(view.last?.metrics.flatMap((m) => m.checks).length).toBeGreaterThan(0);
    expect(view.samples).toMatchObject({ stable: 60, canary: 60 });
    expect(view.judge).toMatchObject({ judged: 0, last_error: null });
    await admin('canary pause', 'POST', '/models/llama/canary/pause', { reason: 'casing test' });
    const aborted = await admin<CanaryView>('canary abort', 'POST', '/models/llama/canary/abort', { reason: 'casing test' });
    expect(aborted.phase).toBe('aborted');
    expect(aborted.rollback).toMatchObject({ percent_at_rollback: 50, canary_requests: 60 });
    await admin('canary history', 'GET', '/models/llama/canary/history');
    const events = await admin<{ rollout_id: string }[]>('canary events', 'GET', '/models/llama/canary/events');
    expect(events.every((e) => e.rollout_id === started.id)).toBe(true);
    // the webhook got the abort with the same rollback and verdict, in the same names
    const notice = hooked.find((h) => h.body.kind === 'canary_aborted');
    expect(notice?.path).toBe('/notify');
    const data = notice?.body.data as CanaryNoticeView;
    expect(data).toEqual({ id: started.id, rollback: aborted.rollback, last: aborted.last });
    bodies.set('canary webhook data', data);
  });

  it('experiment: create, analyze, status, stop', async () => {
    await admin('deploy', 'POST', '/models/llama/deploy', { version: GREEN });
    await admin('experiment create', 'POST', '/models/llama/experiments', { a: STABLE, b: GREEN, metric: 'latency', min_detectable_effect: 5 });
    feed(STABLE, 40);
    feed(GREEN, 40);
    const analysis = await admin<ExperimentAnalysisView>('experiment analyze', 'POST', '/models/llama/experiments/analyze');
    expect(analysis.result).toMatchObject({ status: 'analyzed', n_a: 40, n_b: 40 });
    const status = await admin<ExperimentAnalysisView>('experiment status', 'GET', '/models/llama/experiments');
    expect(status.previous_weights[STABLE]).toBe(1);
    await admin('experiment stop', 'POST', '/models/llama/experiments/stop', {});
  });

  it('windows and the monitor: status, a version, the monitor with its last check, the judge', async () => {
    await admin('swap', 'POST', '/models/llama/swap', {});
    feed(GREEN, 5);
    expect((await app.controllers.monitor.check('llama')).action).toBe('ok');
    const st = await admin<StatusView>('status', 'GET', '/status');
    expect(st.models[0]!.versions.find((v) => v.version === GREEN)?.window).toMatchObject({ error_rate: 0, tokens_per_s: expect.any(Number) as number });
    await admin('version', 'GET', `/models/llama/versions/${GREEN}`);
    const mon = await admin<{ last_check: unknown }>('monitor', 'GET', '/models/llama/monitor');
    expect(mon.last_check).toMatchObject({ action: 'ok', stats: { requests: 45, error_rate: 0 }, verdict: { roll_back: false } });
    await admin('judge', 'GET', '/judge');
  });

  it('the plan, the GPUs, the route (GET, PUT), a cache download, and the control events of the canary and the cache', async () => {
    const plan = await admin<StrategyPlanView>('plan', 'GET', `/models/llama/plan?to=${STABLE}`);
    expect(plan).toMatchObject({ current: { id: GREEN, load_time_estimated: expect.any(Boolean) as boolean }, cluster: { total_gpus: 4, free_gpus: 4 } });
    expect(plan.rows.find((r) => r.strategy === 'blue-green')).toMatchObject({ extra_gpus: 1, feasible: true, groups: null });
    expect(plan.canary_stages?.stages.map((x) => x.percent)).toEqual([50]);
    // static versions hold no GPU: hold one by hand so that a holder is shown
    await app.cp.inventory.take(1, 1, 0, 'casing test', () => ({ model: 'llama', versionId: STABLE, workerId: `llama/${STABLE}/9` }), Date.now());
    try {
      const gpus = await admin<GpuEntryView[]>('gpus', 'GET', '/gpus');
      expect(gpus.find((g) => g.holder !== null)).toEqual({
        id: expect.any(String) as string,
        memory_gb: 80,
        holder: { model: 'llama', version: STABLE, worker: `llama/${STABLE}/9` },
      });
      expect(gpus.filter((g) => g.holder === null)).toHaveLength(3);
    } finally {
      await app.cp.inventory.releaseVersion('llama', STABLE);
    }

    const put = await admin<RouteChangeView>('route put', 'PUT', '/models/llama/route', {
      weights: { [GREEN]: 1 },
      overrides: { [CATEGORY]: GREEN },
      sticky_salt: 'casing',
    });
    expect(put).toMatchObject({
      weights: { [GREEN]: 1 },
      overrides: { [CATEGORY]: GREEN },
      sticky_salt: 'casing',
      shadow: null,
      switch_ms: expect.any(Number) as number,
    });
    const route = await admin<RouteView>('route', 'GET', '/models/llama/route');
    expect(route).toMatchObject({
      model: 'llama',
      stable: GREEN,
      revision: put.revision,
      overrides: { [CATEGORY]: GREEN },
      sticky_salt: 'casing',
      shadow: null,
    });
    expect(route.shares).toEqual([{ version: GREEN, configured: 1, actual: expect.any(Number) as number, count: expect.any(Number) as number }]);
    // the old spelling is refused, naming the field it is now
    const old = await request(`${app.adminUrl}/admin/v1/models/llama/route`, {
      method: 'PUT',
      headers: { authorization: 'Bearer op-token', 'content-type': 'application/json' },
      body: JSON.stringify({ weights: { [GREEN]: 1 }, stickySalt: 'casing' }),
    });
    expect(old.statusCode).toBe(400);
    expect(((await old.body.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'invalid_body',
      message: expect.stringContaining('stickySalt: renamed: the field is sticky_salt') as string,
    });

    await admin<CacheResultView>('cache download (evicted)', 'POST', `/models/llama/versions/${CANARY}/cache`, {});
    const cached = await admin<CacheResultView>('cache download', 'POST', `/models/llama/versions/${STABLE}/cache`, {});
    expect(cached).toMatchObject({ version: STABLE, already_cached: false, verified: false, expected_hash: null, kept_protected: [] });
    expect(cached.evicted).toEqual([{ model: 'llama', version: CANARY, bytes: expect.any(Number) as number, last_used_at: expect.any(Number) as number }]);
    expect(cached.notes).toEqual([expect.stringMatching(/^version has no weight_hash: sha256:[0-9a-f]+ was recorded, not verified$/) as string]);

    // control events: the cache's carries the answer itself; the canary's carry no data
    const events = app.cp.events.since(0).filter((e) => e.kind === 'cache_download' || e.kind.startsWith('canary_'));
    expect(events.filter((e) => e.kind === 'cache_download').at(-1)?.data).toEqual(cached);
    expect(events.filter((e) => e.kind.startsWith('canary_') && e.data !== undefined)).toEqual([]);
    bodies.set(
      'control event data',
      events.map((e) => e.data ?? null),
    );
  });

  it('pipeline run -o json: stages, steps, on_failure, the fired trigger, its action and notification', async () => {
    ensureBuilt();
    const file = path.join(dir, 'deployment.yaml');
    writeFileSync(
      file,
      `pipeline:
  model: llama
  stages:
    - name: watch
      steps:
        - run: $NODE -e "0"
        - monitor: health_gates
          for: 5s
          every: 50ms
rollback:
  trigger: requests >= 0
  action: $NODE -e "0"
  notify: ${hookUrl}/hook
`,
    );
    const child = spawn(process.execPath, [CLI, 'pipeline', 'run', file, '--var', `NODE=${process.execPath}`, '-o', 'json'], {
      env: { ...process.env, GLIDEPATH_URL: app.adminUrl, GLIDEPATH_TOKEN: 'op-token' },
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.resume();
    const code = await new Promise((r) => child.on('close', r));
    expect(code).toBe(1);
    const run = JSON.parse(stdout) as PipelineRunView;
    expect(run).toMatchObject({ outcome: 'rolled_back', failed_stage: 'watch', rollback: { action: { status: 'ok' }, notify: { sent: true } } });
    expect(run.rollback?.notify?.results[0]?.duration_ms).toEqual(expect.any(Number));
    bodies.set('pipeline run', run);
  });

  it('no key of any of those bodies has an uppercase letter (data-keyed maps aside)', () => {
    expect([...bodies.keys()]).toHaveLength(25);
    const found = [...bodies].flatMap(([name, b]) => camelKeys(b).map((p) => `${name}: ${p}`));
    expect(found).toEqual([]);
  });
});
