// The fuzz run against a real `glidepath up` (child process, simulated worker, both listeners on
// port 0): profiles and their environment overrides, starting and stopping the gateway, running
// the cases `concurrency` at a time for a bounded time beside the canary and the RSS sampler, and
// the summary a reader needs to replay a failure.
import { request } from 'undici';
import { DEFAULTS } from '../../src/defaults.js';
import { cleanupAll, ensureBuilt, removeDir, simConfigYaml, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { Exit, UpProcess } from '../helpers/e2e-up.js';
import { FAMILIES } from './cases.js';
import type { Family, FuzzCase, GenContext, Scale } from './cases.js';
import { runCase } from './client.js';
import type { Timing } from './client.js';
import { generate } from './generate.js';
import { judge, KNOWN_DEFECTS } from './judge.js';
import type { Problem } from './judge.js';
import { Canary, loopDelay, RssSampler } from './monitor.js';
import type { CanaryStats, RssStats } from './monitor.js';
import { preview } from './responses.js';
import { parseSeed } from './rng.js';

export interface Profile {
  name: 'short' | 'long';
  /** New cases start until this many seconds have passed. */
  seconds: number;
  /** And at most this many (Infinity: the time bound alone). */
  maxCases: number;
  /** Cases in flight at once, each on its own connection. */
  concurrency: number;
  timing: Timing;
  /** Pause between two canary requests. */
  canaryIntervalMs: number;
  /**
   * The canary's p99 bound. A healthy run shows a few milliseconds; a stalled event loop shows
   * hundreds to thousands. Generous because the machine is shared (2 cores, the fuzz clients, the
   * gateway and its worker, other engineers' builds) and because the latencies include the test
   * process's own event-loop delay (printed beside them).
   */
  canaryP99Ms: number;
  /**
   * Peak RSS over the baseline taken after warm-up. The gateway runs with
   * --initial-old-space-size=128: V8 lets ~128 MiB of old-generation garbage pile up before its
   * first full collection, and the young generation holds tens of MiB more, so garbage alone can
   * come near +150 MiB; what holds memory per connection or request shows beyond it.
   */
  rssBoundMiB: number;
  scale: Scale;
}

export const PROFILES: Record<Profile['name'], Profile> = {
  // `npm test`: a few seconds; pressure cases big enough that the defects issue 12 fixed would show
  // (a body in one-byte chunks, thousands of pipelined requests never read), small enough to be quick
  short: {
    name: 'short',
    seconds: 6,
    maxCases: Infinity,
    concurrency: 4,
    timing: { caseMs: 5_000, quietMs: 150, closeMs: 3_000 },
    canaryIntervalMs: 10,
    canaryP99Ms: 500,
    rssBoundMiB: 150,
    scale: {
      bigBody: 256 * 1024,
      maxDepth: 20_000,
      pipelineFlood: 2_000,
      oneByteChunked: 256 * 1024,
      slowReaderTokens: 1_000,
      holdMs: 200,
      pressureWeight: 0.6,
      overLimitBytesWeight: 0.2,
    },
  },
  // `npm run fuzz`: two minutes, full-size pressure cases (a 4 MiB body in 1-byte chunks, 20k pipelined requests never read)
  long: {
    name: 'long',
    seconds: 120,
    maxCases: Infinity,
    concurrency: 4,
    timing: { caseMs: 60_000, quietMs: 400, closeMs: 5_000 },
    canaryIntervalMs: 10,
    canaryP99Ms: 500,
    rssBoundMiB: 150,
    scale: {
      bigBody: DEFAULTS.gateway.maxBodyBytes - 64 * 1024,
      maxDepth: 500_000,
      pipelineFlood: 20_000,
      oneByteChunked: DEFAULTS.gateway.maxBodyBytes - 1024,
      slowReaderTokens: 7_000,
      holdMs: 3_000,
      pressureWeight: 0.6,
      overLimitBytesWeight: 1,
    },
  },
};

export interface Settings {
  profile: Profile;
  seed: number;
  /** FUZZ_CASE: run only these case indices (a replay). */
  only: number[] | undefined;
  /** FUZZ_STRICT=1: known defects fail the run too. */
  strict: boolean;
}

const DEFAULT_SEED = 0x5eed12;

function posNumber(env: NodeJS.ProcessEnv, key: string): number | undefined {
  const v = env[key];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!(n > 0)) throw new Error(`${key} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * FUZZ_PROFILE (short | long), FUZZ_SEED (number or "random"; the long profile picks a fresh one
 * by default, printed), FUZZ_SECONDS, FUZZ_CASES (cap), FUZZ_CASE (comma-separated indices to
 * replay), FUZZ_CONCURRENCY, FUZZ_STRICT.
 */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const name = env.FUZZ_PROFILE ?? 'short';
  if (name !== 'short' && name !== 'long') throw new Error(`FUZZ_PROFILE must be short or long, got ${JSON.stringify(name)}`);
  const base = PROFILES[name];
  const profile: Profile = {
    ...base,
    seconds: posNumber(env, 'FUZZ_SECONDS') ?? base.seconds,
    maxCases: posNumber(env, 'FUZZ_CASES') ?? base.maxCases,
    concurrency: Math.floor(posNumber(env, 'FUZZ_CONCURRENCY') ?? base.concurrency),
  };
  const seed = parseSeed(env.FUZZ_SEED, () => (name === 'long' ? Math.random() * 4294967296 : DEFAULT_SEED));
  const only =
    env.FUZZ_CASE === undefined || env.FUZZ_CASE === ''
      ? undefined
      : env.FUZZ_CASE.split(',').map((s) => {
          const n = Number(s.trim());
          if (!Number.isInteger(n) || n < 0) throw new Error(`FUZZ_CASE must list case indices, got ${JSON.stringify(env.FUZZ_CASE)}`);
          return n;
        });
  return { profile, seed, only, strict: env.FUZZ_STRICT === '1' };
}

// ---- the gateway ------------------------------------------------------------------------------

export const MODEL = 'fuzz';

export interface FuzzGateway {
  up: UpProcess;
  dir: string;
  dataPort: number;
  adminPort: number;
  ctx: GenContext;
}

export async function startFuzzGateway(scale: Scale): Promise<FuzzGateway> {
  ensureBuilt();
  const dir = tempDir('fuzz');
  // no interval between tokens: a valid request is answered at once, so the run measures the server, not the simulated GPU
  const yaml = simConfigYaml({ model: MODEL, versions: [{ id: 'v1', seed: 12, interTokenMs: 0 }], dataDir: dir });
  const up = await startUp({ configFile: writeConfig(dir, yaml), dataDir: dir });
  return {
    up,
    dir,
    dataPort: Number(new URL(up.dataUrl).port),
    adminPort: Number(new URL(up.adminUrl).port),
    ctx: {
      model: MODEL,
      maxBodyBytes: DEFAULTS.gateway.maxBodyBytes,
      // front.ts's default head limit (node:http's is 16 KiB too)
      maxHeaderBytes: 16 * 1024,
      adminToken: up.token,
      scale,
    },
  };
}

/** SIGTERM and wait (bounded), SIGKILL if it does not go; every process the helpers started is killed after. */
export async function stopFuzzGateway(gw: FuzzGateway | undefined, boundMs = 15_000): Promise<Exit | 'timeout' | undefined> {
  if (gw === undefined) {
    cleanupAll();
    return undefined;
  }
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([gw.up.kill('SIGTERM'), new Promise<'timeout'>((res) => (timer = setTimeout(() => res('timeout'), boundMs)))]);
  clearTimeout(timer);
  cleanupAll();
  removeDir(gw.dir);
  return r;
}

/** Lines on the gateway's stderr that mean a crash or an unhandled error (its progress lines do not). */
export function crashLines(stderr: string): string[] {
  const bad = [
    /^\s+at .+:\d+:\d+\)?$/, // a stack frame
    /^(Uncaught |Unhandled )?[A-Z][A-Za-z]*Error\b.*:/, // TypeError: …, RangeError [ERR_…]: …
    /^Error \[ERR_/,
    /FATAL ERROR|Allocation failed|heap out of memory|Segmentation fault|Aborted/,
    /glidepath: background error:/, // an unhandled rejection, logged by `up`
    /node:internal\//,
  ];
  return stderr.split('\n').filter((l) => bad.some((re) => re.test(l)));
}

// ---- the run ----------------------------------------------------------------------------------

export interface Failure {
  index: number;
  family: Family;
  label: string;
  target: 'data' | 'admin';
  problems: Problem[];
  statuses: number[];
  bytes: string;
}

export interface RunResult {
  settings: Settings;
  cases: number;
  elapsedMs: number;
  byFamily: Record<Family, number>;
  pressure: Record<string, number>;
  /** 'data 200', 'admin 401', 'data closed' (no answer, closed) … */
  statuses: Map<string, number>;
  failures: Failure[];
  /** Failures whose every problem is a known defect. */
  known: Failure[];
  observations: Map<string, number>;
  canary: CanaryStats;
  rss: RssStats;
  loop: { p99Ms: number; maxMs: number };
  /** The gateway process exited during the run. */
  died: boolean;
}

async function warmUp(gw: FuzzGateway): Promise<void> {
  for (let i = 0; i < 5; i++) await (await request(`${gw.up.dataUrl}/health`)).body.text();
  for (let i = 0; i < 3; i++) {
    const r = await request(`${gw.up.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'warm up' }], max_tokens: 2 }),
    });
    await r.body.text();
    if (r.statusCode !== 200) throw new Error(`warm-up chat completion answered ${r.statusCode}`);
  }
}

