// `npm run bench:processes` (issue 18): what a second gateway process buys on this machine. HAProxy with
// one and two threads against Glidepath's data plane in one process and in two processes sharing one port
// by Node's cluster module (the primary handing out connections round-robin, or the kernel choosing the
// accepting process), all in front of one simulator at zero delay. S1: small non-streaming requests;
// S2: 64-token streams; 64 connections from a load generator in its own process. Proxy CPU is the sum of
// its processes' utime + stime over the measured window (the cluster primary included). Cells
// interleaved in rotated order, REPEATS rounds, medians. Writes bench/results/processes.{json,md}.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, freePort, start, runLoadgen, startFastSim } from './lib/proc.js';
import { haproxy } from './lib/haproxy.js';
import { writeResults } from './lib/results.js';
import type { Check } from './lib/results.js';
import type { Proc } from './lib/proc.js';
import type { LoadResult } from './lib/loadgen.js';
import type { ClusterGatewayOptions } from './lib/cluster-gateway.js';
import { quantileSorted } from '../src/domain/quantile.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const CLI = path.join(root, 'dist', 'cli', 'main.js');
const LOADGEN = path.join(here, 'lib', 'loadgen.js');
const GATEWAY = path.join(here, 'lib', 'cluster-gateway.js');
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1_500);
const REPEATS = Math.max(1, Number(process.env.BENCH_REPEATS ?? 4));
const CONNECTIONS = 64;

interface Target {
  name: string;
  port: number;
  /** Every process whose CPU counts (none for the simulator reached directly). */
  pids: number[];
}

interface Row {
  scenario: string;
  target: string;
  round: number;
  rps: number;
  tokensPerS: number;
  cpuPerReqUs: number;
  p50: number;
  p99: number;
  errors: number;
}

/** The cluster gateway, resolved once it printed its processes' pids (every one listening). */
function clusterGateway(o: ClusterGatewayOptions): Promise<{ proc: Proc; pids: number[] }> {
  const proc = start(process.execPath, [GATEWAY, JSON.stringify(o)]);
  return new Promise((resolve, reject) => {
    const onData = (): void => {
      const line = proc
        .output()
        .split('\n')
        .find((l) => l.startsWith('{"pids"'));
      if (line === undefined) return;
      proc.child.stdout?.off('data', onData);
      resolve({ proc, pids: (JSON.parse(line) as { pids: number[] }).pids });
    };
    proc.child.stdout?.on('data', onData);
    proc.child.once('exit', (code) => reject(new Error(`cluster-gateway exited ${code}: ${proc.output()}`)));
  });
}

async function measure(scenario: string, stream: boolean, t: Target, round: number): Promise<Row> {
  const lg = runLoadgen<LoadResult>(LOADGEN, {
    url: `http://127.0.0.1:${t.port}`,
    model: 'bench',
    connections: CONNECTIONS,
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    stream,
    maxTokens: stream ? 64 : 16,
  });
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const cpu = () => t.pids.reduce((a, pid) => a + cpuMs(pid), 0);
  const c0 = cpu();
  const r = await lg;
  const used = cpu() - c0;
  const lat = [...r.latencyMs].sort((a, b) => a - b);
  const s = r.elapsedMs / 1000;
  return {
    scenario,
    target: t.name,
    round,
    rps: r.requests / s,
    tokensPerS: r.tokens / s,
    cpuPerReqUs: t.pids.length === 0 ? NaN : (used * 1000) / Math.max(1, r.requests),
    p50: quantileSorted(lat, 0.5),
    p99: quantileSorted(lat, 0.99),
    errors: r.errors,
  };
}

function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return v.length === 0 ? NaN : quantileSorted(v, 0.5);
}

