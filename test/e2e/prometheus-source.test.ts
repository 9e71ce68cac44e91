// Prometheus as the canary judge's metric source, end to end: a real `prometheus` on loopback
// (scrape interval 1 s, its storage in a temp dir) scrapes two gateway replicas — two Apps in this
// process in front of the same simulated workers — and the workers themselves. Replica A runs the
// canaries with `metrics_source: { kind: prometheus }`; replica B serves each model's two versions
// half and half and runs nothing. Two canaries at once: model `errors`, whose candidate answers 30 %
// of requests with a 500, must be rolled back on the errors of both replicas' traffic — its deciding
// look counts more canary requests than replica A ever saw — and model `equal`, whose candidate is the
// same engine, must be promoted; the rollback monitor then judges it on both replicas' window. Skipped with one line without `prometheus`
// (failed under CI=true).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { startGlidepath } from '../../src/control/app.js';
import type { App } from '../../src/control/app.js';
import type { VersionSummary } from '../../src/analysis/judge.js';
import type { CanaryState } from '../../src/rollout/canary-state.js';
import { startSim } from '../../src/sim/index.js';
import type { SimHandle } from '../../src/sim/index.js';
import { OPTIONAL_TOOLS, findTool, itWithTool } from '../helpers/tools.js';

const itWithPrometheus = itWithTool('prometheus', OPTIONAL_TOOLS.prometheus);
const DEADLINE_MS = 60_000;

let dir: string | undefined;
let prom: ChildProcess | undefined;
let promLog = '';
const apps: App[] = [];
const sims: SimHandle[] = [];