function casePreview(c: FuzzCase): string {
  return preview(Buffer.concat(c.pieces.slice(0, 8)), 300);
}

export async function runFuzz(gw: FuzzGateway, s: Settings): Promise<RunResult> {
  const p = s.profile;
  await warmUp(gw);
  const inFlight = new Map<number, string>();
  const inFlightList = (): string[] => [...inFlight].map(([i, l]) => `#${i} ${l}`);
  const rss = new RssSampler(gw.up.pid, inFlightList);
  const lag = loopDelay();
  const canary = new Canary(gw.up.dataUrl, MODEL, p.canaryIntervalMs, inFlightList);
  const r: Omit<RunResult, 'canary' | 'rss' | 'loop' | 'elapsedMs'> = {
    settings: s,
    cases: 0,
    byFamily: Object.fromEntries(FAMILIES.map((f) => [f, 0])) as Record<Family, number>,
    pressure: {},
    statuses: new Map(),
    failures: [],
    known: [],
    observations: new Map(),
    died: false,
  };
  const bump = (m: Map<string, number>, k: string): void => void m.set(k, (m.get(k) ?? 0) + 1);
  const started = performance.now();
  const deadline = started + p.seconds * 1000;
  let next = 0;
  let k = 0;
  const nextIndex = (): number | undefined => {
    if (r.died) return undefined;
    if (s.only !== undefined) return k < s.only.length ? s.only[k++] : undefined;
    if (next >= p.maxCases || performance.now() >= deadline) return undefined;
    return next++;
  };
  canary.start();
  rss.start(50);
  // one pressure case at a time: their memory does not add up, and the RSS peak names its cause
  let pressureTurn: Promise<void> = Promise.resolve();
  const worker = async (): Promise<void> => {
    for (let index = nextIndex(); index !== undefined; index = nextIndex()) {
      const c = generate(s.seed, index, gw.ctx);
      let release = (): void => undefined;
      if (c.pressure !== undefined) {
        const prev = pressureTurn;
        pressureTurn = new Promise((res) => (release = res));
        await prev;
        rss.startWindow(c.pressure);
      }
      inFlight.set(index, `${c.family}: ${c.label}`);
      const o = await runCase(c, c.target === 'data' ? gw.dataPort : gw.adminPort, p.timing);
      inFlight.delete(index);
      if (c.pressure !== undefined) rss.endWindow();
      release();
      r.cases++;
      r.byFamily[c.family]++;
      if (c.pressure !== undefined) r.pressure[c.pressure] = (r.pressure[c.pressure] ?? 0) + 1;
      for (const x of o.responses) bump(r.statuses, `${c.target} ${x.status}`);
      if (o.responses.length === 0 && c.answers.length > 0) bump(r.statuses, `${c.target} closed without an answer`);
      const v = judge(c, o, p.timing);
      for (const ob of v.observations) bump(r.observations, ob);
      if (v.problems.length > 0) {
        const f: Failure = {
          index,
          family: c.family,
          label: c.label,
          target: c.target,
          problems: v.problems,
          statuses: o.responses.map((x) => x.status),
          bytes: casePreview(c),
        };
        if (v.problems.every((x) => x.known !== undefined)) r.known.push(f);
        else r.failures.push(f);
      }
      if (gw.up.proc.exitCode !== null || gw.up.proc.signalCode !== null) r.died = true;
    }
  };
  await Promise.all(Array.from({ length: p.concurrency }, worker));
  const elapsedMs = performance.now() - started;
  return { ...r, elapsedMs, canary: await canary.stop(), rss: rss.stop(), loop: lag.stop() };
}

