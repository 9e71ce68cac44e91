// `npm run bench:multi-model`: LoRA adapter pools (issue 17) on a real `glidepath up` over 4
// simulated workers of one base model, max_loras 8 each (32 slots), 200 registered adapters, and
// requests at a steady rate whose adapter is drawn from a Zipf distribution (s = 1.0, a fixed seed:
// every scenario sends the same sequence). Scenarios, each on a fresh `glidepath up`:
//   random:             adapter_routing random (any worker that can load it), no prefetch;
//   affinity:           adapter_routing affinity (bounded load), no prefetch;
//   affinity+prefetch:  affinity and the prefetcher with its defaults (top_k 8, every 5 s);
//   affinity+prefetch (top_k 24): the same with the top 24 (3/4 of the slots).
// For each, over the measured window (after a warm-up): the hit rate (requests served by a worker
// that had the adapter loaded: the gateway's x-glidepath-adapter header, checked against
// glidepath_adapter_requests_total), loads and evictions by trigger (demand, prefetch), the TTFT of
// hits and of misses and what a miss adds (miss quantile − hit quantile, the simulator's lora_load_ms
// stated), and the requests that failed (must be 0: none lost to an eviction race).
// Writes bench/results/multi-model.md and multi-model.json. Loopback only; every process is stopped.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { quantileSorted } from '../src/domain/quantile.js';
import { mulberry32 } from '../src/domain/random.js';
import { ROOT, cleanupAll, removeDir, startUp, tempDir, writeConfig } from '../test/helpers/e2e-up.js';
import type { UpProcess, WorkerView } from '../test/helpers/e2e-up.js';

const MODEL = 'base';
const WORKERS = 4;
const MAX_LORAS = 8;
const ADAPTERS = 200;
const ZIPF_S = 1.0;
const SEED = 17;
const RATE_PER_S = 50;
const WARMUP_S = 10;
const MEASURE_S = 25;
const MAX_TOKENS = 8;
const ITL_MS = 5;
const LORA_LOAD_MS = 100;

interface Scenario {
  name: string;
  routing: 'affinity' | 'random';
  prefetch: { enabled: boolean; topK?: number };
}

const SCENARIOS: Scenario[] = [
  { name: 'random', routing: 'random', prefetch: { enabled: false } },
  { name: 'affinity', routing: 'affinity', prefetch: { enabled: false } },
  { name: 'affinity + prefetch (defaults: top_k 8)', routing: 'affinity', prefetch: { enabled: true } },
  { name: 'affinity + prefetch (top_k 24)', routing: 'affinity', prefetch: { enabled: true, topK: 24 } },
];

interface Sample {
  at: number;
  adapter: string;
  status: number;
  /** x-glidepath-adapter: hit, miss ('' when absent). */
  result: string;
  ttftMs: number;
  done: boolean;
  error: string;
}

interface Counts {
  hit: number;
  miss: number;
  loads: Record<string, number>;
  evictions: Record<string, number>;
}

interface Result {
  scenario: string;
  requests: number;
  hitRate: number;
  hits: number;
  misses: number;
  /** The gateway's own counts over the window (glidepath_adapter_requests_total): they should agree. */
  metricHitRate: number;
  loads: Record<string, number>;
  evictions: Record<string, number>;
  ttftHitMs: { p50: number; p99: number };
  ttftMissMs: { p50: number; p99: number };
  addedMs: { p50: number; p99: number };
  failed: number;
  failures: Record<string, number>;
}

const NAMES = Array.from({ length: ADAPTERS }, (_, i) => `ad${String(i).padStart(3, '0')}`);

