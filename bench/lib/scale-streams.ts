// bench:scale's slow-streams cell (issue 18): one `glidepath up` holding STREAMS concurrent streams at 1 token/s,
// opened at a steady rate, against the same load generator straight to the simulator (no gateway) in the same
// run; every party in its own process. Reports the gateway's added inter-token latency, TTFT by concurrency,
// errors, RSS, descriptors, CPU and event-loop delay, and the connection ceiling the gateway logged at start.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { request } from 'undici';
import { cpuMs, fastSimArgs, freePort, start, waitFor } from './proc.js';
import type { Proc } from './proc.js';
import type { Quantiles, StreamsOptions, StreamsResult } from './streams-loadgen.js';

export interface StreamsSettings {
  cli: string;
  loadgen: string;
  dir: string;
  streams: number;
  ratePerS: number;
  tokens: number;
  interTokenMs: number;
  durationMs: number;
  repeats: number;
  /** Descriptor limit the processes run under (prlimit --nofile=N:N); 0: the machine's default. */
  nofile: number;
  /** The machine's hard descriptor limit (what they run under when nofile is 0). */
  hardNofile: number;
  /** The gateway's clients speak HTTP/2 over this many connections (0 or absent, as in earlier records: HTTP/1.1, one per stream). */
  h2Connections?: number;
  /** A directory: the gateway runs under --cpu-prof and writes its profile there (BENCH_CPU_PROF). */
  cpuProf?: string;
}

export interface StreamsRound {
  target: 'direct' | 'gateway';
  round: number;
  result: StreamsResult;
  /** The gateway's (undefined for direct): highest RSS and open descriptors sampled every 500 ms, CPU over the round, event-loop delay (prom-client, 10 ms resolution). */
  rssMaxMiB?: number;
  fdsMax?: number;
  cpuMs?: number;
  loopDelayP99Ms?: number;
  loopDelayMaxMs?: number;
}

export interface StreamsReport {
  runAt?: string;
  settings: Omit<StreamsSettings, 'cli' | 'loadgen' | 'dir'>;
  /** What the gateway logged at start (`client connection ceiling`). */
  ceiling: { maxConnections: number; fdLimit: number | null } | null;
  rounds: StreamsRound[];
}

/** Whether this machine lets us run a process under `prlimit --nofile=N:N` (raising the hard limit needs CAP_SYS_RESOURCE). */
export function canRaiseNofile(n: number): boolean {
  return spawnSync('prlimit', [`--nofile=${n}:${n}`, 'true']).status === 0;
}

/** The hard descriptor limit this process runs under. */
export function hardNofile(): number {
  const m = /^Max open files\s+\d+\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
  return m ? Number(m[1]) : NaN;
}

function prlimited(nofile: number, args: string[]): [string, string[]] {
  return nofile > 0 ? ['prlimit', [`--nofile=${nofile}:${nofile}`, ...args]] : [args[0] as string, args.slice(1)];
}

function status(pid: number, field: string): number {
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

function fds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return NaN;
  }
}

/** The node process under prlimit: prlimit execs it, so the pid is the same. */
function loadgen(s: StreamsSettings, opts: StreamsOptions): Promise<StreamsResult> {
  const [cmd, args] = prlimited(s.nofile, [process.execPath, s.loadgen, JSON.stringify(opts)]);
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.once('exit', (code) => (code !== 0 ? reject(new Error(`streams-loadgen exited ${code}`)) : resolve(JSON.parse(out) as StreamsResult)));
  });
}

async function scrapeLoopDelay(url: string): Promise<{ p99: number; max: number }> {
  const r = await request(`${url}/metrics`);
  const text = await r.body.text();
  const get = (name: string): number => {
    const m = new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text);
    return m ? Number(m[1]) * 1000 : NaN;
  };
  return { p99: get('nodejs_eventloop_lag_p99_seconds'), max: get('nodejs_eventloop_lag_max_seconds') };
}