// ---- reporting --------------------------------------------------------------------------------

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}

export function replayCommand(s: Settings, index: number): string {
  return `FUZZ_PROFILE=${s.profile.name} FUZZ_SEED=${hex(s.seed)} FUZZ_CASE=${index} npx vitest run test/e2e/fuzz.test.ts`;
}

function histogram(m: Map<string, number>): string {
  return [...m]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, n]) => `${k}×${n}`)
    .join(', ');
}

/** One paragraph: what ran, what came back, memory, the canary. */
export function summary(r: RunResult): string {
  const p = r.settings.profile;
  const fam = FAMILIES.map((f) => `${f} ${r.byFamily[f]}`).join(', ');
  const pressure =
    Object.entries(r.pressure)
      .map(([k, n]) => `${k} ×${n}${r.rss.byPressure[k] === undefined ? '' : ` (RSS rose by up to ${r.rss.byPressure[k].toFixed(0)} MiB while one ran)`}`)
      .join(', ') || 'none';
  const known = KNOWN_DEFECTS.map((d) => [d.id, r.known.filter((f) => f.problems.some((x) => x.known === d.id)).length] as const).filter(([, n]) => n > 0);
  const rss = r.rss.available
    ? `gateway RSS baseline ${r.rss.baselineMiB.toFixed(0)} MiB, peak ${r.rss.peakMiB.toFixed(0)} MiB (+${(r.rss.peakMiB - r.rss.baselineMiB).toFixed(0)}, bound +${p.rssBoundMiB})`
    : 'gateway RSS not available (no /proc)';
  const c = r.canary;
  return (
    `fuzz (${p.name} profile, seed ${hex(r.settings.seed)}${r.settings.only ? `, cases ${r.settings.only.join(',')}` : ''}): ${r.cases} cases in ${(r.elapsedMs / 1000).toFixed(1)} s, ${p.concurrency} at a time — ${fam}; pressure cases: ${pressure}. ` +
    `Answers: ${histogram(r.statuses)}. ` +
    `${r.failures.length} failing case(s), ${r.known.length} hitting known defects${known.length ? ` (${known.map(([id, n]) => `${id} ×${n}`).join(', ')})` : ''}, ${[...r.observations.values()].reduce((a, b) => a + b, 0)} RFC observation(s). ` +
    `${rss}. ` +
    `Canary: ${c.requests} requests (${c.chats} chat completions) on ${c.connections} connection(s), p50 ${c.p50Ms.toFixed(1)} ms, p99 ${c.p99Ms.toFixed(1)} ms, max ${c.maxMs.toFixed(1)} ms (bound p99 ${p.canaryP99Ms} ms), ${c.errors.length} error(s); ` +
    `the test process's own event-loop delay p99 ${r.loop.p99Ms.toFixed(1)} ms, max ${r.loop.maxMs.toFixed(1)} ms.` +
    (r.died ? ' THE GATEWAY PROCESS EXITED DURING THE RUN.' : '')
  );
}

export function describeFailures(r: RunResult, list: Failure[], max = 10): string {
  return list
    .slice(0, max)
    .map(
      (f) =>
        `#${f.index} [${f.family} → ${f.target}] ${f.label}\n  answers: ${f.statuses.join(', ') || 'none'}\n  ${f.problems.map((x) => `${x.known ? `(known: ${x.known}) ` : ''}${x.text}`).join('\n  ')}\n  bytes: ${f.bytes}\n  replay: ${replayCommand(r.settings, f.index)}`,
    )
    .join('\n');
}

export function describeObservations(r: RunResult): string {
  return [...r.observations]
    .sort(([, a], [, b]) => b - a)
    .map(([k, n]) => `  ×${n} ${k}`)
    .join('\n');
}
