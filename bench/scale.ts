// `npm run bench:scale`: what the routing state of many models costs the request path (issue 18). Two
// gateway processes (bench/lib/scale-gateway.ts) hold the same shape of model — versions v1 (0.9) and v2
// (0.1) of WORKERS_PER_VERSION workers each, ADAPTERS LoRA adapters — one model, or MODELS of them
// (MODELS × 2 × WORKERS_PER_VERSION workers), every worker on one simulator at zero delay (the workers
// share its endpoint). Cells: one model; MODELS models with the requests spread over all of them in
// turn; MODELS models with every request to one. Small non-streaming requests at CONNECTIONS
// connections from a load generator in its own process; each gateway's CPU (utime + stime from /proc)
// over each measured window, per request; cells interleaved in rotated order, REPEATS rounds, medians,
// and each cell against the one-model cell of the same round (paired), after one round of every cell that is
// not counted (the JIT's warm-up). Also: the time of one route publish (setRoute) and the heap and RSS of each gateway
// holding its routing state, and its open descriptors (upstream connections) after each cell. Then the
// slow-streams cell (bench/lib/scale-streams.ts): STREAMS concurrent 1 token/s streams through one gateway.
// The instructions part (bench/lib/scale-callgrind.ts, where valgrind is installed): the data-plane gateways'
// instructions per request under callgrind, a count that does not move with the machine's load.
// `BENCH_PARTS=models`, `instructions` or `streams` runs those parts and keeps the others' last results.
// Writes bench/results/scale.json and scale.md.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeResults } from './lib/results.js';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, freePort, start, runLoadgen, startFastSim, waitFor } from './lib/proc.js';
import type { Proc } from './lib/proc.js';
import type { LoadResult } from './lib/loadgen.js';
import type { ScaleGatewayOptions, ScaleGatewayReport } from './lib/scale-gateway.js';
import { quantileSorted } from '../src/domain/quantile.js';
import { modelsMarkdown, summarize } from './lib/scale-models.js';
import type { GatewayKey, Kind, ModelsData, Row } from './lib/scale-models.js';
import { callgrindMarkdown, haveValgrind, runCallgrind } from './lib/scale-callgrind.js';
import type { CallgrindReport } from './lib/scale-callgrind.js';
import { canRaiseNofile, hardNofile, runStreams, streamsMarkdown } from './lib/scale-streams.js';
import type { StreamsReport } from './lib/scale-streams.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const CLI = path.join(root, 'dist', 'cli', 'main.js');
const LOADGEN = path.join(here, 'lib', 'loadgen.js');
const GATEWAY = path.join(here, 'lib', 'scale-gateway.js');
const MODELS = Number(process.env.BENCH_MODELS ?? 100);
const WORKERS_PER_VERSION = Number(process.env.BENCH_WORKERS_PER_VERSION ?? 5);
const ADAPTERS = Number(process.env.BENCH_ADAPTERS ?? 5);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 4_000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1_500);
/**
 * Rounds of every cell. One cell's rounds spread by ±20 % on this shared 2-core machine, so a figure within
 * 10 % needs many: the paired ratios' median over 8 rounds.
 */
const REPEATS = Math.max(1, Number(process.env.BENCH_REPEATS ?? 8));
const CONNECTIONS = 32;
/**
 * Each gateway's CPU with no traffic is measured over this long (all at once, before the cells): a whole
 * `glidepath up` spends CPU every second on its workers whatever the traffic (a health probe per worker
 * every 30 s, the health and scheduler ticks over every worker), which a per-request figure divides by
 * however many requests the machine's state allowed that round. 30 s covers one probe interval.
 */
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 30_000);
/** `BENCH_CPU_PROF=<dir>`: the gateways run under --cpu-prof and write their profiles there. */
const CPU_PROF = process.env.BENCH_CPU_PROF;
/** `BENCH_KINDS=dataplane` or `up`: only those gateways (default both). */
const KINDS: Kind[] = (process.env.BENCH_KINDS ?? 'dataplane,up').split(',').map((k) => {
  if (k !== 'dataplane' && k !== 'up') throw new Error(`BENCH_KINDS: expected dataplane and/or up, got ${k}`);
  return k;
});

