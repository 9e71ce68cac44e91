// `npm run bench:rollback`: how fast an instant rollback takes effect, against a real `glidepath up`
// with two loaded simulator versions (v2 active, v1 the warm standby), on loopback.
//
//   (a) route switch   — `elapsed_ms` the API reports: the data plane's one reference swap.
//   (b) CLI            — `glidepath rollback --instant` spawned as a process → the first response
//                        served by the standby (x-glidepath-version) reaching a polling client.
//   (c) admin API      — the same without the process spawn: POST …/rollback → first standby response.
//   (d) sleeping standby (time-shared): v1 asleep at level 1; rollback wakes it first.
//   baselines          — spawning `node -e 0` (the floor under (b)), and `DataPlane.setRoute` called
//                        in this process (the floor under (a)), in the same run.
//
// Each iteration rolls back v2 → v1, then swaps back to v2 (waiting until the pollers see v2 again).
// Usage: npm run bench:rollback [-- --iterations 50 --switch-iterations 400 --sleep-iterations 20 --pollers 2]
// Writes bench/results/rollback.md and bench/results/rollback.json.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, release, platform } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { CLI, ROOT, cleanupAll, removeDir, simConfigYaml, startUp, tempDir, trackWorkerPids, writeConfig } from '../test/helpers/e2e-up.js';
import type { UpProcess, WorkerView } from '../test/helpers/e2e-up.js';
import { parseConfig } from '../src/config/load.js';
import { quantileSorted } from '../src/domain/quantile.js';
import { DataPlane } from '../src/gateway/dataplane.js';
import { Telemetry } from '../src/telemetry/telemetry.js';

const MODEL = 'chat';
const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : def;
  if (!Number.isInteger(v) || v <= 0) throw new Error(`--${name} must be a positive integer`);
  return v;
};
const ITER = arg('iterations', 50);
const SLEEP_ITER = arg('sleep-iterations', 20);
const SWITCH_ITER = arg('switch-iterations', 400);
const POLLERS = arg('pollers', 2);

interface RollbackReply {
  rolled_back_to: string;
  elapsed_ms: number;
  wake_ms: number;
  total_ms: number;
  method: string;
}

