// bench:scale's instruction counts (issue 18): the data-plane gateway (scale-gateway.ts) run under valgrind's
// callgrind, which counts the instructions the process executes (every thread: JIT code, the compiler, GC,
// libuv, the kernel's share excluded). CPU time on a shared 2-core machine spreads by ±20 % between rounds of
// one cell; a count does not depend on what else runs, so it tells real extra work per request (instructions)
// from the cost of the same work touching more memory (cache misses: the CPU figure minus what the count explains).
// Each gateway is warmed up per cell; then, in rounds, callgrind's counters are zeroed, a fixed number of
// requests is sent, and the counters are dumped and read.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { runLoadgen, start, waitFor } from './proc.js';
import type { Proc } from './proc.js';
import type { LoadResult } from './loadgen.js';
import type { ScaleGatewayOptions, ScaleGatewayReport } from './scale-gateway.js';
import { median } from './scale-models.js';

export interface CallgrindSettings {
  gatewayScript: string;
  loadgen: string;
  /** Where callgrind writes its dumps and logs. */
  dir: string;
  /** The gateways' options by name (`one`, `many`); their port is chosen by the process. */
  gateways: Record<string, ScaleGatewayOptions>;
  cells: { name: string; gateway: string; models: string[] }[];
  /** Warm-up rounds (every cell, `requests` each) at most: they end at the first in which no cell's count moved by more than `settledWithin`. */
  warmupRounds: number;
  settledWithin: number;
  /** Requests counted per cell and round. */
  requests: number;
  rounds: number;
  /** Load-generator connections: 1 sends one request at a time, so no two requests share an event-loop turn. */
  connections: number;
  /** Also simulate the caches (callgrind --cache-sim=yes: L1 and last-level misses, read and write). */
  cacheSim: boolean;
}

/** One cell's counts per request in one round (events as callgrind names them: Ir, and with the cache simulation D1mr, DLmr, …). */
export interface CallgrindRow {
  cell: string;
  round: number;
  requests: number;
  errors: number;
  /** Counted events per request, over the requests of the round (idle counts included: see idlePerS). */
  perRequest: Record<string, number>;
  /** Wall time of the round (under valgrind, tens of times longer than without). */
  elapsedMs: number;
}

export interface CallgrindReport {
  settings: Omit<CallgrindSettings, 'gatewayScript' | 'loadgen' | 'dir' | 'gateways'>;
  /** V8 flags the gateways ran with (see FLAGS). */
  nodeFlags: string[];
  /** Each gateway's events per wall second with no traffic (its timers), over IDLE_MS. */
  idlePerS: Record<string, Record<string, number>>;
  /** Instructions per request of each warm-up round, and whether the counts settled before the last (absent in results from before it was kept). */
  warmup?: { rounds: { cell: string; round: number; ir: number }[]; settled: boolean };
  rows: CallgrindRow[];
}

/**
 * A fixed seed for Math.random (the picker's draws) makes two processes do the same work; --single-threaded
 * keeps V8's compiler and GC on the main thread, where they run at the same point of the same request in every
 * run instead of whenever a helper thread got the CPU. Without --no-memory-reducer --no-flush-bytecode, a
 * gateway that sat idle while the other one's cell ran (under valgrind, 10–20 s) had its compiled code flushed by
 * the memory reducer's collections and compiled it all again: 391k instructions per request right after 87k.
 */
const FLAGS = ['--expose-gc', '--initial-old-space-size=128', '--random-seed=1', '--single-threaded', '--no-memory-reducer', '--no-flush-bytecode'];
const IDLE_MS = 5_000;

export function haveValgrind(): boolean {
  return spawnSync('valgrind', ['--version']).status === 0 && spawnSync('callgrind_control', ['-h']).status === 0;
}

/** Run a callgrind_control command on `pid` (zero, dump, instrumentation on). */
function control(pid: number, args: string[]): void {
  const r = spawnSync('callgrind_control', [...args, String(pid)], { encoding: 'utf8' });
  if (r.status !== 0 || !/OK/.test(r.stdout)) throw new Error(`callgrind_control ${args.join(' ')} ${pid}: ${r.stdout}${r.stderr}`);
}

/** The newest dump of `pid` in `dir`: callgrind writes `cg.<pid>`, then `cg.<pid>.1`, `.2`, … per dump. */
function lastDump(dir: string, pid: number): Record<string, number> {
  const files = readdirSync(dir).filter((f) => f === `cg.${pid}` || f.startsWith(`cg.${pid}.`));
  const n = (f: string): number => Number(f.split('.')[2] ?? 0);
  const last = files.sort((a, b) => n(a) - n(b)).at(-1);
  if (last === undefined) throw new Error(`no callgrind dump of ${pid} in ${dir}`);
  const text = readFileSync(path.join(dir, last), 'utf8');
  const events = /^events: (.+)$/m.exec(text)?.[1]?.split(' ') ?? [];
  const totals = /^(?:summary|totals): (.+)$/m.exec(text)?.[1]?.split(' ').map(Number) ?? [];
  return Object.fromEntries(events.map((e, i) => [e, totals[i] ?? 0]));
}