/** The adapters of `n` requests, Zipf(s) over the ranks, the ranks given to the names in a seeded shuffle. */
function zipfSequence(n: number): string[] {
  const rand = mulberry32(SEED);
  const byRank = [...NAMES];
  for (let i = byRank.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [byRank[i], byRank[j]] = [byRank[j] as string, byRank[i] as string];
  }
  const cdf: number[] = [];
  let total = 0;
  for (let k = 1; k <= ADAPTERS; k++) cdf.push((total += 1 / Math.pow(k, ZIPF_S)));
  return Array.from({ length: n }, () => {
    const u = rand() * total;
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cdf[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    return byRank[lo] as string;
  });
}

function configYaml(dataDir: string, s: Scenario): string {
  const prefetch = [`enabled: ${s.prefetch.enabled}`, ...(s.prefetch.topK === undefined ? [] : [`top_k: ${s.prefetch.topK}`])].join(', ');
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 8, memory_gb: 80 }',
    `gateway: { adapter_routing: ${s.routing}, adapter_prefetch: { ${prefetch} } }`,
    'models:',
    `  - name: ${MODEL}`,
    '    adapters:',
    ...NAMES.map((n) => `      - { name: ${n}, source: /adapters/${n} }`),
    '    versions:',
    '      - id: v1',
    `        replicas: ${WORKERS}`,
    `        provider: { kind: sim, sim: { seed: 5, inter_token_ms: ${ITL_MS}, jitter: 0, max_num_seqs: 64, max_loras: ${MAX_LORAS}, lora_load_ms: ${LORA_LOAD_MS} } }`,
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

async function allServing(up: UpProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await up.ok<WorkerView[]>('GET', '/workers')).filter((w) => w.state === 'ready' && w.routable).length < WORKERS) {
    if (Date.now() > deadline) throw new Error(`never ${WORKERS} serving workers`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function counts(up: UpProcess): Promise<Counts> {
  const text = await (await request(`${up.dataUrl}/metrics`)).body.text();
  const c: Counts = { hit: 0, miss: 0, loads: {}, evictions: {} };
  for (const line of text.split('\n')) {
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    const label = (k: string) => new RegExp(`${k}="([^"]*)"`).exec(line)?.[1] ?? '';
    if (line.startsWith('glidepath_adapter_requests_total{')) {
      if (label('result') === 'hit') c.hit += v;
      else c.miss += v;
    } else if (line.startsWith('glidepath_adapter_loads_total{')) {
      const k = `${label('trigger')} ${label('outcome')}`;
      c.loads[k] = (c.loads[k] ?? 0) + v;
    } else if (line.startsWith('glidepath_adapter_evictions_total{')) {
      c.evictions[label('trigger')] = (c.evictions[label('trigger')] ?? 0) + v;
    }
  }
  return c;
}

const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    Object.keys({ ...a, ...b })
      .sort()
      .map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)]),
  );

