// `npm run bench:hostile`: what one hostile client costs the gateway and everyone else (issue 12),
// measured on `glidepath up` with a simulated model, for one or two builds side by side (before and
// after the fixes). Scenarios, each on a freshly started gateway: (S1) a client pipelines 3000
// small chat completions on one connection and never reads; (S2) a 4 MiB JSON body arrives as
// one-byte chunks; (S3a, S3b) streaming clients that stop reading hold every connection to the
// worker and one more request for the same model waits — with full-speed streams (the socket
// buffers fill at once) and with paced ones (they take seconds to fill, and the send timeout only
// starts once they are full). Per scenario: the gateway's RSS (VmRSS every 50 ms),
// how long the victim request(s) took, and the latency a steady bystander sees meanwhile.
//
// Targets: GLIDEPATH_CLI (or --cli) is the build measured as "after" (default: this checkout's
// dist/cli/main.js); GLIDEPATH_CLI_BEFORE (or --before) adds an older build, measured in the same run,
// scenario by scenario in turn with the other. An older build without the issue-12 config keys
// (found out by `glidepath config check`) gets a config without them.
//
// Everything listens on 127.0.0.1 only; every wait has a bound; every process started is stopped at
// the end, its simulator workers included, on error too.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, request } from 'undici';
import { freePort, start, waitFor, ROOT } from './lib/proc.js';
import { quantileSorted as percentile } from '../src/domain/quantile.js';
import type { Proc } from './lib/proc.js';
import { now, startObserver } from './lib/bystander.js';
import type { Observation, Sample } from './lib/bystander.js';
import { chatRequest, rawClient, writeAll } from './lib/raw-http.js';
import {
  MODEL,
  FLOOD_REQUESTS,
  FLOOD_HOLD_MS,
  floodRequest,
  FLOOD_DRAIN_BOUND_MS,
  TRICKLE_BODY_BYTES,
  TRICKLE_BOUND_MS,
  TRICKLE_WRITE_BYTES,
  SLOW_POOL,
  SEND_TIMEOUT_MS,
  SLOW_SETTLE_MS,
  QUIET_MS,
  AFTER_MS,
  S_FLOOD,
  S_TRICKLE,
  FAST_SIM,
  SLOW_FAST,
  SLOW_PACED,
} from './lib/hostile-settings.js';
import type { Cell, Latency, Target, SlowVariant } from './lib/hostile-settings.js';
import { bound, extraText, f, report, victimText } from './lib/hostile-report.js';

const root = ROOT;

/** The whole run stops (and cleans up) after this, whatever happens. */
const RUN_BOUND_MS = 10 * 60_000;

// ---- processes --------------------------------------------------------------------------------

/** Every `up` started, for the final cleanup (also on error and on the run's bound). */
const running = new Set<Proc>();

/** Children of `pid` (the simulator workers `up` starts), from /proc. */
function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {
      // gone in between
    }
  }
  return out;
}

interface Up {
  proc: Proc;
  port: number;
  admin: number;
  /** The simulator workers' pids and URLs. */
  workers: { pid: number; endpoint: string }[];
  stop(): Promise<void>;
}

interface Scenario {
  gateway: string[];
  sim: string;
}

function configYaml(dir: string, port: number, admin: number, t: Target, s: Scenario): string {
  // an older build's parser rejects keys it does not know
  const gateway = s.gateway.filter((l) => t.hasLimits || !l.includes('send_timeout_ms'));
  return [
    'server:',
    `  listen: 127.0.0.1:${port}`,
    `  admin_listen: 127.0.0.1:${admin}`,
    `  data_dir: ${JSON.stringify(path.join(dir, 'data'))}`,
    'gpus: { count: 1 }',
    ...(gateway.length > 0 ? ['gateway:', ...gateway.map((l) => `  ${l}`)] : []),
    'models:',
    `  - name: ${MODEL}`,
    '    versions:',
    '      - id: v1',
    '        warmup: { requests: 0 }',
    `        provider: { kind: sim, sim: { seed: 1, jitter: 0, itl_growth_per_seq: 0, ${s.sim} } }`,
    '',
  ].join('\n');
}