/** Zero the counters, run `what`, dump them: the events `what` cost the process. */
async function counted(dir: string, pid: number, what: () => Promise<void>): Promise<Record<string, number>> {
  control(pid, ['-z']);
  await what();
  control(pid, ['-d']);
  return lastDump(dir, pid);
}

async function startGateway(s: CallgrindSettings, name: string, o: ScaleGatewayOptions): Promise<{ proc: Proc; port: number }> {
  const vg = [
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${path.join(s.dir, 'cg.%p')}`,
    `--log-file=${path.join(s.dir, `valgrind-${name}.log`)}`,
    ...(s.cacheSim ? ['--cache-sim=yes'] : []),
  ];
  const proc = start('valgrind', [...vg, process.execPath, ...FLAGS, s.gatewayScript, JSON.stringify(o)]);
  const until = Date.now() + 300_000;
  while (!proc.output().includes('\n')) {
    if (proc.child.exitCode !== null || Date.now() > until) throw new Error(`scale-gateway under valgrind: ${proc.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const report = JSON.parse(proc.output().slice(0, proc.output().indexOf('\n'))) as ScaleGatewayReport;
  await waitFor(`http://127.0.0.1:${report.port}/health`, 300_000);
  // instrumented from here on: the warm-up's code is translated before anything is counted
  control(proc.pid, ['-i', 'on']);
  return { proc, port: report.port };
}

export async function runCallgrind(s: CallgrindSettings, log: (line: string) => void): Promise<CallgrindReport> {
  const procs: Proc[] = [];
  const rows: CallgrindRow[] = [];
  const idle: Record<string, Record<string, number>> = {};
  const warmup: NonNullable<CallgrindReport['warmup']> = { rounds: [], settled: false };
  try {
    const gws: Record<string, { proc: Proc; port: number }> = {};
    for (const [name, o] of Object.entries(s.gateways)) {
      gws[name] = await startGateway(s, name, o);
      procs.push((gws[name] as { proc: Proc }).proc);
    }
    const load = (cell: CallgrindSettings['cells'][number], requests: number): Promise<LoadResult> =>
      runLoadgen<LoadResult>(s.loadgen, {
        url: `http://127.0.0.1:${(gws[cell.gateway] as { port: number }).port}`,
        model: cell.models[0],
        models: cell.models,
        connections: s.connections,
        durationMs: 3_600_000,
        warmupMs: 0,
        requests,
        stream: false,
        maxTokens: 16,
      });
    // before any traffic: right after a warm-up, 5 s idle under valgrind was followed by a round that compiled again
    for (const [name, g] of Object.entries(gws)) {
      const c = await counted(s.dir, g.proc.pid, () => new Promise((r) => setTimeout(r, IDLE_MS)));
      idle[name] = Object.fromEntries(Object.entries(c).map(([e, v]) => [e, (v * 1000) / IDLE_MS]));
      log(`callgrind idle ${name}: ${JSON.stringify(idle[name])}`);
    }
    const round = async (n: number, measured: boolean): Promise<CallgrindRow[]> => {
      const out: CallgrindRow[] = [];
      for (let k = 0; k < s.cells.length; k++) {
        const cell = s.cells[(n + k) % s.cells.length] as CallgrindSettings['cells'][number];
        const pid = (gws[cell.gateway] as { proc: Proc }).proc.pid;
        let r: LoadResult | undefined;
        const t0 = Date.now();
        const c = await counted(s.dir, pid, async () => {
          r = await load(cell, s.requests);
        });
        const res = r as LoadResult;
        const row: CallgrindRow = {
          cell: cell.name,
          round: n,
          requests: res.requests,
          errors: res.errors,
          perRequest: Object.fromEntries(Object.entries(c).map(([e, v]) => [e, v / Math.max(1, res.requests + res.errors)])),
          elapsedMs: Date.now() - t0,
        };
        out.push(row);
        log(`callgrind ${measured ? '' : 'warm-up '}${JSON.stringify(row)}`);
      }
      return out;
    };
    // V8 keeps compiling for thousands of requests, and again whenever a cell takes paths the last one did not
    // (new client connections, another model's objects): it re-optimises what it had optimised on too little
    // feedback. Under valgrind that shows: one cell counted 399k, 209k, 111k per request over three rounds after
    // 8,000 requests of warm-up. So every cell runs, in rotated rounds, until no cell's count moves by more
    // than settledWithin from its last round; only then are rounds counted.
    const last = new Map<string, number>();
    for (let n = 0; n < s.warmupRounds && !warmup.settled; n++) {
      let settled = true;
      for (const row of await round(n, false)) {
        const ir = row.perRequest.Ir ?? NaN;
        warmup.rounds.push({ cell: row.cell, round: n, ir });
        const prev = last.get(row.cell);
        if (prev === undefined || !(Math.abs(ir / prev - 1) <= s.settledWithin)) settled = false;
        last.set(row.cell, ir);
      }
      warmup.settled = settled;
    }
    for (let n = 0; n < s.rounds; n++) rows.push(...(await round(n, true)));
  } finally {
    for (const p of procs.reverse()) await p.stop();
  }
  const { gatewayScript: _g, loadgen: _l, dir: _d, gateways: _w, ...settings } = s;
  return { settings, nodeFlags: FLAGS, idlePerS: idle, warmup, rows };
}

/** The instructions part's Markdown: per cell, the median over rounds of each count per request, against the first cell's. */
export function callgrindMarkdown(r: CallgrindReport): string[] {
  const cells = [...new Set(r.rows.map((x) => x.cell))];
  const of = (cell: string, e: string): number[] => r.rows.filter((x) => x.cell === cell).map((x) => x.perRequest[e] ?? NaN);
  const sim = r.settings.cacheSim;
  // D1 and LL misses, reads and writes together (callgrind: D1mr + D1mw, DLmr + DLmw)
  const d1 = (cell: string): number[] => of(cell, 'D1mr').map((v, i) => v + (of(cell, 'D1mw')[i] ?? NaN));
  const ll = (cell: string): number[] => of(cell, 'DLmr').map((v, i) => v + (of(cell, 'DLmw')[i] ?? NaN));
  const base = cells[0] as string;
  const vs = (a: number, b: number): string => (a === b ? '–' : `${a >= b ? '+' : ''}${(100 * (a / b - 1)).toFixed(1)} %`);
  const k = (n: number): string => (Number.isFinite(n) ? `${(n / 1000).toFixed(1)}k` : '–');
  const lines = [
    '## Instructions per request (data plane, callgrind)',
    '',
    `The same two data-plane gateways (\`bench/lib/scale-gateway.ts\`) run under valgrind's callgrind, which counts the instructions the process executes — every thread of it: the JIT's code, V8's compiler and garbage collector, libuv; not the kernel's — whatever else the machine is doing. Node flags: \`${r.nodeFlags.join(' ')}\` (a fixed Math.random seed; compiler and GC on the main thread; no memory reducer or bytecode flushing, which recompiled a gateway's code after it sat idle). One connection (one request at a time: no two requests share an event-loop turn, so batching does not move the count). Every cell is warmed up in rotated rounds of ${r.settings.requests} requests until no cell's count moves by more than ${100 * r.settings.settledWithin} % from its last round (at most ${r.settings.warmupRounds} rounds: V8 re-optimises for thousands of requests, and again when a cell takes paths the last did not); then ${r.settings.rounds} rounds of ${r.settings.requests} requests per cell, counters zeroed before and dumped after each. Figures are medians over the rounds, per request.${sim ? " Cache misses are callgrind's simulation of this CPU's L1 data cache and last-level cache for this process alone (no other process, no TLB): they show whether the same work touches more memory, not what a miss costs." : ''}`,
    '',
    `| cell | instructions/request (rounds) | vs one model |${sim ? ' L1 data misses/request | vs one model | last-level misses/request |' : ''}`,
    `|---|---|---|${sim ? '---|---|---|' : ''}`,
  ];
  for (const c of cells) {
    const ir = median(of(c, 'Ir'));
    const rounds = of(c, 'Ir').map(k).join(', ');
    const row = `| ${c} | ${k(ir)} (${rounds}) | ${vs(ir, median(of(base, 'Ir')))} |`;
    lines.push(sim ? `${row} ${median(d1(c)).toFixed(0)} | ${vs(median(d1(c)), median(d1(base)))} | ${median(ll(c)).toFixed(1)} |` : row);
  }
  const idle = Object.entries(r.idlePerS).map(([g, v]) => `${g} ${k(v.Ir ?? NaN)}`);
  const w = r.warmup;
  if (w !== undefined) {
    const byCell = cells.map(
      (c) =>
        `${c}: ${w.rounds
          .filter((x) => x.cell === c)
          .map((x) => k(x.ir))
          .join(', ')}`,
    );
    const how = w.settled
      ? 'settled'
      : `not settled within ${100 * r.settings.settledWithin} % after ${r.settings.warmupRounds} rounds (rounds that recompiled, tens of thousands of instructions a request more, kept coming)`;
    lines.push('', `Warm-up, instructions per request by round: ${byCell.join('; ')} — ${how}.`);
  }
  lines.push(
    '',
    `Idle (before the warm-up, no traffic): instructions per second, ${idle.join(', ')} — included in the counts above (a round lasts a few seconds under valgrind; ~1 % of a request's count, the same for both gateways).`,
  );
  return lines;
}
