// `npm run bench:spawn` (issue 15): what starting a worker process costs the gateway's event loop.
// A host process holding a gateway-sized heap (BENCH_SPAWN_MIB, 200 MiB resident) starts BENCH_SPAWN_STARTS
// workers (a bare `node -e`) through a build's spawnChild; around each start, the longest gap between
// two turns of its event loop (every stream's tokens wait that long), against the same window with no
// start. `BENCH_BASELINE=<a built checkout>` runs that build's spawnChild too, hosts alternated.
// Writes bench/results/spawn.{json,md}.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { quantileSorted } from '../src/domain/quantile.js';
import { writeResults } from './lib/results.js';
import type { Check } from './lib/results.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const HOST = path.join(here, 'lib', 'spawn-host.js');
const MIB = Number(process.env.BENCH_SPAWN_MIB ?? 200);
const STARTS = Number(process.env.BENCH_SPAWN_STARTS ?? 20);
const ROUNDS = Number(process.env.BENCH_SPAWN_ROUNDS ?? 3);
const BASELINE = process.env.BENCH_BASELINE;

interface HostRun {
  rssMiB: number;
  gaps: number[];
  quiet: number[];
  calls: number[];
  held: number[];
  heldCpu: number[];
}
interface Row {
  build: string;
  rssMiB: number;
  firstHeld: number[];
  held: number[];
  heldCpu: number[];
  later: number[];
  quiet: number[];
  calls: number[];
}

const builds: [string, string][] = [['this build', root]];
if (BASELINE) builds.push([`baseline (${path.basename(BASELINE)})`, path.resolve(BASELINE)]);
const rows = new Map<string, Row>(
  builds.map(([name]) => [name, { build: name, rssMiB: 0, firstHeld: [], held: [], heldCpu: [], later: [], quiet: [], calls: [] }]),
);
const work = mkdtempSync(path.join(tmpdir(), 'gp-bench-spawn-'));
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, dir] of r % 2 === 0 ? builds : [...builds].reverse()) {
      const out = execFileSync(process.execPath, [HOST, dir, String(MIB), String(STARTS), work], { encoding: 'utf8', maxBuffer: 1 << 20 });
      const run = JSON.parse(out.trim().split('\n').pop() ?? '{}') as HostRun;
      const row = rows.get(name) as Row;
      row.rssMiB = Math.max(row.rssMiB, run.rssMiB);
      // a host's first start may start a helper too (this build's launcher): reported apart
      row.firstHeld.push(run.held[0] ?? NaN);
      row.held.push(...run.held.slice(1));
      row.heldCpu.push(...run.heldCpu.slice(1));
      row.later.push(...run.gaps.slice(1));
      row.quiet.push(...run.quiet);
      row.calls.push(...run.calls.slice(1));
      console.log(
        `round ${r + 1} ${name}: held p50 ${f(q(run.held.slice(1), 0.5))} ms, gap p50 ${f(q(run.gaps.slice(1), 0.5))} ms, quiet p50 ${f(q(run.quiet, 0.5))} ms`,
      );
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

function q(xs: readonly number[], p: number): number {
  return xs.length === 0
    ? NaN
    : quantileSorted(
        [...xs].sort((a, b) => a - b),
        p,
      );
}
function f(x: number): string {
  return Number.isFinite(x) ? x.toFixed(2) : '–';
}

const pct = (xs: readonly number[]): string => `${f(q(xs, 0.5))} / ${f(q(xs, 0.9))} / ${f(Math.max(...xs))}`;
const load = loadavg()
  .map((x) => x.toFixed(2))
  .join(' ');
const lines = [
  "# Starting a worker: the gateway's event loop",
  '',
  `Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model.split(' ')[0] ?? 'CPU'}, Node ${process.version}, load ${load}. A host process holding ${MIB} MiB resident (live objects, as a gateway with its streams) starts ${STARTS} workers (\`node -e\`, stopped after each) through a build's \`spawnChild\`, ${ROUNDS} hosts per build, alternated. Milliseconds, p50 / p90 / max.`,
  '',
  "- **held**: the call's synchronous part with the worker's environment copied in it (as the providers do), the event loop held by the start itself (every stream's tokens wait that long); **held CPU**: the host's CPU time in it (user + system), which a busy machine's preemption does not inflate — but which leaves out a fork's wait for its child to exec.",
  "- **gap**: the longest time between two consecutive turns of the host's loop in the 300 ms from the call; **quiet**: the same window just before, with no start. A gap also holds what the start costs the machine (the new process's boot on the same cores) and the host's own garbage collection.",
  '',
  '| build | host RSS MiB | first start: held (per host) | later starts: held | later starts: held CPU | later starts: gap | quiet: gap | later starts: until spawnChild resolves, p50 |',
  '|---|---|---|---|---|---|---|---|',
];
for (const r of rows.values()) {
  lines.push(
    `| ${r.build} | ${r.rssMiB} | ${r.firstHeld.map(f).join(', ')} | ${pct(r.held)} | ${pct(r.heldCpu)} | ${pct(r.later)} | ${pct(r.quiet)} | ${f(q(r.calls, 0.5))} |`,
  );
}
lines.push(
  '',
  "This build starts workers through a helper process (`src/providers/launcher.ts`): a host's first start also starts the helper (one fork of the host, as a start cost before); later starts are a message to the helper, whose fork and exec hold its own loop. `spawnChild` resolves once the helper answers with the pid.",
);
const me = rows.get('this build') as Row;
const base = [...rows.values()].find((r) => r.build !== 'this build');
// the bar: well under a fork's (3–10 ms on this machine), about what copying and sending the worker's environment costs
const checks: Check[] = [
  [
    "a worker's start (after the first) holds the gateway's event loop under 1 ms (p90)",
    q(me.held, 0.9) < 1,
    `${f(q(me.held, 0.9))} ms${base === undefined ? '' : ` (the baseline's fork: ${f(q(base.held, 0.9))} ms)`}`,
  ],
];
console.log(writeResults(root, 'spawn', 'issue 15', lines, checks, { mib: MIB, starts: STARTS, rounds: ROUNDS, rows: [...rows.values()] }));