afterAll(async () => {
  for (const a of apps) await a.close();
  for (const s of sims) await s.close();
  if (prom && prom.exitCode === null) {
    const exited = new Promise((r) => prom?.once('exit', r));
    prom.kill('SIGTERM');
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A port free now: bound on 0 and released (Prometheus cannot be told to take port 0). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const addr = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

/** Call `f` until it returns a value (not undefined), at most until the deadline; between calls, one scrape's fraction. */
async function pollUntil<T>(what: string, f: () => Promise<T | undefined>, deadlineMs = DEADLINE_MS): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within ${deadlineMs} ms (${String(last)}); prometheus said:\n${promLog.slice(-2000)}`);
}

async function promQuery(url: string, query: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
  const res = await request(`${url}/api/v1/query?${new URLSearchParams({ query }).toString()}`);
  const doc = (await res.body.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
  if (doc.status !== 'success') throw new Error(`query ${query}: ${JSON.stringify(doc)}`);
  return doc.data.result;
}

type Workers = Record<string, { v1: string; v2: string }>;

function appConfig(name: string, promUrl: string, workers: Workers, weights: Record<string, number>) {
  const version = (model: string, id: 'v1' | 'v2') => ({ id, provider: { kind: 'static', endpoints: [workers[model]?.[id]] }, warmup: { requests: 0 } });
  return parseConfig({
    server: { listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', data_dir: path.join(dir as string, name) },
    auth: { tokens: [{ name: 'ops', role: 'operator', token: 'op-token' }] },
    gpus: { count: 8, memory_gb: 80 },
    // a 500 is the version's answer, not retried on the other version's worker
    gateway: { max_retries: 0 },
    control: { tick_ms: 200 },
    metrics_source: { kind: 'prometheus', url: promUrl, labels: { job: 'glidepath' }, timeout_ms: 2_000 },
    models: Object.keys(workers).map((model) => ({
      name: model,
      health: { enabled: false },
      versions: [version(model, 'v1'), version(model, 'v2')],
      route: { weights },
      canary: { stages: [10, 50, 100], stage_duration_ms: 3_000, min_samples: 30, ignore_first_requests: 0 },
      // checked by the test only (an interval longer than the test)
      monitor: { enabled: true, min_requests: 10, interval_ms: 3_600_000 },
    })),
  });
}

async function chat(dataUrl: string, model: string): Promise<number> {
  const res = await request(`${dataUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say something short.' }], max_tokens: 8 }),
  });
  await res.body.dump();
  return res.statusCode;
}

describe('Prometheus as the metric source (real prometheus, two gateway replicas)', () => {
  itWithPrometheus(
    "rolls back a canary with more errors and promotes an equal one, judged on both replicas' traffic scraped by Prometheus",
    async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'gp-prom-'));
      // 8 tokens at 15 ms: latencies in the middle of their buckets, away from the machine's jitter; the
      // equal candidate is the same engine and seed (another seed writes other answers, of other lengths)
      const sim = (model: string, version: string, seed: number, errorRate = 0) =>
        startSim({ port: 0, model, version, seed, interTokenMs: 15, jitter: 0, faults: { errorRate } });
      const started = await Promise.all([sim('errors', 'v1', 1), sim('errors', 'v2', 2, 0.3), sim('equal', 'v1', 3), sim('equal', 'v2', 3)]);
      sims.push(...started);
      const [e1, e2, q1, q2] = started;
      const workers: Workers = { errors: { v1: e1.url, v2: e2.url }, equal: { v1: q1.url, v2: q2.url } };
      const promPort = await freePort();
      const promUrl = `http://127.0.0.1:${promPort}`;
      // replica A runs the canaries (routes all on v1 until they start); replica B serves both versions
      const a = await startGlidepath(appConfig('a', promUrl, workers, { v1: 1 }));
      apps.push(a);
      const b = await startGlidepath(appConfig('b', promUrl, workers, { v1: 0.5, v2: 0.5 }));
      apps.push(b);
      const target = (u: string) => JSON.stringify(new URL(u).host);
      writeFileSync(
        path.join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, scrape_timeout: 900ms }',
          'scrape_configs:',
          `  - job_name: glidepath`,
          `    static_configs: [{ targets: [${[a.dataUrl, b.dataUrl].map(target).join(', ')}] }]`,
          `  - job_name: engines`,
          `    static_configs: [{ targets: [${started.map((x) => target(x.url)).join(', ')}] }]`,
          '',
        ].join('\n'),
      );
      prom = spawn(
        findTool('prometheus') as string,
        [
          `--config.file=${path.join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${path.join(dir, 'tsdb')}`,
          `--web.listen-address=127.0.0.1:${promPort}`,
          '--log.level=warn',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      for (const s of [prom.stdout, prom.stderr]) s?.on('data', (c: Buffer) => (promLog = (promLog + c.toString()).slice(-20_000)));
      // every target scraped at least once: the gateways' and the engines' series are in
      await pollUntil('prometheus up and scraping both gateways and the four engines', async () => {
        const up = await promQuery(promUrl, 'up == 1');
        return up.length === 6 ? up : undefined;
      });

      const models = ['errors', 'equal'];
      const ids = new Map<string, string>();
      for (const m of models) ids.set(m, (await a.controllers.canary.start(m, { version: 'v2' }, { name: 'ops' })).id);
      const current = (m: string) => a.controllers.canary.get(m, ids.get(m));
      await pollUntil('both canaries progressing', async () =>
        (await Promise.all(models.map(current))).every((s) => s.phase === 'progressing') ? true : undefined,
      );

      // a closed loop of four clients, over both replicas and both models, until both canaries end (bounded)
      const statuses = new Map<string, number>();
      const ended = new Map<string, CanaryState>();
      const end = Date.now() + DEADLINE_MS;
      const client = async (i: number) => {
        for (let n = 0; Date.now() < end && ended.size < models.length; n++) {
          const replica = (i + n) % 2 === 0 ? a : b;
          const live = models.filter((m) => !ended.has(m));
          const model = live[n % live.length] as string;
          const code = await chat(replica.dataUrl, model);
          const key = `${model} ${replica === a ? 'a' : 'b'} ${code}`;
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          const s = await current(model);
          if (s.phase !== 'progressing' && s.phase !== 'pending' && s.phase !== 'loading' && s.phase !== 'promoting') ended.set(model, s);
        }
      };
      await Promise.all([0, 1, 2, 3].map(client));
      const why = `requests: ${JSON.stringify([...statuses])}; ended: ${JSON.stringify([...ended].map(([m, s]) => [m, s.phase, s.message]))}`;
      expect(ended.size, `the canaries did not both end within ${DEADLINE_MS} ms; ${why}`).toBe(2);

      const bad = ended.get('errors') as CanaryState;
      expect(bad.phase, why).toBe('rolled_back');
      expect(bad.rollback?.reason).toMatch(/errors/);
      const errors = bad.verdicts.at(-1)?.metrics.find((m) => m.name === 'errors');
      expect(errors?.outcome).toBe('fail');
      const canary = errors?.canary as VersionSummary;
      const stable = errors?.stable as VersionSummary;
      // judged on more canary requests than replica A served: B's traffic came in through Prometheus
      expect(canary.n).toBeGreaterThan(bad.rollback?.canaryRequests ?? Infinity);
      expect(canary.rate).toBeGreaterThan(0.1);
      expect(stable.rate).toBeLessThan(0.05);

      const good = ended.get('equal') as CanaryState;
      expect(good.phase, `${why}; last look: ${JSON.stringify(good.last?.reasons)}`).toBe('succeeded');
      const latency = good.verdicts.at(-1)?.metrics.find((m) => m.name === 'latency');
      expect(latency?.outcome).toBe('pass');

      // the monitor judges the promoted version on both replicas' window too
      const check = await a.controllers.monitor.check('equal');
      expect(check).toMatchObject({ action: 'ok', active: 'v2', standby: 'v1' });
      expect(check.stats?.requests).toBeGreaterThan(a.ports.telemetry.stats('equal', 'v2').requests);
      expect(check.stats?.errorRate).toBe(0);

      // Prometheus holds both replicas' series of the candidates, and the engines' own
      expect((await promQuery(promUrl, 'sum by (instance) (glidepath_requests_total{model="errors",version="v2"})')).length).toBe(2);
      expect((await promQuery(promUrl, 'vllm:num_requests_running')).length).toBe(4);
      // what each engine generated, as the scheduler reads it: by scrape target
      const remote = a.ports.telemetry.remote;
      const engines = started.map((x) => new URL(x.url).host);
      const generated = await remote?.engineTokens(engines, Date.now() - 60_000, Date.now());
      expect(engines.map((e) => (generated?.get(e) ?? 0) > 0)).toEqual([true, true, true, true]);
      // no look waited on an unreachable source
      for (const m of models) expect((await a.controllers.canary.events(m, ids.get(m))).map((e) => e.kind)).not.toContain('metrics_unavailable');
    },
    120_000,
  );
});