async function startUp(t: Target, s: Scenario, base: string): Promise<Up> {
  const dir = mkdtempSync(path.join(base, 'up-'));
  const [port, admin] = [await freePort(), await freePort()];
  const cfg = path.join(dir, 'glidepath.yaml');
  writeFileSync(cfg, configYaml(dir, port, admin, t, s));
  // the script itself, as `glidepath up` runs: its `#!` line carries the gateway's V8 flags
  const proc = start(t.cli, ['up', '--config', cfg], { ...process.env, GLIDEPATH_LOG_LEVEL: 'warn' });
  running.add(proc);
  const stop = async (): Promise<void> => {
    const kids = childPids(proc.pid);
    await proc.stop();
    running.delete(proc);
    for (const pid of kids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already stopped by `up`
      }
    }
  };
  try {
    // an `up` that exits (a bad config, a missing module) fails at once rather than at the wait's bound
    const exited = new Promise<never>((_, reject) => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) reject(new Error('glidepath up exited'));
      proc.child.once('exit', (code) => reject(new Error(`glidepath up exited (${code})`)));
    });
    exited.catch(() => {});
    await Promise.race([waitFor(`http://127.0.0.1:${port}/ready`, 60_000), exited]);
    const token = readFileSync(path.join(dir, 'data', 'admin-token'), 'utf8').trim();
    const r = await request(`http://127.0.0.1:${admin}/admin/v1/workers`, { headers: { authorization: `Bearer ${token}` } });
    const ws = (await r.body.json()) as { pid: number | null; endpoint: string }[];
    return { proc, port, admin, workers: ws.map((w) => ({ pid: w.pid ?? -1, endpoint: w.endpoint })), stop };
  } catch (err) {
    await stop();
    throw new Error(`${t.name}: glidepath up did not come up: ${(err as Error).message}\n${proc.output().slice(-2000)}`);
  }
}

