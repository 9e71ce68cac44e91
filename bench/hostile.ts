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
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Client, request } from 'undici';
import { freePort, start, waitFor, ROOT } from './lib/proc.js';
import { quantileSorted as percentile } from '../src/domain/quantile.js';
import type { Proc } from './lib/proc.js';

const root = ROOT;

const MODEL = 'm';
/** S1: pipelined requests written at once by the client that never reads, and how long it keeps not reading. */
const FLOOD_REQUESTS = 3000;
const FLOOD_HOLD_MS = 5_000;
/**
 * S1: each pipelined request is a streaming chat completion of this many tokens (~FLOOD_TOKENS × 200 B
 * of answer). Small requests, large answers: the old front answered pipelined requests one after the
 * other into memory, so what it held grew with the answers' size. With 8-token answers (~620 B) a
 * first run saw no difference between the builds — both had ~2300 answers in 5 s, all still within
 * the kernel's socket buffers.
 */
const FLOOD_TOKENS = 128;
function floodRequest(): string {
  return chatRequest(
    JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: FLOOD_TOKENS, temperature: 0, stream: true, ignore_eos: true }),
  );
}
/** S1: once the client reads, its answers must all arrive within this (else: reported as not all answered). */
const FLOOD_DRAIN_BOUND_MS = 30_000;
/** S2: the body's size (just under the default 4 MiB `gateway.max_body_bytes`: a valid request), and the bound on its answer. */
const TRICKLE_BODY_BYTES = 4 * 1024 * 1024 - 64;
const TRICKLE_BOUND_MS = 45_000;
/** S2: the client writes the one-byte-chunk framing in writes this large, so the client is never the bottleneck. */
const TRICKLE_WRITE_BYTES = 256 * 1024;
/** S3: a small pool per worker keeps the scenario quick (the default is 128): as many slow readers as connections. */
const SLOW_POOL = 8;
/** S3: the send timeout given to a build that has one (the default is 60 s). */
const SEND_TIMEOUT_MS = 3_000;
/** S3: how long the slow readers stream before the victim is sent (the bench's bound on the victim is per variant, below). */
const SLOW_SETTLE_MS = 1_000;
/** Each scenario: bystander alone for this long first (its quiet baseline), and after the hostile client has gone. */
const QUIET_MS = 1_000;
const AFTER_MS = 1_000;
/** Bystander pacing: GET /health every ~10 ms on its own keep-alive connection; a small chat every ~100 ms on another. */
const HEALTH_EVERY_MS = 10;
const CHAT_EVERY_MS = 100;
const RSS_EVERY_MS = 50;
/** A bystander request in flight when its scenario ends may take this long before it is counted as unanswered. */
const STOP_GRACE_MS = 1_000;
/** The whole run stops (and cleans up) after this, whatever happens. */
const RUN_BOUND_MS = 10 * 60_000;

// ---- observer: a worker thread, so the hostile client's work never delays the bystander or the sampler

interface ObserverOptions {
  port: number;
  pid: number;
  chat: boolean;
  boundMs: number;
}

interface Sample {
  /** Absolute ms (performance.timeOrigin + now): comparable across threads. */
  at: number;
  ms: number;
  ok: boolean;
  /** Still waiting when the observer stopped: `ms` is a lower bound. */
  cut?: boolean;
}

interface Observation {
  rss: { at: number; kb: number }[];
  health: Sample[];
  chat: Sample[];
}

