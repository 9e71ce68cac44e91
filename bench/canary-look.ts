// `npm run bench:look`: what a canary look over full windows (5,000 samples per version per series)
// costs the gateway's event loop, with the judge on the loop and in its worker thread
// (src/control/judge-thread.ts). While looks run every 50 ms, `perf_hooks.monitorEventLoopDelay`
// (1 ms resolution) records how late the loop is; the target is a p99 under 1 ms. Both modes judge
// the same samples and must give the same verdict (compared here too).
// Writes bench/results/canary-look.md and .json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { judgeConfig } from '../src/analysis/judge.js';
import type { Verdict } from '../src/analysis/judge-types.js';
import { judgeInProcess } from '../src/analysis/judge-packed.js';
import type { JudgeFn, PackedSamples } from '../src/analysis/judge-packed.js';
import { JudgeThread } from '../src/control/judge-thread.js';
import { mulberry32 } from '../src/domain/random.js';

const N = 5_000;
const RESOLUTION_NS = 1e6;
const LOOKS = 60;
const EVERY_MS = 50;
const OUT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'results');

function samples(seed: number, scale: number): PackedSamples {
  const u = mulberry32(seed);
  const logn = (mu: number, sigma: number): number => {
    const z = Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
    return Math.exp(mu + sigma * z);
  };
  const series = (mu: number): Float64Array => Float64Array.from({ length: N }, () => logn(mu, 0.4) * scale);
  return {
    ttftMs: series(3.5),
    tpotMs: series(2.7),
    latencyMs: series(5.5),
    quality: Float64Array.from({ length: N }, () => u()),
    requests: N,
    errors: 2,
    durationS: 600,
    outputTokens: N * 60,
  };
}

interface Run {
  mode: string;
  lookMs: { p50: number; max: number };
  delayMs: { p50: number; p99: number; max: number };
  verdict: Verdict;
}

async function run(mode: string, judge: JudgeFn, lookMs: () => number): Promise<Run> {
  const cfg = judgeConfig();
  const stable = samples(1, 1);
  const canary = samples(2, 1.02);
  // warm up (JIT, the worker's start)
  let verdict = await judge(clone(stable), clone(canary), cfg, { index: 0 });
  const h = monitorEventLoopDelay({ resolution: 1 });
  const looks: number[] = [];
  h.enable();
  for (let i = 0; i < LOOKS; i++) {
    await new Promise((r) => setTimeout(r, EVERY_MS));
    const t0 = performance.now();
    verdict = await judge(clone(stable), clone(canary), cfg, { index: i + 1 });
    looks.push(lookMs() || performance.now() - t0);
  }
  h.disable();
  looks.sort((a, b) => a - b);
  // the histogram records each sampling interval whole: the delay is what exceeds the 1 ms resolution
  const ms = (ns: number): number => Math.max(0, Math.round((ns - RESOLUTION_NS) / 1e4) / 100);
  return {
    mode,
    lookMs: { p50: round(looks[looks.length >> 1]!), max: round(looks.at(-1)!) },
    delayMs: { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) },
    verdict,
  };
}

/** The controller packs fresh copies every look (the buffers are transferred away). */
function clone(p: PackedSamples): PackedSamples {
  return { ...p, ttftMs: p.ttftMs.slice(), tpotMs: p.tpotMs.slice(), latencyMs: p.latencyMs.slice(), quality: p.quality?.slice() };
}

const round = (v: number): number => Math.round(v * 100) / 100;

const thread = new JudgeThread((m) => console.error(m));
const onLoop = await run('on the event loop (before)', judgeInProcess, () => 0);
const inThread = await run('in the judge thread', thread.judge, () => thread.lastLookMs);
await thread.close();
const same = JSON.stringify(onLoop.verdict) === JSON.stringify(inThread.verdict);

const rows = [onLoop, inThread].map((r) => `| ${r.mode} | ${r.lookMs.p50} | ${r.lookMs.max} | ${r.delayMs.p50} | ${r.delayMs.p99} | ${r.delayMs.max} |`);
const md = `# Canary look: event-loop delay

Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model ?? '?'} (load ${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')}), Node ${process.version}.
${LOOKS} looks, one every ${EVERY_MS} ms, each over ${N.toLocaleString('en')} samples per version per series (TTFT, TPOT, latency, quality) with the default judge;
event-loop delay from \`monitorEventLoopDelay\` (1 ms resolution; it records each sampling interval whole,
so the delay is the interval minus that 1 ms) over the whole run.

| judge | look p50 ms | look max ms | loop delay p50 ms | loop delay p99 ms | loop delay max ms |
|---|---|---|---|---|---|
${rows.join('\n')}

Target: loop delay p99 < 1 ms during looks — ${inThread.delayMs.p99 < 1 ? 'met' : 'NOT met'} (${inThread.delayMs.p99} ms).
Same verdict in both modes: ${same ? 'yes' : 'NO'} (${inThread.verdict.outcome}, score ${round(inThread.verdict.score)}).
`;
mkdirSync(OUT, { recursive: true });
writeFileSync(path.join(OUT, 'canary-look.md'), md);
writeFileSync(
  path.join(OUT, 'canary-look.json'),
  `${JSON.stringify({ at: new Date().toISOString(), samplesPerSeries: N, looks: LOOKS, everyMs: EVERY_MS, runs: [onLoop, inThread].map(({ verdict, ...r }) => ({ ...r, outcome: verdict.outcome })), sameVerdict: same }, null, 2)}\n`,
);
console.log(md);
if (!same) process.exitCode = 1;