export async function runStreams(s: StreamsSettings, log: (line: string) => void): Promise<StreamsReport> {
  const procs: Proc[] = [];
  const rounds: StreamsRound[] = [];
  let ceiling: StreamsReport['ceiling'] = null;
  try {
    const simPort = await freePort();
    const [simCmd, simArgs] = prlimited(s.nofile, [
      process.execPath,
      ...fastSimArgs(s.cli, simPort, ['--model', 'slow'], s.interTokenMs, { maxNumSeqs: 2 * s.streams, kvCapacityTokens: 1_000_000_000 }),
    ]);
    procs.push(start(simCmd, simArgs));
    const sim = `http://127.0.0.1:${simPort}`;
    await waitFor(`${sim}/health`);
    // ten workers on the simulator's endpoint (they share its connections), each taking a tenth of the streams and some
    const workers = 10;
    const perWorker = Math.ceil((1.2 * s.streams) / workers);
    const [port, admin] = [await freePort(), await freePort()];
    const cfg = path.join(s.dir, 'streams.yaml');
    writeFileSync(
      cfg,
      [
        'server:',
        `  listen: 127.0.0.1:${port}`,
        `  admin_listen: 127.0.0.1:${admin}`,
        `  data_dir: ${path.join(s.dir, 'streams-data')}`,
        'gpus: { count: 1 }',
        `gateway: { connections_per_worker: ${perWorker}, worker_queue_max: ${perWorker} }`,
        'models:',
        '  - name: slow',
        '    versions:',
        '      - id: v1',
        '        warmup: { requests: 0 }',
        `        provider: { kind: static, endpoints: [${Array.from({ length: workers }, () => JSON.stringify(sim)).join(', ')}] }`,
      ].join('\n') + '\n',
    );
    const prof = s.cpuProf === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${s.cpuProf}`, `--cpu-prof-name=up-streams-${s.streams}.cpuprofile`];
    const [gwCmd, gwArgs] = prlimited(s.nofile, [process.execPath, '--initial-old-space-size=128', ...prof, s.cli, 'up', '--config', cfg]);
    const gw = start(gwCmd, gwArgs);
    procs.push(gw);
    const gwUrl = `http://127.0.0.1:${port}`;
    await waitFor(`${gwUrl}/ready`, 60_000);
    const m = /"maxConnections":(\d+),"fdLimit":(\d+|null)[^\n]*client connection ceiling/.exec(gw.output());
    if (m) ceiling = { maxConnections: Number(m[1]), fdLimit: m[2] === 'null' ? null : Number(m[2]) };
    log(`streams: gateway ceiling ${JSON.stringify(ceiling)}`);
    for (let i = 0; i < s.repeats; i++) {
      const order: ('direct' | 'gateway')[] = i % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct'];
      for (const target of order) {
        const opts: StreamsOptions = {
          url: target === 'direct' ? sim : gwUrl,
          model: 'slow',
          streams: s.streams,
          ratePerS: s.ratePerS,
          tokens: s.tokens,
          durationMs: s.durationMs,
          ...(target === 'gateway' && (s.h2Connections ?? 0) > 0 ? { h2Connections: s.h2Connections } : {}),
        };
        if (target === 'direct') {
          const result = await loadgen(s, opts);
          rounds.push({ target, round: i, result });
        } else {
          await scrapeLoopDelay(gwUrl); // resets prom-client's event-loop histogram
          let rssMax = 0;
          let fdsMax = 0;
          const sample = (): void => {
            rssMax = Math.max(rssMax, status(gw.pid, 'VmRSS') / 1024);
            fdsMax = Math.max(fdsMax, fds(gw.pid));
          };
          const timer = setInterval(sample, 500);
          const cpu0 = cpuMs(gw.pid);
          const result = await loadgen(s, opts);
          clearInterval(timer);
          sample();
          const loop = await scrapeLoopDelay(gwUrl);
          rounds.push({ target, round: i, result, rssMaxMiB: rssMax, fdsMax, cpuMs: cpuMs(gw.pid) - cpu0, loopDelayP99Ms: loop.p99, loopDelayMaxMs: loop.max });
        }
        const r = rounds[rounds.length - 1] as StreamsRound;
        log(`streams ${JSON.stringify({ ...r, result: { ...r.result, ttftByConcurrency: undefined } })}`);
      }
    }
  } finally {
    for (const p of procs.reverse()) await p.stop();
  }
  const { cli: _c, loadgen: _l, dir: _d, cpuProf: _p, ...settings } = s;
  void [_c, _l, _d, _p];
  return { settings, ceiling, rounds };
}