/** `BENCH_PARTS`: `models` (the routing state of many models), `instructions` (its instruction counts), `streams` (slow streams); default all. */
const PARTS = (process.env.BENCH_PARTS ?? 'models,instructions,streams').split(',');
/** The instructions part: requests counted per cell and round, rounds, and whether callgrind simulates the caches too. */
const INSTR_REQUESTS = Number(process.env.BENCH_INSTR_REQUESTS ?? 2_000);
const INSTR_ROUNDS = Number(process.env.BENCH_INSTR_ROUNDS ?? 3);
const INSTR_CACHE_SIM = process.env.BENCH_INSTR_CACHE_SIM !== '0';
/** Stream counts of the slow-streams cell, comma-separated: one section each. */
const STREAMS = (process.env.BENCH_STREAMS ?? '10000').split(',').map(Number);
const STREAMS_RATE = Number(process.env.BENCH_STREAMS_RATE ?? 250);
const STREAMS_TOKENS = Number(process.env.BENCH_STREAMS_TOKENS ?? 40);
const STREAMS_DURATION_MS = Number(process.env.BENCH_STREAMS_DURATION_MS ?? 70_000);
const STREAMS_REPEATS = Number(process.env.BENCH_STREAMS_REPEATS ?? 2);
/** The processes of the streams cell run under `prlimit --nofile=N:N` (0: the machine's default limit). */
const STREAMS_NOFILE = Number(process.env.BENCH_STREAMS_NOFILE ?? 65_536);
const STREAMS_LOADGEN = path.join(here, 'lib', 'streams-loadgen.js');
/**
 * The gateway's clients speak HTTP/2 (prior knowledge) over this many connections, streams spread over
 * them; 0: HTTP/1.1, a connection per stream (two descriptors per stream in the gateway, so 10,000 need
 * a limit of 21,053). The direct runs to the simulator stay HTTP/1.1.
 */
const STREAMS_H2 = Number(process.env.BENCH_STREAMS_H2 ?? 100);

interface Cell {
  name: string;
  gateway: GatewayKey;
  models: string[];
}

function modelName(i: number): string {
  return `m${i}`;
}

function run(script: string, args: string[], nodeArgs: string[] = []): { proc: Proc; line: Promise<string> } {
  const proc = start(process.execPath, [...nodeArgs, script, ...args]);
  const line = new Promise<string>((resolve, reject) => {
    const onData = (): void => {
      const out = proc.output();
      const nl = out.indexOf('\n');
      if (nl !== -1 && out.startsWith('{')) {
        proc.child.stdout?.off('data', onData);
        resolve(out.slice(0, nl));
      }
    };
    proc.child.stdout?.on('data', onData);
    proc.child.once('exit', (code) => reject(new Error(`${path.basename(script)} exited ${code}: ${proc.output()}`)));
  });
  return { proc, line };
}

function loadgen(opts: Record<string, unknown>): Promise<LoadResult> {
  return runLoadgen<LoadResult>(LOADGEN, opts);
}

function gatewayOptions(models: number, endpoint: string): ScaleGatewayOptions {
  return {
    port: 0,
    endpoints: [endpoint],
    models,
    versions: 2,
    workersPerVersion: WORKERS_PER_VERSION,
    adaptersPerModel: ADAPTERS,
    publishes: 200,
  };
}

async function gateway(models: number, endpoint: string): Promise<{ proc: Proc; report: ScaleGatewayReport }> {
  const opts = gatewayOptions(models, endpoint);
  // the `glidepath` command's V8 flag (docs/gateway.md, "Memory and garbage collection")
  const nodeArgs = ['--expose-gc', '--initial-old-space-size=128'];
  if (CPU_PROF !== undefined) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`, `--cpu-prof-name=gateway-${models}.cpuprofile`);
  const { proc, line } = run(GATEWAY, [JSON.stringify(opts)], nodeArgs);
  const report = JSON.parse(await line) as ScaleGatewayReport;
  await waitFor(`http://127.0.0.1:${report.port}/health`);
  return { proc, report };
}