/** Sum of every sample of a counter in a Prometheus text page (0 when absent). */
async function metric(url: string, name: string): Promise<number> {
  const r = await request(url, { signal: AbortSignal.timeout(10_000) });
  const text = await r.body.text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/**
 * Bytes the kernel holds unsent on the gateway's side of the connections from `clientPorts` (Send-Q,
 * from iproute2's `ss`): what the gateway has handed over as "sent" to a client that is not reading.
 */
function sendQueues(gatewayPort: number, clientPorts: number[]): number[] {
  try {
    const out = execFileSync('ss', ['-tnH', 'state', 'established', `( sport = :${gatewayPort} )`], { encoding: 'utf8', timeout: 5_000 });
    const want = new Set(clientPorts);
    const q: number[] = [];
    for (const line of out.split('\n')) {
      const cols = line.trim().split(/\s+/);
      // Recv-Q Send-Q Local:Port Peer:Port
      const peer = Number(cols[3]?.slice(cols[3].lastIndexOf(':') + 1));
      if (want.has(peer)) q.push(Number(cols[1]));
    }
    return q;
  } catch {
    return [];
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- scenarios --------------------------------------------------------------------------------

function latency(xs: Sample[]): Latency {
  const ms = xs.map((x) => x.ms).sort((a, b) => a - b);
  return {
    n: xs.length,
    errors: xs.filter((x) => !x.ok && !x.cut).length,
    p50: percentile(ms, 0.5),
    p99: percentile(ms, 0.99),
    max: ms.length ? (ms[ms.length - 1] as number) : NaN,
    cut: xs.filter((x) => x.cut).length,
  };
}

/** Turn one observation into a cell's common columns; the hostile phase is [from, ∞). */
function summarise(scenario: string, target: string, o: Observation, from: number): Omit<Cell, 'victim' | 'victimMs' | 'victimDone' | 'extra'> {
  const quiet = o.rss.filter((s) => s.at < from).map((s) => s.kb);
  const all = o.rss.map((s) => s.kb);
  const mib = (kb: number): number => kb / 1024;
  return {
    scenario,
    target,
    rssStartMiB: mib(quiet.length ? (quiet[quiet.length - 1] as number) : (all[0] ?? NaN)),
    rssPeakMiB: mib(Math.max(...all)),
    rssEndMiB: mib(all[all.length - 1] ?? NaN),
    health: latency(o.health.filter((s) => s.at >= from)),
    healthQuiet: latency(o.health.filter((s) => s.at < from)),
    chat: o.chat.length ? latency(o.chat.filter((s) => s.at >= from)) : null,
  };
}

/** S1: FLOOD_REQUESTS small chat completions pipelined on one connection that is paused; after FLOOD_HOLD_MS it reads. */
async function flood(t: Target, base: string): Promise<Cell> {
  const up = await startUp(t, { gateway: [], sim: FAST_SIM }, base);
  try {
    const gwMetrics = `http://127.0.0.1:${up.port}/metrics`;
    const simMetrics = `${up.workers[0]?.endpoint ?? ''}/metrics`;
    const one = floodRequest();
    const wire = Buffer.from(one.repeat(FLOOD_REQUESTS), 'latin1');
    const obs = await startObserver({ model: MODEL, port: up.port, pid: up.proc.pid, chat: true, boundMs: 60_000 });
    await sleep(QUIET_MS);
    const [gw0, sim0] = [await metric(gwMetrics, 'glidepath_requests_total'), await metric(simMetrics, 'vllm:request_success_total')];
    const from = now();
    const c = rawClient(up.port);
    c.socket.pause();
    await c.connected;
    c.socket.write(wire);
    await sleep(FLOOD_HOLD_MS);
    const [gw1, sim1] = [await metric(gwMetrics, 'glidepath_requests_total'), await metric(simMetrics, 'vllm:request_success_total')];
    const queued = sendQueues(up.port, [c.socket.localPort ?? -1])[0] ?? NaN;
    const holdEnd = now();
    const t0 = performance.now();
    c.socket.resume();
    const all = await c.answers.wait(FLOOD_REQUESTS, FLOOD_DRAIN_BOUND_MS);
    const drainMs = performance.now() - t0;
    c.socket.destroy();
    await sleep(AFTER_MS);
    const o = await obs.stop();
    const ok = c.answers.statuses.filter((s) => s === 200).length;
    const common = summarise(S_FLOOD, t.name, o, from);
    return {
      ...common,
      // the hostile part is the hold: the answers served once the client reads are ordinary work
      rssPeakMiB: Math.max(...o.rss.filter((s) => s.at >= from && s.at <= holdEnd).map((s) => s.kb)) / 1024,
      victim: `all ${FLOOD_REQUESTS} answers read, once the client reads`,
      victimMs: drainMs,
      victimDone: all,
      extra: {
        bytesSent: wire.length,
        reachedWorkerDuringHold: sim1 - sim0,
        gatewayRecordedDuringHold: gw1 - gw0,
        answered: c.answers.count,
        answered200: ok,
        answerBytesMean: Math.round(c.answers.bytes / Math.max(1, c.answers.count)),
        gatewaySendQueueBytesAtHoldEnd: queued,
        rssPeakWhileDrainingMiB: Math.round(Math.max(...o.rss.filter((s) => s.at > holdEnd).map((s) => s.kb)) / 1024),
      },
    };
  } finally {
    await up.stop();
  }
}

/** S2: a valid chat completion whose 4 MiB JSON body (a short prompt padded with JSON whitespace) is sent in one-byte chunks. */
async function trickle(t: Target, base: string): Promise<Cell> {
  const up = await startUp(t, { gateway: [], sim: FAST_SIM }, base);
  try {
    const head = '{"model":"m","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0';
    const tail = '}';
    const body = Buffer.alloc(TRICKLE_BODY_BYTES, ' ');
    body.write(head, 0, 'latin1');
    body.write(tail, TRICKLE_BODY_BYTES - tail.length, 'latin1');
    // every body byte as its own chunk: "1\r\n" byte "\r\n"
    const wire = Buffer.alloc(TRICKLE_BODY_BYTES * 6 + 5);
    for (let i = 0, o = 0; i < TRICKLE_BODY_BYTES; i++, o += 6) {
      wire[o] = 0x31;
      wire[o + 1] = 0x0d;
      wire[o + 2] = 0x0a;
      wire[o + 3] = body[i] as number;
      wire[o + 4] = 0x0d;
      wire[o + 5] = 0x0a;
    }
    wire.write('0\r\n\r\n', TRICKLE_BODY_BYTES * 6, 'latin1');
    const obs = await startObserver({ model: MODEL, port: up.port, pid: up.proc.pid, chat: true, boundMs: 90_000 });
    await sleep(QUIET_MS);
    const from = now();
    const c = rawClient(up.port);
    await c.connected;
    const t0 = performance.now();
    const until = Date.now() + TRICKLE_BOUND_MS;
    c.socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const sent = await writeAll(c.socket, wire, TRICKLE_WRITE_BYTES, until);
    const sentMs = performance.now() - t0;
    const done = sent && (await c.answers.wait(1, Math.max(0, until - Date.now())));
    const answerMs = performance.now() - t0;
    c.socket.destroy();
    await sleep(AFTER_MS);
    const o = await obs.stop();
    return {
      ...summarise(S_TRICKLE, t.name, o, from),
      victim: 'the 4 MiB request answered (first byte sent → answer complete)',
      victimMs: answerMs,
      victimDone: done,
      extra: { bodyBytes: TRICKLE_BODY_BYTES, wireBytes: wire.length, allSentMs: Math.round(sentMs), status: c.answers.statuses[0] ?? 'none' },
    };
  } finally {
    await up.stop();
  }
}

/** S3: SLOW_POOL streaming clients that never read fill the worker's pool; then one small chat completion for the same model. */
async function slowReaders(t: Target, base: string, v: SlowVariant): Promise<Cell> {
  const sc: Scenario = {
    gateway: [`connections_per_worker: ${SLOW_POOL}`, `send_timeout_ms: ${SEND_TIMEOUT_MS}`],
    sim: `${v.sim}, max_model_len: 10000000, kv_capacity_tokens: 1000000000`,
  };
  const up = await startUp(t, sc, base);
  const slow: Socket[] = [];
  try {
    const obs = await startObserver({ model: MODEL, port: up.port, pid: up.proc.pid, chat: false, boundMs: v.boundMs + 30_000 });
    await sleep(QUIET_MS);
    const from = now();
    const req = chatRequest(
      JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'Tell me everything' }],
        max_tokens: v.maxTokens,
        temperature: 0,
        stream: true,
        ignore_eos: true,
      }),
    );
    const ports: number[] = [];
    for (let i = 0; i < SLOW_POOL; i++) {
      const c = rawClient(up.port);
      c.socket.pause();
      c.socket.write(req);
      slow.push(c.socket);
    }
    for (const s of slow) {
      await new Promise<void>((r) => (s.localPort !== undefined ? r() : s.once('connect', () => r())));
      ports.push(s.localPort ?? -1);
    }
    await sleep(SLOW_SETTLE_MS);
    const queuedAtSend = sendQueues(up.port, ports);
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0 });
    const victim = new Client(`http://127.0.0.1:${up.port}`, { headersTimeout: v.boundMs + 5_000, bodyTimeout: v.boundMs + 5_000 });
    const t0 = performance.now();
    let status = 0;
    let done = false;
    try {
      const r = await victim.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(v.boundMs),
      });
      await r.body.text();
      status = r.statusCode;
      done = true;
    } catch {
      // not answered within the bound
    }
    const victimMs = performance.now() - t0;
    await victim.destroy();
    const queuedAtEnd = sendQueues(up.port, ports);
    const timeouts = t.hasLimits ? await metric(`http://127.0.0.1:${up.port}/metrics`, 'glidepath_client_send_timeouts_total') : 'n/a';
    for (const s of slow) s.destroy();
    await sleep(AFTER_MS);
    const o = await obs.stop();
    const kib = (q: number[]) => (q.length ? `${f(Math.min(...q) / 1024)}–${f(Math.max(...q) / 1024)} KiB on ${q.length}` : 'none open');
    return {
      ...summarise(v.scenario, t.name, o, from),
      victim: `one more chat completion for the model (sent ${SLOW_SETTLE_MS} ms after the slow readers)`,
      victimMs,
      victimDone: done,
      extra: {
        slowReaders: SLOW_POOL,
        connectionsPerWorker: SLOW_POOL,
        sendTimeoutMs: t.hasLimits ? SEND_TIMEOUT_MS : 'none (not in this build)',
        victimStatus: done ? status : 'none',
        sendTimeouts: timeouts,
        gatewaySendQueueAtVictimSend: kib(queuedAtSend),
        gatewaySendQueueAtVictimEnd: kib(queuedAtEnd),
      },
    };
  } finally {
    for (const s of slow) s.destroy();
    await up.stop();
  }
}