function f(n: number | undefined, d = 1): string {
  return n !== undefined && Number.isFinite(n) ? n.toFixed(d) : '–';
}

function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const h = (s.length - 1) / 2;
  return ((s[Math.floor(h)] as number) + (s[Math.ceil(h)] as number)) / 2;
}

function spread(xs: number[], d = 1): string {
  const s = xs.filter((x) => Number.isFinite(x));
  return s.length === 0 ? '–' : `${f(median(s), d)} (${f(Math.min(...s), d)}–${f(Math.max(...s), d)})`;
}

/** The cell's Markdown and its targets. */
export function streamsMarkdown(r: StreamsReport): { lines: string[]; checks: [string, boolean, string][] } {
  const s = r.settings;
  const by = (t: 'direct' | 'gateway'): StreamsRound[] => r.rounds.filter((x) => x.target === t);
  const [d, g] = [by('direct'), by('gateway')];
  const q = (rs: StreamsRound[], pick: (x: StreamsResult) => Quantiles, k: keyof Quantiles): number[] => rs.map((x) => pick(x.result)[k]);
  const added = (pick: (x: StreamsResult) => Quantiles, k: keyof Quantiles): number => median(q(g, pick, k)) - median(q(d, pick, k));
  const h2 = s.h2Connections ?? 0;
  const over = h2 > 0 ? ` over ${h2} HTTP/2 connections` : '';
  const lines: string[] = [
    `## Slow streams: ${s.streams.toLocaleString('en')} concurrent streams through one gateway${over}`,
    '',
    `Run ${r.runAt ?? '–'}. One \`glidepath up\` (10 static workers on one simulator at ${s.interTokenMs} ms/token, no jitter) against the same load generator straight to the simulator; simulator, gateway and load generator each in its own process, ${s.nofile > 0 ? `each under \`prlimit --nofile=${s.nofile}:${s.nofile}\`` : `under the machine's descriptor limit of ${s.hardNofile} (soft = hard; \`prlimit\` could not raise it: this container lacks CAP_SYS_RESOURCE)`}. ${h2 > 0 ? `Clients of the gateway speak HTTP/2 with prior knowledge, ${s.streams.toLocaleString('en')} streams spread over ${h2} connections (one descriptor per stream in the gateway, its worker's; the direct runs stay HTTP/1.1, a connection per stream); streams` : `${s.streams.toLocaleString('en')} connections`} open one after another at ${s.ratePerS}/s (all open after ${f(s.streams / s.ratePerS, 0)} s); each streams ${s.tokens}-token completions one after another, so streams keep starting at about that rate once all are open; no stream starts after ${s.durationMs / 1000} s. ${s.repeats} rounds of each target, interleaved; figures are medians over the rounds with the range in brackets. The machine has 2 cores shared with other work (a browser test run at times), so single rounds are noisy. The gateway logged at start: ceiling ${r.ceiling?.maxConnections ?? '?'} client connections from a descriptor limit of ${r.ceiling?.fdLimit ?? '?'}.`,
    '',
    '| | direct | through the gateway | added by the gateway |',
    '|---|---|---|---|',
  ];
  const row = (name: string, pick: (x: StreamsResult) => Quantiles, k: keyof Quantiles): void => {
    lines.push(`| ${name} | ${spread(q(d, pick, k))} | ${spread(q(g, pick, k))} | ${f(added(pick, k), 1)} |`);
  };
  row('inter-token ms p50, all open', (x) => x.itlSteady, 'p50');
  row('inter-token ms p99, all open', (x) => x.itlSteady, 'p99');
  row('inter-token ms p99.9, all open', (x) => x.itlSteady, 'p999');
  row('inter-token ms p99, while opening', (x) => x.itlOpening, 'p99');
  row('inter-token ms max (all)', (x) => (x.itlSteady.max > x.itlOpening.max ? x.itlSteady : x.itlOpening), 'max');
  row('TTFT ms p50', (x) => x.ttft, 'p50');
  row('TTFT ms p99', (x) => x.ttft, 'p99');
  const num = (rs: StreamsRound[], pick: (x: StreamsRound) => number | undefined, dd = 0): string =>
    spread(
      rs.map((x) => pick(x) ?? NaN),
      dd,
    );
  lines.push(`| streams completed | ${num(d, (x) => x.result.requests)} | ${num(g, (x) => x.result.requests)} | |`);
  lines.push(`| errors (all rounds) | ${d.reduce((a, x) => a + x.result.errors, 0)} | ${g.reduce((a, x) => a + x.result.errors, 0)} | |`);
  lines.push(`| most streams in flight | ${num(d, (x) => x.result.maxInFlight)} | ${num(g, (x) => x.result.maxInFlight)} | |`);
  lines.push(`| gateway RSS MiB, highest | | ${num(g, (x) => x.rssMaxMiB)} | |`);
  lines.push(`| gateway open descriptors, highest | | ${num(g, (x) => x.fdsMax)} | |`);
  lines.push(`| gateway CPU s per round | | ${num(g, (x) => (x.cpuMs ?? NaN) / 1000, 1)} | |`);
  lines.push(`| gateway event-loop delay ms p99 / max | | ${num(g, (x) => x.loopDelayP99Ms, 1)} / ${num(g, (x) => x.loopDelayMaxMs, 1)} | |`);
  lines.push('', '| TTFT ms by streams in flight at start | direct p50 / p99 | gateway p50 / p99 |', '|---|---|---|');
  const bands = (d[0] ?? g[0])?.result.ttftByConcurrency ?? [];
  bands.forEach((b, i) => {
    const cell = (rs: StreamsRound[]): string => {
      const pick = (k: keyof Quantiles): number[] => rs.map((x) => (x.result.ttftByConcurrency[i] as Quantiles)[k]);
      return `${f(median(pick('p50')), 1)} / ${f(median(pick('p99')), 1)}`;
    };
    lines.push(`| ${b.from.toLocaleString('en')}–${b.to.toLocaleString('en')} | ${cell(d)} | ${cell(g)} |`);
  });
  const errors = g.reduce((a, x) => a + x.result.errors, 0);
  const ttftBands = g.map((x) => x.result.ttftByConcurrency.map((b) => b.p99));
  const lastBand = median(ttftBands.map((b) => b[b.length - 1] ?? NaN));
  const firstBand = median(ttftBands.map((b) => b[0] ?? NaN));
  const addedTtft = median(g.map((x) => x.result.ttft.p99)) - median(d.map((x) => x.result.ttft.p99));
  const checks: [string, boolean, string][] = [
    [
      `${s.streams.toLocaleString('en')} slow streams${over}: every stream served, no error`,
      errors === 0 && g.every((x) => x.result.maxInFlight >= s.streams),
      `${errors} errors; most in flight ${num(g, (x) => x.result.maxInFlight)}`,
    ],
    [
      `${s.streams.toLocaleString('en')} slow streams${over}: gateway RSS under 1 GiB`,
      Math.max(...g.map((x) => x.rssMaxMiB ?? Infinity)) < 1024,
      `highest ${f(Math.max(...g.map((x) => x.rssMaxMiB ?? NaN)), 0)} MiB`,
    ],
    [
      `${s.streams.toLocaleString('en')} slow streams${over}: added inter-token p99 under 5 ms (all open)`,
      added((x) => x.itlSteady, 'p99') < 5,
      `${f(
        added((x) => x.itlSteady, 'p99'),
        1,
      )} ms`,
    ],
    [
      `${s.streams.toLocaleString('en')} slow streams${over}: added inter-token p99 under 5 ms (while opening)`,
      added((x) => x.itlOpening, 'p99') < 5,
      `${f(
        added((x) => x.itlOpening, 'p99'),
        1,
      )} ms`,
    ],
    [
      `${s.streams.toLocaleString('en')} slow streams${over}: TTFT unaffected by concurrency (p99 of the fullest band within 5 ms of the emptiest; added p99 under 5 ms)`,
      lastBand - firstBand < 5 && addedTtft < 5,
      `gateway p99 ${f(firstBand, 1)} ms at ${bands[0]?.from ?? 0}–${bands[0]?.to ?? 0} in flight, ${f(lastBand, 1)} ms at the fullest; added p99 ${f(addedTtft, 1)} ms`,
    ],
  ];
  return { lines, checks };
}