function now(): number {
  return performance.timeOrigin + performance.now();
}

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function observe(o: ObserverOptions, stopped: Promise<void>, ready: () => void): Promise<Observation> {
  const out: Observation = { rss: [], health: [], chat: [] };
  let stop = false;
  const until = now() + o.boundMs;
  const done = Promise.race([stopped, new Promise<void>((r) => setTimeout(r, o.boundMs).unref())]).then(() => {
    stop = true;
  });
  const sampler = setInterval(() => {
    try {
      out.rss.push({ at: now(), kb: rssKb(o.pid) });
    } catch {
      // the process has gone
    }
  }, RSS_EVERY_MS);
  const origin = `http://127.0.0.1:${o.port}`;
  const chatBody = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 });
  const loop = async (into: Sample[], every: number, send: (c: Client) => Promise<number>): Promise<void> => {
    const client = new Client(origin, { keepAliveTimeout: 120_000, pipelining: 1 });
    let pending: { at: number } | null = null;
    const run = async (): Promise<void> => {
      while (!stop && now() < until) {
        const t0 = now();
        pending = { at: t0 };
        let ok = false;
        try {
          ok = (await send(client)) === 200;
        } catch {
          ok = false;
        }
        pending = null;
        const t1 = now();
        into.push({ at: t0, ms: t1 - t0, ok });
        if (stop) break;
        const wait = t0 + every - t1;
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    };
    const running = run();
    await Promise.race([running, done]);
    // a request in flight when the scenario ends gets a moment to finish; one still waiting after it is counted as cut
    await Promise.race([running, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
    const p = pending as { at: number } | null;
    if (p !== null) into.push({ at: p.at, ms: now() - p.at, ok: false, cut: true });
    await client.destroy();
  };
  const health = loop(out.health, HEALTH_EVERY_MS, async (c) => {
    const r = await c.request({ path: '/health', method: 'GET' });
    await r.body.dump();
    if (out.health.length === 0) ready();
    return r.statusCode;
  });
  const chat = o.chat
    ? loop(out.chat, CHAT_EVERY_MS, async (c) => {
        const r = await c.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody });
        await r.body.dump();
        return r.statusCode;
      })
    : Promise.resolve();
  await Promise.all([health, chat]);
  clearInterval(sampler);
  return out;
}

if (!isMainThread) {
  const port = parentPort!;
  const stopped = new Promise<void>((r) => port.once('message', () => r()));
  void observe(workerData as ObserverOptions, stopped, () => port.postMessage('ready')).then((o) => port.postMessage(o));
}

/**
 * Start the observer thread and resolve once its bystander has had a first answer (a thread takes a
 * few hundred ms to load on a busy machine: the quiet phase starts after that); `stop()` resolves
 * with what it saw.
 */
async function startObserver(o: ObserverOptions): Promise<{ stop(): Promise<Observation> }> {
  const w = new Worker(fileURLToPath(import.meta.url), { workerData: o });
  let ready: () => void = () => {};
  const isReady = new Promise<void>((r) => (ready = r));
  const result = new Promise<Observation>((resolve, reject) => {
    w.on('message', (m: Observation | 'ready') => (m === 'ready' ? ready() : resolve(m)));
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`observer exited (${code}) without a result`)));
  });
  await Promise.race([isReady, result, sleep(10_000)]);
  return {
    async stop() {
      w.postMessage('stop');
      const r = await result;
      await w.terminate();
      return r;
    },
  };
}

// ---- processes --------------------------------------------------------------------------------

interface Target {
  name: string;
  cli: string;
  /** The build knows `gateway.send_timeout_ms` and `limits:` (issue 12). */
  hasLimits: boolean;
  commit: string;
}

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

// ---- a raw client: exact bytes out, answers counted as they arrive --------------------------------

/** Counts complete HTTP/1.1 responses (Content-Length or chunked) in a byte stream. */
class Answers {
  count = 0;
  bytes = 0;
  statuses: number[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  push(d: Buffer): void {
    this.bytes += d.length;
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    for (;;) {
      const used = this.one();
      if (used === 0) break;
      this.buf = this.buf.subarray(used);
    }
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Bytes of the first complete response in the buffer (0: incomplete). */
  private one(): number {
    const he = this.buf.indexOf('\r\n\r\n');
    if (he === -1) return 0;
    const head = this.buf.subarray(0, he).toString('latin1');
    const status = Number(head.slice(9, 12));
    const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    let end: number;
    if (len) {
      end = he + 4 + Number(len[1]);
      if (this.buf.length < end) return 0;
    } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
      let p = he + 4;
      for (;;) {
        const le = this.buf.indexOf('\r\n', p);
        if (le === -1) return 0;
        const size = parseInt(this.buf.subarray(p, le).toString('latin1'), 16);
        if (size === 0) {
          const te = this.buf.indexOf('\r\n\r\n', le);
          if (te === -1) return 0;
          end = te + 4;
          break;
        }
        p = le + 2 + size + 2;
        if (this.buf.length < p) return 0;
      }
    } else end = he + 4;
    this.count++;
    this.statuses.push(status);
    return end;
  }

  /** Resolve when `n` responses are complete or `ms` has passed; true if they are. */
  async wait(n: number, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (this.count < n && Date.now() < until) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, until - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.count >= n;
  }
}

function rawClient(port: number): { socket: Socket; answers: Answers; connected: Promise<void> } {
  const socket = connect({ port, host: '127.0.0.1' });
  const answers = new Answers();
  socket.on('data', (d: Buffer) => answers.push(d));
  socket.on('error', () => {});
  const connected = new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return { socket, answers, connected };
}

/** Write `data` in `size`-byte writes, waiting for the socket to drain between them (the kernel paces it). */
async function writeAll(s: Socket, data: Buffer, size: number, until: number): Promise<boolean> {
  for (let o = 0; o < data.length; o += size) {
    if (s.destroyed || Date.now() > until) return false;
    if (!s.write(data.subarray(o, o + size))) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, until - Date.now()));
        const done = (): void => {
          clearTimeout(t);
          s.off('close', done);
          s.off('drain', done);
          r();
        };
        s.once('drain', done);
        s.once('close', done);
      });
    }
  }
  return !s.destroyed;
}