// ---- targets, run, report ---------------------------------------------------------------------

function arg(flag: string): string | undefined {
  const i = process.argv.indexOf(flag);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function target(name: string, cli: string, base: string): Target {
  if (!existsSync(cli)) throw new Error(`${cli} does not exist: build that checkout first (npm run build)`);
  // a config with the issue-12 keys: a build that rejects them gets configs without them
  const probe = path.join(base, `probe-${name}.yaml`);
  let said = '';
  const valid = (withLimits: boolean): boolean => {
    writeFileSync(probe, configYaml(base, 1, 2, { name, cli, hasLimits: withLimits, commit: '' }, { gateway: ['send_timeout_ms: 1000'], sim: FAST_SIM }));
    try {
      execFileSync(cli, ['config', 'check', probe], { stdio: 'pipe', timeout: 30_000 });
      return true;
    } catch (err) {
      const e = err as { stdout?: Buffer; stderr?: Buffer };
      said = `${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`.slice(-1000);
      return false;
    }
  };
  const hasLimits = valid(true);
  if (!hasLimits && !valid(false)) throw new Error(`${cli} config check fails on the bench's config even without the issue-12 keys:\n${said}`);
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['-C', path.dirname(cli), 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    if (execFileSync('git', ['-C', path.dirname(cli), 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '')
      commit += '+changes';
  } catch {
    // not a git checkout
  }
  return { name, cli, hasLimits, commit };
}

async function cleanup(): Promise<void> {
  await Promise.all(
    [...running].map(async (p) => {
      const kids = childPids(p.pid);
      await p.stop();
      for (const pid of kids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }),
  );
  running.clear();
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const t0 = performance.now();
  const base = mkdtempSync(path.join(os.tmpdir(), 'gp-hostile-'));
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench:hostile: still running after ${RUN_BOUND_MS / 1000} s; stopping\n`);
    void cleanup().finally(() => process.exit(1));
  }, RUN_BOUND_MS);
  watchdog.unref();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void cleanup().finally(() => process.exit(130)));
  try {
    const current = process.env.GLIDEPATH_CLI ?? arg('--cli') ?? path.join(root, 'dist', 'cli', 'main.js');
    const before = process.env.GLIDEPATH_CLI_BEFORE ?? arg('--before');
    const targets = [...(before ? [target('before', path.resolve(before), base)] : []), target(before ? 'after' : 'current', path.resolve(current), base)];
    const runs: [string, (t: Target) => Promise<Cell>][] = [
      [S_FLOOD, (t) => flood(t, base)],
      [S_TRICKLE, (t) => trickle(t, base)],
      [SLOW_FAST.scenario, (t) => slowReaders(t, base, SLOW_FAST)],
      [SLOW_PACED.scenario, (t) => slowReaders(t, base, SLOW_PACED)],
    ];
    const only = process.env.BENCH_ONLY; // e.g. BENCH_ONLY=S3 runs the scenarios whose name starts so
    const cells: Cell[] = [];
    for (const [name, run] of runs) {
      if (only !== undefined && !name.startsWith(only)) continue;
      for (const t of targets) {
        process.stderr.write(`bench:hostile: ${name} on ${t.name} …\n`);
        const c = await run(t);
        process.stderr.write(
          `  ${victimText(c, bound(c.scenario))}; RSS ${f(c.rssStartMiB)} → ${f(c.rssPeakMiB)} → ${f(c.rssEndMiB)} MiB; /health p99 ${f(c.health.p99, 1)} ms; ${extraText(c)}\n`,
        );
        cells.push(c);
      }
    }
    report(root, cells, targets, startedAt, performance.now() - t0);
  } finally {
    clearTimeout(watchdog);
    await cleanup();
    rmSync(base, { recursive: true, force: true });
  }
}

main().then(
  // the observer threads and sockets are all closed; exit even if a library keeps a timer
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:hostile failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