const f = (n: number, d = 1): string => (Number.isFinite(n) ? n.toFixed(d) : '–');

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-processes-'));
  const procs: Proc[] = [];
  const rows: Row[] = [];
  try {
    const simPort = await freePort();
    procs.push(await startFastSim(CLI, simPort, ['--model', 'bench']));
    const upstream = `http://127.0.0.1:${simPort}`;
    const targets: Target[] = [{ name: 'direct', port: simPort, pids: [] }];
    for (const threads of [1, 2]) {
      const port = await freePort();
      const p = await haproxy(port, simPort, dir, threads);
      procs.push(p);
      targets.push({ name: `haproxy ${threads} thread${threads > 1 ? 's' : ''}`, port, pids: [p.pid] });
    }
    for (const [name, processes, policy] of [
      ['glidepath 1 process', 1, 'rr'],
      ['glidepath 2 processes (cluster, round-robin)', 2, 'rr'],
      ['glidepath 2 processes (cluster, kernel)', 2, 'none'],
    ] as const) {
      const port = await freePort();
      const g = await clusterGateway({ port, upstream, processes, policy });
      procs.push(g.proc);
      targets.push({ name, port, pids: g.pids });
    }
    for (const [scenario, stream] of [
      ['S1 non-streaming', false],
      ['S2 64-token streams', true],
    ] as const) {
      for (let i = 0; i < REPEATS; i++) {
        for (let k = 0; k < targets.length; k++) rows.push(await measure(scenario, stream, targets[(i + k) % targets.length] as Target, i));
      }
    }
  } finally {
    for (const p of procs.reverse()) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  report(rows);
}

function report(rows: Row[]): void {
  const cell = (sc: string, t: string) => rows.filter((r) => r.scenario.startsWith(sc) && r.target === t);
  const med = (sc: string, t: string, k: 'rps' | 'tokensPerS' | 'cpuPerReqUs' | 'p50' | 'p99') => median(cell(sc, t).map((r) => r[k]));
  const names = [...new Set(rows.map((r) => r.target))];
  const lines = [
    '# Gateway processes against HAProxy threads',
    '',
    `Run ${new Date().toISOString()} on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}. One simulator at zero delay; the load generator (${CONNECTIONS} connections) in its own process; ${DURATION_MS} ms measured after ${WARMUP_MS} ms warm-up per cell, ${REPEATS} rounds interleaved in rotated order, medians. Glidepath here is its data plane alone (\`bench/lib/cluster-gateway.ts\`): \`glidepath up\` runs one process; several per host are cluster-mode replicas (docs/cluster.md). Everything shares the machine's 2 cores, the simulator and the load generator included: on this machine a second process competes with them for the same cores.`,
    '',
    '| scenario | target | req/s | tokens/s | proxy CPU µs/request | p50 ms | p99 ms | errors |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const sc of ['S1', 'S2']) {
    for (const t of names) {
      const c = cell(sc, t);
      lines.push(
        `| ${c[0]?.scenario ?? sc} | ${t} | ${f(med(sc, t, 'rps'), 0)} | ${f(med(sc, t, 'tokensPerS'), 0)} | ${f(med(sc, t, 'cpuPerReqUs'), 0)} | ${f(med(sc, t, 'p50'), 2)} | ${f(med(sc, t, 'p99'), 2)} | ${c.reduce((a, r) => a + r.errors, 0)} |`,
      );
    }
  }
  const ratio = (sc: string, a: string, b: string) => med(sc, a, sc === 'S1' ? 'rps' : 'tokensPerS') / med(sc, b, sc === 'S1' ? 'rps' : 'tokensPerS');
  const two = 'glidepath 2 processes (cluster, round-robin)';
  const twoK = 'glidepath 2 processes (cluster, kernel)';
  const checks: Check[] = [];
  for (const sc of ['S1', 'S2']) {
    checks.push(
      [`(report) ${sc}: Glidepath 2 processes (round-robin) / HAProxy 2 threads`, true, `${f(ratio(sc, two, 'haproxy 2 threads'), 2)} ×`],
      [`(report) ${sc}: Glidepath 2 processes (kernel) / HAProxy 2 threads`, true, `${f(ratio(sc, twoK, 'haproxy 2 threads'), 2)} ×`],
      [`(report) ${sc}: Glidepath 1 process / HAProxy 1 thread`, true, `${f(ratio(sc, 'glidepath 1 process', 'haproxy 1 thread'), 2)} ×`],
      [
        `(report) ${sc}: Glidepath 2 processes (best) / 1 process`,
        true,
        `${f(Math.max(ratio(sc, two, 'glidepath 1 process'), ratio(sc, twoK, 'glidepath 1 process')), 2)} ×`,
      ],
    );
  }
  const md = writeResults(root, 'processes', 'issue 18', lines, checks, { durationMs: DURATION_MS, repeats: REPEATS, connections: CONNECTIONS, rows });
  process.stdout.write(md);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:processes failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