function chatRequest(body: string, extra = ''): string {
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- scenarios --------------------------------------------------------------------------------

interface Latency {
  n: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
  /** Requests still unanswered when the scenario ended (their wait so far is in max). */
  cut: number;
}

interface Cell {
  scenario: string;
  target: string;
  rssStartMiB: number;
  rssPeakMiB: number;
  rssEndMiB: number;
  /** What the victim measurement is, and its value (ms); `victimDone` false: it was not answered within its bound. */
  victim: string;
  victimMs: number;
  victimDone: boolean;
  health: Latency;
  healthQuiet: Latency;
  chat: Latency | null;
  /** Scenario-specific figures. */
  extra: Record<string, number | string>;
}

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

const S_FLOOD = 'S1 pipelined flood, never read';
const S_TRICKLE = 'S2 4 MiB body in 1-byte chunks';

const FAST_SIM = 'inter_token_ms: 0';

/** S1: FLOOD_REQUESTS small chat completions pipelined on one connection that is paused; after FLOOD_HOLD_MS it reads. */
async function flood(t: Target, base: string): Promise<Cell> {
  const up = await startUp(t, { gateway: [], sim: FAST_SIM }, base);
  try {
    const gwMetrics = `http://127.0.0.1:${up.port}/metrics`;
    const simMetrics = `${up.workers[0]?.endpoint ?? ''}/metrics`;
    const one = floodRequest();
    const wire = Buffer.from(one.repeat(FLOOD_REQUESTS), 'latin1');
    const obs = await startObserver({ port: up.port, pid: up.proc.pid, chat: true, boundMs: 60_000 });
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
    const obs = await startObserver({ port: up.port, pid: up.proc.pid, chat: true, boundMs: 90_000 });
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

interface SlowVariant {
  scenario: string;
  /** Simulator settings: how fast the streams' bytes come. */
  sim: string;
  maxTokens: number;
  boundMs: number;
}

/** S3a: streams at the simulator's full speed: the socket buffers towards each slow reader fill within a second. */
const SLOW_FAST: SlowVariant = { scenario: 'S3a slow readers, fast streams', sim: 'inter_token_ms: 0', maxTokens: 40_000, boundMs: 20_000 };
/** S3b: streams at 1 ms/token (~200 KB/s each): the buffers take seconds to fill before the send timeout can start. */
const SLOW_PACED: SlowVariant = { scenario: 'S3b slow readers, paced streams', sim: 'inter_token_ms: 1', maxTokens: 200_000, boundMs: 30_000 };

/** S3: SLOW_POOL streaming clients that never read fill the worker's pool; then one small chat completion for the same model. */
async function slowReaders(t: Target, base: string, v: SlowVariant): Promise<Cell> {
  const sc: Scenario = {
    gateway: [`connections_per_worker: ${SLOW_POOL}`, `send_timeout_ms: ${SEND_TIMEOUT_MS}`],
    sim: `${v.sim}, max_model_len: 10000000, kv_capacity_tokens: 1000000000`,
  };
  const up = await startUp(t, sc, base);
  const slow: Socket[] = [];
  try {
    const obs = await startObserver({ port: up.port, pid: up.proc.pid, chat: false, boundMs: v.boundMs + 30_000 });
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

function f(n: number, d = 0): string {
  return Number.isFinite(n) ? n.toFixed(d) : '–';
}

function lat(l: Latency | null): string {
  if (l === null) return '–';
  const cut = l.cut > 0 ? ` (${l.cut} unanswered ${STOP_GRACE_MS / 1000} s after the end)` : '';
  const err = l.errors > 0 ? ` (${l.errors} errors)` : '';
  return `${f(l.p50, 1)} / ${f(l.p99, 1)} / ${f(l.max, 0)}${cut}${err} (n=${l.n})`;
}

function victimText(c: Cell, bound: number): string {
  return c.victimDone ? `${f(c.victimMs / 1000, 2)} s` : `> ${f(bound / 1000, 0)} s (not answered)`;
}

function extraText(c: Cell): string {
  const e = c.extra;
  if (c.scenario === S_FLOOD)
    return `${e.reachedWorkerDuringHold} of ${FLOOD_REQUESTS} reached the worker during the hold; gateway's kernel send queue to the client then ${f(Number(e.gatewaySendQueueBytesAtHoldEnd) / 1024)} KiB (answers ~${e.answerBytesMean} B each); ${e.answered200} × 200 in all; RSS peak while serving them ${e.rssPeakWhileDrainingMiB} MiB`;
  if (c.scenario === S_TRICKLE) return `status ${e.status}; client done writing after ${f(Number(e.allSentMs) / 1000, 1)} s`;
  return `send timeout ${typeof e.sendTimeoutMs === 'number' ? `${e.sendTimeoutMs} ms` : 'none'}; fired ${e.sendTimeouts}×; victim status ${e.victimStatus}; gateway's kernel send queue to the slow readers ${e.gatewaySendQueueAtVictimSend} when the victim was sent, ${e.gatewaySendQueueAtVictimEnd} when it ended`;
}

function bound(s: string): number {
  if (s === S_FLOOD) return FLOOD_DRAIN_BOUND_MS;
  if (s === S_TRICKLE) return TRICKLE_BOUND_MS;
  return s === SLOW_FAST.scenario ? SLOW_FAST.boundMs : SLOW_PACED.boundMs;
}

/** One sentence per scenario, from the numbers (so a later run's text matches its table). */
function findings(cells: Cell[], targets: Target[]): string[] {
  const out: string[] = [];
  const by = (s: string) => targets.map((t) => cells.find((c) => c.scenario === s && c.target === t.name)).filter((c): c is Cell => c !== undefined);
  const growth = (c: Cell) => `${f(c.rssPeakMiB - c.rssStartMiB)} MiB`;
  const each = (cs: Cell[], g: (c: Cell) => string) => cs.map((c) => `${g(c)} (${c.target})`).join(' vs ');
  const s1 = by(S_FLOOD);
  if (s1.length)
    out.push(
      `**S1** — requests that reached the worker while the client read nothing: ${each(s1, (c) => `${c.extra.reachedWorkerDuringHold} of ${FLOOD_REQUESTS}`)}; gateway RSS growth over the quiet level: ${each(s1, growth)}; once the client reads, all its answers arrive in ${each(s1, (c) => victimText(c, FLOOD_DRAIN_BOUND_MS))}. At the end of the hold the kernel held ${each(s1, (c) => `${f(Number(c.extra.gatewaySendQueueBytesAtHoldEnd) / 1024)} KiB`)} unsent on the gateway's socket (\`ss\` Send-Q): answers the kernel accepts count as taken by the client, so how many requests get through before the gateway stops reading depends on that buffer (~3.7 MiB on loopback here) and the answers' size.`,
    );
  const s2 = by(S_TRICKLE);
  if (s2.length)
    out.push(
      `**S2** — the 4 MiB body in one-byte chunks was answered after ${each(s2, (c) => victimText(c, TRICKLE_BOUND_MS))}, with RSS growth ${each(s2, growth)} (end ${each(s2, (c) => `${f(c.rssEndMiB)} MiB`)}) and bystander /health p99 ${each(s2, (c) => `${f(c.health.p99, 1)} ms`)}.`,
    );
  for (const v of [SLOW_FAST, SLOW_PACED]) {
    const s3 = by(v.scenario);
    const name = v === SLOW_FAST ? 'S3a' : 'S3b';
    if (s3.length === 0) continue;
    let why = '';
    const timed = s3.filter((c) => typeof c.extra.sendTimeoutMs === 'number' && c.victimDone);
    for (const c of timed) {
      // the victim needs one slot: the first slow reader cut off frees it
      const fill = (c.victimMs + SLOW_SETTLE_MS - SEND_TIMEOUT_MS) / 1000;
      if (fill > 2)
        why += ` On ${c.target} the send timeout could only start once the kernel's send buffer towards a slow reader was full — the gateway's Send-Q was ${c.extra.gatewaySendQueueAtVictimEnd} connections when the victim was answered — which took ~${f(fill, 0)} s of streaming: the victim's wait is that fill time plus the ${SEND_TIMEOUT_MS / 1000} s timeout, not the timeout alone.`;
    }
    out.push(
      `**${name}** — with ${SLOW_POOL} ${v === SLOW_FAST ? 'full-speed' : '1 ms/token'} streams not being read holding the ${SLOW_POOL}-connection pool, one more request for the model was answered after ${each(s3, (c) => victimText(c, v.boundMs))} (send timeout: ${each(s3, (c) => (typeof c.extra.sendTimeoutMs === 'number' ? `${c.extra.sendTimeoutMs} ms` : 'none'))}).${why}`,
    );
  }
  return out;
}

function report(cells: Cell[], targets: Target[], startedAt: Date, elapsedMs: number): void {
  const cpu = os.cpus();
  const lines: string[] = [];
  lines.push('# Hostile clients benchmark (issue 12)', '');
  lines.push(
    `Run ${startedAt.toISOString()} on ${cpu.length} × ${cpu[0]?.model ?? 'cpu'} (a **shared 2-core machine**: other engineers' tests were running, so timings are indicative), Node ${process.version}, ${os.platform()} ${os.release()}; the whole run took ${f(elapsedMs / 1000)} s. ` +
      `Each cell is one fresh \`glidepath up\` (the built \`dist/cli/main.js\` run as a script, so its \`#!\` V8 flags apply) with one simulated worker, on 127.0.0.1; scenarios run in turn on each target (S1 on every target, then S2, …). \`npm run bench:hostile\`; add \`GLIDEPATH_CLI_BEFORE=<other checkout>/dist/cli/main.js\` to measure an older build beside this one.`,
    '',
  );
  lines.push('Targets:', '');
  for (const t of targets)
    lines.push(`- **${t.name}**: \`${t.cli}\` at ${t.commit}${t.hasLimits ? '' : ' (no issue-12 config keys: its config omits `send_timeout_ms`)'}`);
  lines.push('');
  lines.push(
    'Columns: gateway RSS (VmRSS sampled every 50 ms) just before the hostile client, its peak, and at the end (1 s after the hostile client has gone); the victim measurement (see below; "> N s" = not answered within the bench\'s bound); a bystander doing `GET /health` every ~10 ms on its own keep-alive connection, and (S1, S2) a small non-streaming chat completion (max_tokens 4) every ~100 ms on another — latency p50 / p99 / max in ms from the hostile client\'s start to the end, a request still waiting at the end counted with its wait so far. Quiet /health p99 is the same bystander during the 1 s before. The bystander and the RSS sampler run in their own thread.',
    '',
  );
  lines.push(
    '| scenario | target | RSS start → peak → end MiB | victim | /health p50 / p99 / max ms | quiet /health p99 ms | chat p50 / p99 / max ms | details |',
  );
  lines.push('|---|---|---|---|---|---|---|---|');
  for (const c of cells) {
    lines.push(
      `| ${c.scenario} | ${c.target} | ${f(c.rssStartMiB)} → ${f(c.rssPeakMiB)} → ${f(c.rssEndMiB)} | ${victimText(c, bound(c.scenario))} | ${lat(c.health)} | ${f(c.healthQuiet.p99, 1)} | ${lat(c.chat)} | ${extraText(c)} |`,
    );
  }
  lines.push('', '## What each scenario does', '');
  lines.push(
    `- **S1** — one connection, paused from the start (the client never reads), gets ${FLOOD_REQUESTS} pipelined streaming chat completions (max_tokens ${FLOOD_TOKENS}, ignore_eos: ~${f((FLOOD_TOKENS * 205) / 1024)} KiB of answer each) in one write (${f((FLOOD_REQUESTS * floodRequest().length) / 1024)} KiB); held ${FLOOD_HOLD_MS / 1000} s; "reached the worker" is the simulator's own \`vllm:request_success_total\` over the hold, the send queue is \`ss\`'s Send-Q of the gateway's socket, and the RSS peak is the peak during the hold (the peak while the answers are then served is in the details). Then the client reads: the victim time is until all ${FLOOD_REQUESTS} answers have arrived (bound ${FLOOD_DRAIN_BOUND_MS / 1000} s). Simulator at zero delay.`,
    `- **S2** — a valid chat completion whose JSON body is ${TRICKLE_BODY_BYTES} bytes (a short prompt, padded with JSON whitespace so the simulator's work is trivial and the time is the gateway's), sent with \`Transfer-Encoding: chunked\` as one-byte chunks (${f((TRICKLE_BODY_BYTES * 6) / 1048576, 1)} MiB on the wire) in ${TRICKLE_WRITE_BYTES / 1024} KiB socket writes; the victim time runs from the first byte sent to the complete answer (bound ${TRICKLE_BOUND_MS / 1000} s). Simulator at zero delay.`,
    `- **S3** — \`gateway.connections_per_worker: ${SLOW_POOL}\` (default 128; smaller to keep the run short on 2 cores — the effect is the same: every connection to the worker is held) and, where the build has it, \`gateway.send_timeout_ms: ${SEND_TIMEOUT_MS}\` (default 60 000). ${SLOW_POOL} clients each start a streaming chat completion (ignore_eos) and never read; ${SLOW_SETTLE_MS} ms later one non-streaming chat completion goes to the same model, and the victim time is until it is answered. **S3a**: simulator at zero delay, max_tokens ${SLOW_FAST.maxTokens} (~${f((SLOW_FAST.maxTokens * 205) / 1048576)} MiB per stream, more than the socket buffers hold), bound ${SLOW_FAST.boundMs / 1000} s. **S3b**: simulator at 1 ms/token (~200 KB/s per stream), max_tokens ${SLOW_PACED.maxTokens} (~${SLOW_PACED.maxTokens / 1000} s of tokens), bound ${SLOW_PACED.boundMs / 1000} s. The send queues are \`ss\`'s Send-Q of the gateway's sockets to the slow readers.`,
    '',
  );
  lines.push('## What it shows', '');
  for (const s of findings(cells, targets)) lines.push(`- ${s}`);
  lines.push('');
  const md = lines.join('\n');
  const outDir = path.join(root, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'hostile.md'), md);
  writeFileSync(
    path.join(outDir, 'hostile.json'),
    JSON.stringify(
      {
        at: startedAt.toISOString(),
        node: process.version,
        cpus: cpu.length,
        cpuModel: cpu[0]?.model ?? '',
        elapsedMs: Math.round(elapsedMs),
        settings: {
          FLOOD_REQUESTS,
          FLOOD_TOKENS,
          FLOOD_HOLD_MS,
          FLOOD_DRAIN_BOUND_MS,
          TRICKLE_BODY_BYTES,
          TRICKLE_WRITE_BYTES,
          TRICKLE_BOUND_MS,
          SLOW_POOL,
          SEND_TIMEOUT_MS,
          SLOW_SETTLE_MS,
          SLOW_FAST,
          SLOW_PACED,
          QUIET_MS,
          AFTER_MS,
          HEALTH_EVERY_MS,
          CHAT_EVERY_MS,
          RSS_EVERY_MS,
        },
        targets,
        cells,
      },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write(md);
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
    report(cells, targets, startedAt, performance.now() - t0);
  } finally {
    clearTimeout(watchdog);
    await cleanup();
    rmSync(base, { recursive: true, force: true });
  }
}

if (isMainThread) {
  main().then(
    // the observer threads and sockets are all closed; exit even if a library keeps a timer
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench:hostile failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