/** One streamed completion for `adapter`: status, the adapter header, time to the first token, whether it ended with [DONE]. */
async function one(agent: Agent, base: string, adapter: string): Promise<Sample> {
  const t0 = performance.now();
  const s: Sample = { at: t0, adapter, status: 0, result: '', ttftMs: NaN, done: false, error: '' };
  try {
    const res = await request(`${base}/v1/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: adapter, prompt: 'Summarise the ticket in one line', max_tokens: MAX_TOKENS, stream: true, temperature: 0 }),
    });
    s.status = res.statusCode;
    const h = res.headers['x-glidepath-adapter'];
    s.result = typeof h === 'string' ? h : '';
    let text = '';
    for await (const chunk of res.body) {
      if (Number.isNaN(s.ttftMs)) s.ttftMs = performance.now() - t0;
      text += (chunk as Buffer).toString('utf8');
    }
    s.done = res.statusCode === 200 && text.includes('data: [DONE]');
    if (!s.done) s.error = res.statusCode === 200 ? 'stream ended early' : (/"code":"([^"]+)"/.exec(text)?.[1] ?? `status ${res.statusCode}`);
  } catch (err) {
    s.error = (err as Error).message;
  }
  return s;
}

/** Requests at a steady rate (each sent on its time, not waiting for the previous ones); resolves when all are answered. */
async function steady(base: string, adapters: readonly string[]): Promise<Sample[]> {
  const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000 });
  const dt = 1000 / RATE_PER_S;
  const t0 = performance.now();
  const out: Promise<Sample>[] = [];
  for (let i = 0; i < adapters.length; i++) {
    const wait = t0 + i * dt - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    out.push(one(agent, base, adapters[i] as string));
  }
  const all = await Promise.all(out);
  await agent.close();
  return all;
}

function q(xs: number[], p: number): number {
  return quantileSorted(
    [...xs].sort((a, b) => a - b),
    p,
  );
}

async function scenario(s: Scenario, seq: readonly string[]): Promise<Result> {
  const dir = tempDir('bench-multi-model');
  let up: UpProcess | undefined;
  try {
    writeConfig(dir, configYaml(`${dir}/state`, s));
    up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
    await allServing(up);
    const warm = WARMUP_S * RATE_PER_S;
    const warmup = steady(up.dataUrl, seq.slice(0, warm));
    // the measured window starts once the warm-up's requests are all sent (its last ones may still run)
    await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
    const before = await counts(up);
    const measured = await steady(up.dataUrl, seq.slice(warm));
    const after = await counts(up);
    const warmed = await warmup;
    const failedAll = [...warmed, ...measured].filter((x) => !x.done);
    const failures: Record<string, number> = {};
    for (const f of failedAll) failures[f.error] = (failures[f.error] ?? 0) + 1;
    const hits = measured.filter((x) => x.done && x.result === 'hit');
    const misses = measured.filter((x) => x.done && x.result === 'miss');
    const ttft = (xs: Sample[]) => ({
      p50: q(
        xs.map((x) => x.ttftMs),
        0.5,
      ),
      p99: q(
        xs.map((x) => x.ttftMs),
        0.99,
      ),
    });
    const th = ttft(hits);
    const tm = ttft(misses);
    const mh = after.hit - before.hit;
    const mm = after.miss - before.miss;
    return {
      scenario: s.name,
      requests: measured.length,
      hits: hits.length,
      misses: misses.length,
      hitRate: hits.length / Math.max(1, hits.length + misses.length),
      metricHitRate: mh / Math.max(1, mh + mm),
      loads: diff(before.loads, after.loads),
      evictions: diff(before.evictions, after.evictions),
      ttftHitMs: th,
      ttftMissMs: tm,
      addedMs: { p50: tm.p50 - th.p50, p99: tm.p99 - th.p99 },
      failed: failedAll.length,
      failures,
    };
  } finally {
    await up?.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  }
}

async function main(): Promise<void> {
  const seq = zipfSequence((WARMUP_S + MEASURE_S) * RATE_PER_S);
  const results: Result[] = [];
  for (const s of SCENARIOS) {
    const r = await scenario(s, seq);
    console.log(`${r.scenario}: hit rate ${(r.hitRate * 100).toFixed(1)} %, failed ${r.failed}`);
    results.push(r);
  }
  write(results);
}

function write(results: Result[]): void {
  const outDir = path.join(ROOT, 'bench/results');
  if (!existsSync(outDir)) mkdirSync(outDir, { recursive: true });
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const kv = (o: Record<string, number>) =>
    Object.entries(o)
      .filter(([, v]) => v !== 0)
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ') || '0';
  const lines = [
    '# Multi-model benchmark: LoRA adapter pools',
    '',
    `Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model.trim() ?? '?'}, Node ${process.version}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )}; \`glidepath up\`, ${WORKERS} simulated workers of one base model, max_loras ${MAX_LORAS} each (${WORKERS * MAX_LORAS} slots), lora_load_ms ${LORA_LOAD_MS}, ${ITL_MS} ms/token; ${ADAPTERS} registered adapters; ${RATE_PER_S} streamed completions/s of ${MAX_TOKENS} tokens, each naming an adapter drawn from Zipf(s = ${ZIPF_S.toFixed(1)}) over the ${ADAPTERS} (seed ${SEED}: the same sequence in every scenario); ${WARMUP_S} s warm-up, then ${MEASURE_S} s measured (${MEASURE_S * RATE_PER_S} requests). A fresh \`glidepath up\` per scenario.`,
    "Hit: the worker that served the request had its adapter loaded (the `x-glidepath-adapter` header; `metric` is the gateway's glidepath_adapter_requests_total over the window). A miss waited for a load, its own or one already under way. Added by a miss: its TTFT quantile minus the hits' same quantile. Loads and evictions over the measured window, by trigger. Failed: requests of the whole run (warm-up included) that did not end with `[DONE]`.",
    '',
    '| scenario | hit rate | metric | loads | evictions | TTFT hit p50 / p99 ms | TTFT miss p50 / p99 ms | added by a miss p50 / p99 ms | failed |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${pct(r.hitRate)} | ${pct(r.metricHitRate)} | ${kv(r.loads)} | ${kv(r.evictions)} | ${f(r.ttftHitMs.p50)} / ${f(r.ttftHitMs.p99)} | ${f(r.ttftMissMs.p50)} / ${f(r.ttftMissMs.p99)} | ${f(r.addedMs.p50)} / ${f(r.addedMs.p99)} | ${r.failed} |`,
    ),
    '',
    ...results.filter((r) => r.failed > 0).map((r) => `Failures in "${r.scenario}": ${JSON.stringify(r.failures)}`),
  ];
  writeFileSync(path.join(outDir, 'multi-model.md'), lines.join('\n') + '\n');
  writeFileSync(
    path.join(outDir, 'multi-model.json'),
    JSON.stringify(
      {
        at: new Date().toISOString(),
        setup: {
          workers: WORKERS,
          maxLoras: MAX_LORAS,
          adapters: ADAPTERS,
          zipfS: ZIPF_S,
          seed: SEED,
          ratePerS: RATE_PER_S,
          warmupS: WARMUP_S,
          measureS: MEASURE_S,
          maxTokens: MAX_TOKENS,
          interTokenMs: ITL_MS,
          loraLoadMs: LORA_LOAD_MS,
        },
        results,
      },
      null,
      2,
    ) + '\n',
  );
  console.log(lines.join('\n'));
}

main().catch((err: unknown) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