/** A whole `glidepath up` holding the same models over static endpoints (its routing state, control plane and all). */
async function up(models: number, endpoint: string, dir: string): Promise<{ proc: Proc; report: ScaleGatewayReport }> {
  const [port, admin] = [await freePort(), await freePort()];
  const eps = `[${Array.from({ length: WORKERS_PER_VERSION }, () => JSON.stringify(endpoint)).join(', ')}]`;
  const lines = [
    'server:',
    `  listen: 127.0.0.1:${port}`,
    `  admin_listen: 127.0.0.1:${admin}`,
    `  data_dir: ${path.join(dir, `up-${models}`)}`,
    'gpus: { count: 1 }',
    'models:',
  ];
  for (let m = 0; m < models; m++) {
    lines.push(`  - name: ${modelName(m)}`, '    adapters:');
    for (let a = 0; a < ADAPTERS; a++) lines.push(`      - { name: ${modelName(m)}-lora${a}, source: /loras/${modelName(m)}/${a} }`);
    lines.push('    versions:');
    for (const v of ['v1', 'v2']) lines.push(`      - id: ${v}`, '        warmup: { requests: 0 }', `        provider: { kind: static, endpoints: ${eps} }`);
  }
  const cfg = path.join(dir, `up-${models}.yaml`);
  writeFileSync(cfg, lines.join('\n') + '\n');
  const args = ['--initial-old-space-size=128'];
  if (CPU_PROF !== undefined) args.push('--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`, `--cpu-prof-name=up-${models}.cpuprofile`);
  const proc = start(process.execPath, [...args, CLI, 'up', '--config', cfg]);
  const t0 = Date.now();
  await waitFor(`http://127.0.0.1:${port}/ready`, 120_000);
  // route publish and memory are measured on the data-plane gateways (same routing state)
  return {
    proc,
    report: {
      port,
      models,
      workers: models * 2 * WORKERS_PER_VERSION,
      adapters: models * ADAPTERS,
      buildMs: Date.now() - t0,
      publishMs: { p50: NaN, p99: NaN, max: NaN },
      heapUsedMiB: NaN,
      rssMiB: rssMiB(proc.pid),
    },
  };
}

function fds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function measure(cell: Cell, round: number, port: number, pid: number, idleMsPerS: number): Promise<Row> {
  const lg = loadgen({
    url: `http://127.0.0.1:${port}`,
    model: cell.models[0],
    models: cell.models,
    connections: CONNECTIONS,
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    stream: false,
    maxTokens: 16,
  });
  // CPU over the measured window only (after the load generator's warm-up)
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const cpu0 = cpuMs(pid);
  const r = await lg;
  const cpu = cpuMs(pid) - cpu0;
  const lat = [...r.latencyMs].sort((a, b) => a - b);
  return {
    cell: cell.name,
    round,
    rps: r.requests / (r.elapsedMs / 1000),
    cpuPerReqUs: (cpu * 1000) / Math.max(1, r.requests),
    netCpuPerReqUs: ((cpu - (idleMsPerS * r.elapsedMs) / 1000) * 1000) / Math.max(1, r.requests),
    p50: quantileSorted(lat, 0.5),
    p99: quantileSorted(lat, 0.99),
    errors: r.errors,
    requests: r.requests,
    fds: fds(pid),
  };
}

async function runModels(dir: string): Promise<ModelsData> {
  const procs: Proc[] = [];
  const rows: Row[] = [];
  const reports: Partial<Record<GatewayKey, ScaleGatewayReport>> = {};
  const rss: Partial<Record<GatewayKey, number>> = {};
  const idle: Partial<Record<GatewayKey, number>> = {};
  const all = Array.from({ length: MODELS }, (_, i) => modelName(i));
  const cells: Cell[] = KINDS.flatMap((k): Cell[] => [
    { name: `${k}: one model`, gateway: `${k} one`, models: [modelName(0)] },
    { name: `${k}: ${MODELS} models, spread`, gateway: `${k} many`, models: all },
    { name: `${k}: ${MODELS} models, all on one`, gateway: `${k} many`, models: [modelName(MODELS - 1)] },
  ]);
  try {
    const simPort = await freePort();
    // one simulator answers to every model's name: all the workers share its endpoint
    const sim = await startFastSim(CLI, simPort, ['--served-model-name', ...all]);
    procs.push(sim);
    const endpoint = `http://127.0.0.1:${simPort}`;
    const by: Partial<Record<GatewayKey, { proc: Proc; report: ScaleGatewayReport }>> = {};
    for (const k of KINDS) {
      for (const [size, n] of [['one', 1] as const, ['many', MODELS] as const]) {
        const g = k === 'dataplane' ? await gateway(n, endpoint) : await up(n, endpoint, dir);
        procs.push(g.proc);
        by[`${k} ${size}`] = g;
        reports[`${k} ${size}`] = g.report;
      }
    }
    // every gateway idle at once, after a pause for what starting left to do
    await new Promise((r) => setTimeout(r, 2_000));
    const gws = Object.entries(by) as [GatewayKey, { proc: Proc; report: ScaleGatewayReport }][];
    const cpu0 = gws.map(([, g]) => cpuMs(g.proc.pid));
    await new Promise((r) => setTimeout(r, IDLE_MS));
    gws.forEach(([k, g], i) => (idle[k] = ((cpuMs(g.proc.pid) - (cpu0[i] as number)) * 1000) / IDLE_MS));
    process.stderr.write(`idle CPU ms/s ${JSON.stringify(idle)}\n`);
    // round -1 is not kept: the gateways had served nothing, and their first round compiled the request path
    // (a first round read 224 µs/request against 105–134 in the seven after it)
    for (let i = -1; i < REPEATS; i++) {
      for (let k = 0; k < cells.length; k++) {
        const cell = cells[(i + 1 + k) % cells.length] as Cell;
        const g = by[cell.gateway] as { proc: Proc; report: ScaleGatewayReport };
        const row = await measure(cell, i, g.report.port, g.proc.pid, idle[cell.gateway] ?? 0);
        if (i >= 0) rows.push(row);
        process.stderr.write(`${i < 0 ? 'warm-up ' : ''}${JSON.stringify(row)}\n`);
      }
    }
    for (const [k, g] of Object.entries(by)) rss[k as GatewayKey] = rssMiB(g.proc.pid);
  } finally {
    for (const p of procs.reverse()) await p.stop();
  }
  const med = summarize(cells, rows);
  return {
    runAt: new Date().toISOString(),
    node: process.version,
    cpus: `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}`,
    models: MODELS,
    workersPerVersion: WORKERS_PER_VERSION,
    adaptersPerModel: ADAPTERS,
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    repeats: REPEATS,
    connections: CONNECTIONS,
    cells: med,
    gateways: reports,
    rssAfterMiB: rss,
    idleMs: IDLE_MS,
    idleCpuMsPerS: idle,
  };
}

/** The data-plane gateways' instructions per request under callgrind, the same cells as the models part's. */
async function runInstructions(dir: string): Promise<CallgrindReport> {
  const all = Array.from({ length: MODELS }, (_, i) => modelName(i));
  const simPort = await freePort();
  const sim = await startFastSim(CLI, simPort, ['--served-model-name', ...all]);
  const endpoint = `http://127.0.0.1:${simPort}`;
  try {
    return await runCallgrind(
      {
        gatewayScript: GATEWAY,
        loadgen: LOADGEN,
        dir,
        gateways: { one: gatewayOptions(1, endpoint), many: gatewayOptions(MODELS, endpoint) },
        cells: [
          { name: 'one model', gateway: 'one', models: [modelName(0)] },
          { name: `${MODELS} models, spread`, gateway: 'many', models: all },
          { name: `${MODELS} models, all on one`, gateway: 'many', models: [modelName(MODELS - 1)] },
        ],
        warmupRounds: 12,
        settledWithin: 0.03,
        requests: INSTR_REQUESTS,
        rounds: INSTR_ROUNDS,
        connections: 1,
        cacheSim: INSTR_CACHE_SIM,
      },
      (line) => process.stderr.write(`${line}\n`),
    );
  } finally {
    await sim.stop();
  }
}

/** scale.json's last results, for the part this run leaves out. */
function previous(): { models?: ModelsData; instructions?: CallgrindReport; streams?: StreamsReport[] } {
  try {
    const j = JSON.parse(readFileSync(path.join(root, 'bench', 'results', 'scale.json'), 'utf8')) as Partial<ModelsData> & {
      at?: string;
      instructions?: CallgrindReport;
      streams?: StreamsReport[];
    };
    const models = j.cells !== undefined ? ({ runAt: j.runAt ?? j.at, node: j.node, cpus: j.cpus ?? '2 × AMD EPYC', ...j } as ModelsData) : undefined;
    return {
      ...(models === undefined ? {} : { models }),
      ...(j.instructions === undefined ? {} : { instructions: j.instructions }),
      ...(j.streams === undefined ? {} : { streams: j.streams }),
    };
  } catch {
    return {};
  }
}

async function main(): Promise<void> {
  const prev = previous();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-scale-'));
  let models = prev.models;
  let streams = prev.streams;
  let instructions = prev.instructions;
  try {
    if (PARTS.includes('models')) models = await runModels(dir);
    if (PARTS.includes('instructions')) {
      if (haveValgrind()) instructions = await runInstructions(dir);
      else process.stderr.write('bench:scale: valgrind (callgrind) is not installed: the instructions part is skipped, its last results kept\n');
    }
    if (PARTS.includes('streams')) {
      // the counts run now replace their last results; the others' are kept
      streams = (streams ?? []).filter((r) => !STREAMS.includes(r.settings.streams) || (r.settings.h2Connections ?? 0) !== STREAMS_H2);
      const nofile = STREAMS_NOFILE > 0 && canRaiseNofile(STREAMS_NOFILE) ? STREAMS_NOFILE : 0;
      for (const n of STREAMS) {
        const r = await runStreams(
          {
            cli: CLI,
            loadgen: STREAMS_LOADGEN,
            dir,
            streams: n,
            ratePerS: STREAMS_RATE,
            tokens: STREAMS_TOKENS,
            interTokenMs: 1000,
            durationMs: STREAMS_DURATION_MS,
            repeats: STREAMS_REPEATS,
            nofile,
            hardNofile: hardNofile(),
            h2Connections: STREAMS_H2,
            ...(CPU_PROF === undefined ? {} : { cpuProf: CPU_PROF }),
          },
          (line) => process.stderr.write(`${line}\n`),
        );
        r.runAt = new Date().toISOString();
        streams.push(r);
      }
      streams.sort((a, b) => a.settings.streams - b.settings.streams || (a.settings.h2Connections ?? 0) - (b.settings.h2Connections ?? 0));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const lines: string[] = [];
  const checks: [string, boolean, string][] = [];
  if (models !== undefined) {
    const m = modelsMarkdown(models);
    lines.push(...m.lines);
    checks.push(...m.checks);
  }
  if (instructions !== undefined) lines.push('', ...callgrindMarkdown(instructions));
  for (const r of streams ?? []) {
    const s = streamsMarkdown(r);
    if (lines.length > 0) lines.push('');
    lines.push(...s.lines);
    checks.push(...s.checks);
  }
  const md = writeResults(root, 'scale', 'issue 18', lines, checks, {
    ...(models ?? {}),
    ...(instructions === undefined ? {} : { instructions }),
    ...(streams === undefined ? {} : { streams }),
  });
  process.stdout.write(md);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:scale failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