interface Stats {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** Percentiles as everywhere in Glidepath (NumPy's linear, src/domain/quantile.ts). */
function stats(xs: number[]): Stats {
  const s = [...xs].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: quantileSorted(s, 0.5),
    p90: quantileSorted(s, 0.9),
    p99: quantileSorted(s, 0.99),
    max: s[s.length - 1] ?? NaN,
    min: s[0] ?? NaN,
    mean: s.reduce((a, b) => a + b, 0) / Math.max(1, s.length),
  };
}

/**
 * Clients sending small requests back to back; each response's version and arrival time go to the
 * current watcher, so "the first response served by X after t" is an event, not a poll of state.
 */
class Pollers {
  private running = true;
  private watcher: { version: string; after: number; resolve: (at: number) => void } | undefined;
  private readonly loops: Promise<void>[] = [];
  requests = 0;
  errors = 0;
  private readonly body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'ping' }], max_tokens: 1, temperature: 0 });

  constructor(
    private readonly base: string,
    private readonly agent: Agent,
    n: number,
  ) {
    for (let i = 0; i < n; i++) this.loops.push(this.loop());
  }

  private async loop(): Promise<void> {
    while (this.running) {
      try {
        const res = await request(`${this.base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: this.body,
          dispatcher: this.agent,
        });
        await res.body.dump();
        const at = performance.now();
        this.requests++;
        if (res.statusCode !== 200) {
          this.errors++;
          continue;
        }
        const v = res.headers['x-glidepath-version'];
        const w = this.watcher;
        if (w && v === w.version && at >= w.after) {
          this.watcher = undefined;
          w.resolve(at);
        }
      } catch {
        this.errors++;
      }
    }
  }

  /** Resolves with the arrival time of the first response served by `version` arriving after `after`. */
  first(version: string, after: number): Promise<number> {
    return new Promise((resolve) => {
      this.watcher = { version, after, resolve };
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

/**
 * Baseline in the same run: the same `DataPlane.setRoute` (validate, build, swap, gauges) called in
 * this process, back to back and hot, with no traffic — what the code costs without a busy server.
 */
function inProcessSwitch(n: number): number[] {
  const gw = parseConfig({ models: [{ name: MODEL, versions: [{ id: 'v1' }] }] }).gateway;
  const dp = new DataPlane(gw, new Telemetry({ windowMaxSamples: 1000, windowMaxAgeMs: 300_000 }));
  dp.addModel({
    model: MODEL,
    versions: [
      { id: 'v1', cardChecksum: 'c' },
      { id: 'v2', cardChecksum: 'c' },
    ],
    route: { model: MODEL, weights: { v1: 1 } },
  });
  dp.setWorkers(MODEL, 'v1', [{ id: 'w1', url: 'http://127.0.0.1:9' }]);
  dp.setWorkers(MODEL, 'v2', [{ id: 'w2', url: 'http://127.0.0.1:9' }]);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const [to, other] = i % 2 === 0 ? ['v2', 'v1'] : ['v1', 'v2'];
    const t0 = performance.now();
    dp.setRoute({ model: MODEL, weights: { [to]: 1, [other]: 0 }, stable: to });
    xs.push(performance.now() - t0);
  }
  void dp.close();
  return xs;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string; exitedAt: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    p.once('error', reject);
    p.once('close', (code) => resolve({ code, stdout, stderr, exitedAt: performance.now() }));
  });
}

const r3 = (x: number) => Math.round(x * 1000) / 1000;
const fmt = (s: Stats, digits = 3) => `${s.p50.toFixed(digits)} | ${s.p90.toFixed(digits)} | ${s.p99.toFixed(digits)} | ${s.max.toFixed(digits)}`;
const round = (s: Stats): Stats => ({ n: s.n, p50: r3(s.p50), p90: r3(s.p90), p99: r3(s.p99), max: r3(s.max), min: r3(s.min), mean: r3(s.mean) });

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`);
  const cliHasRollback = existsSync(path.join(ROOT, 'dist/cli/rollback/index.js'));
  const dir = tempDir('bench-rollback');
  const dataDir = path.join(dir, 'data');
  const configFile = writeConfig(
    dir,
    simConfigYaml({
      model: MODEL,
      dataDir,
      versions: [
        { id: 'v1', seed: 1, replicas: 1 },
        { id: 'v2', seed: 2, replicas: 1 },
      ],
    }),
  );
  const load0 = loadavg();
  let up: UpProcess | undefined;
  const agent = new Agent({ connections: POLLERS + 2 });
  try {
    up = await startUp({ configFile, dataDir });
    const u = up;
    await u.ok('POST', `/models/${MODEL}/deploy`, { version: 'v2' });
    await u.ok('POST', `/models/${MODEL}/swap`, { mode: 'overlap' });
    trackWorkerPids((await u.ok<WorkerView[]>('GET', '/workers')).map((w) => w.pid));
    const pollers = new Pollers(u.dataUrl, agent, POLLERS);
    await pollers.first('v2', 0);

    const switchMs: number[] = [];
    const swapBack = async (standby: 'warm' | 'sleep') => {
      await u.ok('POST', `/models/${MODEL}/swap`, { to: 'v2', mode: 'overlap', standby });
      await pollers.first('v2', performance.now());
    };

    // baseline: the cost of spawning a Node process at all
    const spawnMs: number[] = [];
    for (let i = 0; i < ITER; i++) {
      const t0 = performance.now();
      const r = await run(process.execPath, ['-e', '0'], process.env);
      if (r.code !== 0) throw new Error(`node -e 0 exited ${String(r.code)}`);
      spawnMs.push(r.exitedAt - t0);
    }

    // (b) the CLI verb (or the API when the verb does not exist yet)
    const cliFirst: number[] = [];
    const cliExit: number[] = [];
    const env = { ...process.env, GLIDEPATH_URL: u.adminUrl, GLIDEPATH_TOKEN: u.token };
    for (let i = 0; i < ITER && cliHasRollback; i++) {
      const t0 = performance.now();
      const seen = pollers.first('v1', t0);
      const r = await run(process.execPath, [CLI, 'rollback', '--instant', '--model', MODEL, '--output', 'json'], env);
      if (r.code !== 0) throw new Error(`glidepath rollback --instant exited ${String(r.code)}: ${r.stderr}`);
      const reply = JSON.parse(r.stdout) as RollbackReply;
      if (reply.rolled_back_to !== 'v1') throw new Error(`rolled back to ${reply.rolled_back_to}`);
      switchMs.push(reply.elapsed_ms);
      cliFirst.push((await seen) - t0);
      cliExit.push(r.exitedAt - t0);
      await swapBack('warm');
    }

    // (a) more route-switch samples for a meaningful p99: rollback and swap back, traffic still on
    for (let i = 0; i < SWITCH_ITER; i++) {
      const reply = await u.ok<RollbackReply>('POST', `/models/${MODEL}/rollback`, {});
      if (reply.rolled_back_to !== 'v1' || reply.wake_ms !== 0) throw new Error(`unexpected rollback: ${JSON.stringify(reply)}`);
      switchMs.push(reply.elapsed_ms);
      await u.ok('POST', `/models/${MODEL}/swap`, { to: 'v2', mode: 'overlap' });
    }
    await pollers.first('v2', performance.now());

    // (c) the admin API call, no process spawn
    const apiFirst: number[] = [];
    const apiReply: number[] = [];
    for (let i = 0; i < ITER; i++) {
      const t0 = performance.now();
      const seen = pollers.first('v1', t0);
      const reply = await u.ok<RollbackReply>('POST', `/models/${MODEL}/rollback`, {});
      apiReply.push(performance.now() - t0);
      if (reply.rolled_back_to !== 'v1') throw new Error(`rolled back to ${reply.rolled_back_to}`);
      switchMs.push(reply.elapsed_ms);
      apiFirst.push((await seen) - t0);
      await swapBack(i === ITER - 1 ? 'sleep' : 'warm');
    }

    // (d) time-shared standby: v1 asleep (level 1); the rollback wakes it, then switches
    const sleepFirst: number[] = [];
    const sleepWake: number[] = [];
    const sleepSwitch: number[] = [];
    const sleepTotal: number[] = [];
    for (let i = 0; i < SLEEP_ITER; i++) {
      const asleep = (await u.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`)).filter((w) => w.version === 'v1');
      if (!asleep.every((w) => w.state === 'sleeping')) throw new Error(`v1 is not asleep: ${JSON.stringify(asleep)}`);
      const t0 = performance.now();
      const seen = pollers.first('v1', t0);
      const reply = await u.ok<RollbackReply>('POST', `/models/${MODEL}/rollback`, {});
      if (reply.method !== 'wake_then_route_switch') throw new Error(`expected a wake, got ${reply.method}`);
      sleepFirst.push((await seen) - t0);
      sleepWake.push(reply.wake_ms);
      sleepSwitch.push(reply.elapsed_ms);
      sleepTotal.push(reply.total_ms);
      await swapBack('sleep');
    }
    await pollers.stop();
    const load1 = loadavg();
    const hotMs = inProcessSwitch(20_000);

    const machine = {
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memory_gb: Math.round(totalmem() / 2 ** 30),
      platform: `${platform()} ${release()}`,
      node: process.version,
      loadavg_at_start: load0.map((x) => Math.round(x * 100) / 100),
      loadavg_at_end: load1.map((x) => Math.round(x * 100) / 100),
    };
    const results = {
      date: new Date().toISOString(),
      machine,
      setup: {
        model: MODEL,
        versions: 'v1 (seed 1) and v2 (seed 2), one simulator worker each, inter_token_ms 0',
        pollers: POLLERS,
        poll_request: 'non-streaming chat completion, max_tokens 1, back to back',
        iterations: ITER,
        sleep_iterations: SLEEP_ITER,
        switch_only_iterations: SWITCH_ITER,
        cli_path: cliHasRollback ? 'glidepath rollback --instant --output json (spawned process)' : 'glidepath rollback not built: CLI path skipped',
      },
      route_switch_ms: round(stats(switchMs)),
      route_switch_over_1ms: switchMs.filter((x) => x >= 1).length,
      baseline_in_process_set_route_ms: round(stats(hotMs)),
      cli_to_first_standby_response_ms: cliHasRollback ? round(stats(cliFirst)) : null,
      cli_process_exit_ms: cliHasRollback ? round(stats(cliExit)) : null,
      baseline_node_spawn_ms: round(stats(spawnMs)),
      api_to_first_standby_response_ms: round(stats(apiFirst)),
      api_reply_ms: round(stats(apiReply)),
      sleeping_standby: {
        to_first_standby_response_ms: round(stats(sleepFirst)),
        wake_ms: round(stats(sleepWake)),
        route_switch_ms: round(stats(sleepSwitch)),
        total_ms: round(stats(sleepTotal)),
        note: 'the simulator wakes from level 1 at once (no weights to move); a real engine copies weights CPU→GPU (seed 000 quotes ~20 s)',
      },
      poller: { requests: pollers.requests, errors: pollers.errors },
    };
    const outDir = path.join(ROOT, 'bench/results');
    mkdirSync(outDir, { recursive: true });
    writeFileSync(path.join(outDir, 'rollback.json'), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(
      path.join(outDir, 'rollback.md'),
      markdown(results, { switchMs, hotMs, cliFirst, cliExit, spawnMs, apiFirst, apiReply, sleepFirst, sleepWake, sleepSwitch, sleepTotal }, cliHasRollback),
    );
    process.stdout.write(
      markdown(results, { switchMs, hotMs, cliFirst, cliExit, spawnMs, apiFirst, apiReply, sleepFirst, sleepWake, sleepSwitch, sleepTotal }, cliHasRollback),
    );
    if (pollers.errors > 0) throw new Error(`${pollers.errors} poller request(s) failed during the benchmark`);
  } finally {
    await agent.close();
    await up?.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  }
}

function markdown(
  r: { date: string; machine: Record<string, unknown>; setup: Record<string, unknown>; poller: { requests: number; errors: number } },
  s: Record<
    'switchMs' | 'hotMs' | 'cliFirst' | 'cliExit' | 'spawnMs' | 'apiFirst' | 'apiReply' | 'sleepFirst' | 'sleepWake' | 'sleepSwitch' | 'sleepTotal',
    number[]
  >,
  cli: boolean,
): string {
  const m = r.machine;
  const row = (name: string, xs: number[], digits = 3) => `| ${name} | ${xs.length} | ${fmt(stats(xs), digits)} |`;
  const sw = stats(s.switchMs);
  return [
    '# Instant rollback',
    '',
    `Run ${r.date} on ${String(m.cpu)} (${String(m.cores)} cores, ${String(m.memory_gb)} GB), ${String(m.platform)}, Node ${String(m.node)}; load average ${(m.loadavg_at_start as number[]).join(' ')} at start, ${(m.loadavg_at_end as number[]).join(' ')} at the end (the machine is shared with other work).`,
    '',
    '## Method',
    '',
    '- A real `glidepath up` (child process, loopback, ports chosen by the OS) with model `chat`: v1 and v2, one simulator worker each. v2 deployed green and swapped in, so v2 is active and v1 the warm standby.',
    `- ${r.setup.pollers as number} polling clients send small requests back to back (non-streaming chat, max_tokens 1) and report the arrival time and \`x-glidepath-version\` of every response.`,
    '- Each iteration rolls back v2 → v1 and measures from the moment the rollback is invoked to the first response served by v1 reaching a poller; then it swaps v2 back in and waits until the pollers see v2 again.',
    `- (a) **route switch**: \`elapsed_ms\` reported by the API — timed around the data plane's \`setRoute\`: validate and build the new snapshot, swap the one reference, update the route gauges — over every warm rollback: those of (b) and (c) plus ${String(r.setup.switch_only_iterations)} more API rollbacks (each followed by a swap back) while the pollers run.`,
    cli
      ? '- (b) **CLI**: `glidepath rollback --instant --output json` spawned as a new process (GLIDEPATH_URL/GLIDEPATH_TOKEN in its environment). Baseline in the same run: spawning `node -e 0`.'
      : '- (b) **CLI**: skipped — `glidepath rollback` was not built when this ran; (c) is the API path.',
    '- (c) **admin API**: `POST /admin/v1/models/chat/rollback` from the benchmark process (no spawn).',
    '- (d) **sleeping standby** (time-shared): v1 swapped out with `standby: "sleep"` (sleep level 1); the rollback wakes it, then switches. The simulator has no weights to move, so its wake is only the `/wake_up` + `/health` round trips; a real engine moves weights CPU→GPU (seed 000 quotes ~20 s).',
    '',
    '## Results (ms)',
    '',
    '| measure | n | p50 | p90 | p99 | max |',
    '|---|---|---|---|---|---|',
    row('(a) route switch (`elapsed_ms`)', s.switchMs, 4),
    row('baseline: `setRoute` in-process, hot, no traffic', s.hotMs, 4),
    ...(cli
      ? [
          row('(b) CLI invoked → first v1 response', s.cliFirst, 1),
          row('(b) CLI invoked → CLI exited', s.cliExit, 1),
          row('baseline: spawn `node -e 0` → exit', s.spawnMs, 1),
        ]
      : []),
    row('(c) API call → first v1 response', s.apiFirst, 2),
    row('(c) API call → API reply', s.apiReply, 2),
    row('(d) asleep: API call → first v1 response', s.sleepFirst, 2),
    row('(d) asleep: `wake_ms`', s.sleepWake, 2),
    row('(d) asleep: route switch `elapsed_ms`', s.sleepSwitch, 4),
    row('(d) asleep: `total_ms`', s.sleepTotal, 2),
    '',
    `Target: route switch p99 < 1 ms — ${sw.p99 < 1 ? 'met' : 'NOT met'} (p99 ${sw.p99.toFixed(4)} ms over ${sw.n} rollbacks; ${s.switchMs.filter((x) => x >= 1).length} of them took 1 ms or more). ` +
      'The timed region is tens of microseconds of work (see the in-process baseline); a sample far above it means the `up` process was descheduled or collecting garbage inside that window (the load average above is the number of runnable processes sharing the cores).',
    `Rows with ${s.apiFirst.length} or fewer samples: p99 is the largest or second-largest value.`,
    `Pollers: ${r.poller.requests} requests, ${r.poller.errors} errors.`,
    '',
  ].join('\n');
}

main().catch((err: unknown) => {
  cleanupAll();
  process.stderr.write(`bench:rollback failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
