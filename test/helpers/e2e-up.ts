// End-to-end helpers: run `glidepath up` as a real child process (port 0 for both listeners, URLs
// parsed from its stderr), talk to its admin API, stream chat completions through the gateway, and
// clean up every process started, including simulator workers orphaned by a SIGKILL.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import type { Dispatcher } from 'undici';
import { readSse } from '../../src/cli/client.js';
import { pidAlive } from '../../src/providers/child.js';
import { GATEWAY_NODE_FLAGS } from '../../src/cli/up/node-flags.js';

/** The repository root: the nearest directory above this file with a package.json (this file may run compiled, e.g. from dist-bench/). */
function findRoot(start: string): string {
  for (let d = start, i = 0; i < 8; i++, d = path.dirname(d)) if (existsSync(path.join(d, 'package.json'))) return d;
  throw new Error(`no package.json above ${start}`);
}
export const ROOT = findRoot(import.meta.dirname);
export const CLI = path.join(ROOT, 'dist/cli/main.js');

const READY_LINE = /glidepath: data plane (http:\/\/\S+)\s+admin API (http:\/\/\S+)\s+state (.+)$/m;

/** `npm test` builds first (pretest); a direct vitest run needs `npm run build` beforehand. */
export function ensureBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`);
}

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `glidepath-${prefix}-`));
}

export interface SimVersionSpec {
  id: string;
  seed: number;
  replicas?: number;
  interTokenMs?: number;
  /** The simulator's load time (its `load_time_ms`). */
  loadTimeMs?: number;
}

/** A glidepath.yaml with one model whose first version is the whole route; the others are registered. `health`: the model's health settings, a YAML flow mapping. */
export function simConfigYaml(opts: { model: string; versions: SimVersionSpec[]; gpus?: number; dataDir: string; health?: string }): string {
  const first = opts.versions[0];
  if (!first) throw new Error('simConfigYaml: at least one version');
  const lines = [
    'server:',
    `  data_dir: ${JSON.stringify(opts.dataDir)}`,
    `gpus: { count: ${opts.gpus ?? 8}, memory_gb: 80 }`,
    'models:',
    `  - name: ${opts.model}`,
    ...(opts.health === undefined ? [] : [`    health: ${opts.health}`]),
    '    versions:',
  ];
  for (const v of opts.versions) {
    const load = v.loadTimeMs === undefined ? '' : `, load_time_ms: ${v.loadTimeMs}`;
    lines.push(
      `      - id: ${v.id}`,
      `        replicas: ${v.replicas ?? 1}`,
      `        provider: { kind: sim, sim: { seed: ${v.seed}, inter_token_ms: ${v.interTokenMs ?? 0}, jitter: 0${load} } }`,
    );
  }
  lines.push('    route:', `      weights: { ${first.id}: 1 }`, '');
  return lines.join('\n');
}

export function writeConfig(dir: string, yaml: string): string {
  const file = path.join(dir, 'glidepath.yaml');
  writeFileSync(file, yaml);
  return file;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface AdminReply<T> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | undefined>;
}

export interface UpProcess {
  proc: ChildProcess;
  pid: number;
  dataUrl: string;
  adminUrl: string;
  dataDir: string;
  token: string;
  exited: Promise<Exit>;
  stderr(): string;
  /** Admin API call; returns status and parsed JSON whatever the status. */
  admin<T = unknown>(method: string, p: string, body?: unknown): Promise<AdminReply<T>>;
  /** Admin API call that must answer 200; throws with the body otherwise. */
  ok<T = unknown>(method: string, p: string, body?: unknown): Promise<T>;
  /** Send a signal and wait for the process to exit. */
  kill(signal: NodeJS.Signals): Promise<Exit>;
}

/** Every `up` process and worker pid started by these helpers (for `cleanupAll`). */
const started = new Set<ChildProcess>();
const workerPids = new Set<number>();

/** Pids of the live simulator processes of `model` (of its `version` only, if given) on this machine, ascending: their command line names both. */
export function simPids(model: string, version?: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    const at = (flag: string) => argv[argv.indexOf(flag) + 1];
    if (argv.includes('sim') && at('--model') === model && (version === undefined || at('--version') === version) && pidAlive(Number(d))) pids.push(Number(d));
  }
  return pids.sort((a, b) => a - b);
}

/** Remember worker pids so cleanup can kill them even if `up` was SIGKILLed. */
export function trackWorkerPids(pids: Iterable<number | null | undefined>): void {
  for (const p of pids) if (typeof p === 'number' && p > 0) workerPids.add(p);
}

/** SIGKILL every `up` still running and every worker pid seen. Idempotent. */
export function cleanupAll(): void {
  for (const p of started) {
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  }
  started.clear();
  for (const pid of workerPids) {
    if (pidAlive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone in between
      }
    }
  }
  workerPids.clear();
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Start `glidepath up` and resolve once it prints its listening line (both listeners on port 0).
 * Rejects with its stderr if it exits first or does not come up within `timeoutMs`.
 */
export async function startUp(opts: {
  configFile: string;
  dataDir: string;
  keepWorkers?: boolean;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  nofile?: number;
  /** The admin token (a token from the config), instead of the generated one in the data directory. */
  token?: string;
}): Promise<UpProcess> {
  const args = [
    ...GATEWAY_NODE_FLAGS,
    CLI,
    'up',
    '--config',
    opts.configFile,
    '--listen',
    '127.0.0.1:0',
    '--admin-listen',
    '127.0.0.1:0',
    '--data-dir',
    opts.dataDir,
  ];
  if (opts.keepWorkers) args.push('--keep-workers');
  // nofile: run under that descriptor limit, soft and hard (util-linux's prlimit, on every Debian)
  const [cmd, argv] = opts.nofile === undefined ? [process.execPath, args] : ['prlimit', [`--nofile=${opts.nofile}:${opts.nofile}`, process.execPath, ...args]];
  const proc = spawn(cmd, argv, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...opts.env } });
  started.add(proc);
  let err = '';
  const exited = new Promise<Exit>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  void exited.then(() => started.delete(proc));
  const urls = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`glidepath up did not come up within ${opts.timeoutMs ?? 30_000} ms; stderr:\n${err}`));
    }, opts.timeoutMs ?? 30_000);
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (d: string) => {
      err += d;
      const m = READY_LINE.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
    void exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`glidepath up exited (code ${String(e.code)}, signal ${String(e.signal)}) before serving; stderr:\n${err}`));
    });
  });
  const dataUrl = urls[1] as string;
  const adminUrl = urls[2] as string;
  const token = opts.token ?? readFileSync(path.join(opts.dataDir, 'admin-token'), 'utf8').trim();
  const admin = async <T>(method: string, p: string, body?: unknown): Promise<AdminReply<T>> => {
    const res = await request(`${adminUrl}/admin/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.body.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: res.statusCode, body: parsed as T, headers: res.headers };
  };
  const up: UpProcess = {
    proc,
    pid: proc.pid ?? -1,
    dataUrl,
    adminUrl,
    dataDir: opts.dataDir,
    token,
    exited,
    stderr: () => err,
    admin,
    async ok<T>(method: string, p: string, body?: unknown): Promise<T> {
      const r = await admin<T>(method, p, body);
      if (r.status !== 200) throw new Error(`${method} ${p} answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async kill(signal: NodeJS.Signals): Promise<Exit> {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  // a cluster replica serves before any replica leads (or while the one that led is dead and its lease
  // runs out): its admin calls are answered once one does
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  const electing = (r: AdminReply<unknown>) => /no_leader|leader_unreachable/.test(JSON.stringify(r.body));
  try {
    let ws = await admin<WorkerView[]>('GET', '/workers');
    while (ws.status >= 500 && electing(ws) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      ws = await admin<WorkerView[]>('GET', '/workers');
    }
    if (ws.status !== 200) throw new Error(`GET /workers answered ${ws.status}: ${JSON.stringify(ws.body)}`);
    trackWorkerPids(ws.body.map((w) => w.pid));
  } catch (err) {
    // its workers are not known to the test, and a SIGKILL (cleanupAll) would leave them running
    // (workers outlive a killed up, for adoption): a SIGTERM stops them with it
    await up.kill('SIGTERM');
    throw err;
  }
  return up;
}

export interface WorkerView {
  id: string;
  model: string;
  version: string;
  endpoint: string;
  pid: number | null;
  state: string;
  routable: boolean;
}

export interface VersionView {
  version: string;
  status: string;
  rollback_eligible: boolean;
  rollback_blocked_reason: string | null;
  loaded_at: number | null;
  gpus: string[];
}

export interface RouteView {
  model: string;
  weights: Record<string, number>;
  stable: string;
  revision: number;
}

// ---- streaming client ----------------------------------------------------------------------

export interface StreamResult {
  ok: boolean;
  status: number;
  /** `x-glidepath-version` of the response ('' when absent). */
  version: string;
  worker: string;
  /** `x-glidepath-prefill-worker`: the worker that prefilled it, in disaggregated serving ('' otherwise). */
  prefillWorker: string;
  text: string;
  events: number;
  error?: string;
  /** performance.now() when the request was sent, headers arrived, the stream ended. */
  startedAt: number;
  headersAt: number;
  endedAt: number;
}

export function chatBody(model: string, prompt: string, maxTokens: number, stream = true, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, temperature: 0, stream, ...extra });
}

/**
 * Stream one chat completion (temperature 0) from `base` and read every SSE event. A success is a
 * 200 whose stream ends with `data: [DONE]` and whose events all parse.
 */
export async function streamChat(
  base: string,
  opts: {
    model: string;
    prompt: string;
    maxTokens: number;
    dispatcher?: Dispatcher;
    headers?: Record<string, string>;
    extra?: Record<string, unknown>;
    /** Called when the response headers arrive (the gateway has chosen the version). */
    onHeaders?: (version: string) => void;
  },
): Promise<StreamResult> {
  const startedAt = performance.now();
  const out: StreamResult = { ok: false, status: 0, version: '', worker: '', prefillWorker: '', text: '', events: 0, startedAt, headersAt: 0, endedAt: 0 };
  try {
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body: chatBody(opts.model, opts.prompt, opts.maxTokens, true, opts.extra),
      dispatcher: opts.dispatcher,
    });
    out.headersAt = performance.now();
    out.status = res.statusCode;
    out.version = headerString(res.headers['x-glidepath-version']);
    out.worker = headerString(res.headers['x-glidepath-worker']);
    out.prefillWorker = headerString(res.headers['x-glidepath-prefill-worker']);
    opts.onHeaders?.(out.version);
    if (res.statusCode !== 200) {
      out.error = `status ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`;
      return out;
    }
    let buf = '';
    let done = false;
    const parts: string[] = [];
    res.body.setEncoding('utf8');
    for await (const chunk of res.body as AsyncIterable<string>) {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of ev.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          out.events++;
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          const j = JSON.parse(data) as { error?: unknown; choices?: { delta?: { content?: string } }[] };
          if (j.error !== undefined) throw new Error(`error event in stream: ${data.slice(0, 300)}`);
          parts.push(j.choices?.[0]?.delta?.content ?? '');
        }
      }
    }
    out.text = parts.join('');
    if (!done) throw new Error(`stream ended without [DONE] after ${out.events} event(s)`);
    if (buf.trim() !== '') throw new Error(`trailing bytes after the last event: ${JSON.stringify(buf.slice(0, 100))}`);
    out.ok = true;
  } catch (err) {
    out.error = (err as Error).message;
  } finally {
    out.endedAt = performance.now();
  }
  return out;
}

export function headerString(h: string | string[] | undefined): string {
  return Array.isArray(h) ? h.join(',') : (h ?? '');
}

/** A client agent with room for `n` concurrent streams to one origin. */
export function loadAgent(n: number): Agent {
  return new Agent({ connections: n, pipelining: 1, keepAliveTimeout: 30_000 });
}

/** Run `fn` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  return out;
}

export interface ControlEventView {
  seq: number;
  kind: string;
  model?: string;
  version?: string;
  message: string;
}

/**
 * Resolve with the first control-plane event of `kind` (matching `pred`) on the admin event stream
 * (history included); rejects after `timeoutMs`. Start it before causing the event.
 */
export async function waitForEvent(
  up: UpProcess,
  kind: string,
  pred: (e: ControlEventView) => boolean = () => true,
  timeoutMs = 15_000,
): Promise<ControlEventView> {
  const log = collectEvents(up);
  try {
    return await log.waitFor((e) => e.kind === kind && pred(e), kind, timeoutMs);
  } finally {
    log.stop();
  }
}

/** Every control event of `up` from now on (the stream replays its history first), kept in order until `stop`. */
export interface EventLog {
  readonly events: (ControlEventView & { at: number; data?: unknown })[];
  /** Resolves with the first event (already seen or to come) matching `pred`; rejects after `timeoutMs`. */
  waitFor(
    pred: (e: ControlEventView & { at: number; data?: unknown }) => boolean,
    what: string,
    timeoutMs?: number,
  ): Promise<ControlEventView & { at: number; data?: unknown }>;
  stop(): void;
}

export function collectEvents(up: UpProcess): EventLog {
  const ac = new AbortController();
  const events: (ControlEventView & { at: number; data?: unknown })[] = [];
  const waiters: (() => void)[] = [];
  void (async () => {
    try {
      const res = await request(`${up.adminUrl}/admin/v1/events`, {
        headers: { authorization: `Bearer ${up.token}`, accept: 'text/event-stream' },
        signal: ac.signal,
      });
      for await (const sse of readSse(res.body)) {
        if (sse.data === '') continue;
        events.push(JSON.parse(sse.data) as ControlEventView & { at: number });
        for (const w of waiters.splice(0)) w();
      }
    } catch {
      // stopped, or up went away
    }
  })();
  return {
    events,
    async waitFor(pred, what, timeoutMs = 20_000) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`no ${what} event within ${timeoutMs} ms; events: ${events.map((e) => `${e.kind}: ${e.message}`).join(' | ')}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    },
    stop: () => ac.abort(),
  };
}

/** `clients` clients streaming short chats from `up()`'s gateway without pause until `stop` resolves; every result, in order. */
export async function loadFor(up: () => UpProcess, model: string, clients: number, stop: Promise<unknown>): Promise<StreamResult[]> {
  const agent = loadAgent(clients);
  let running = true;
  void stop.then(() => (running = false));
  const got: StreamResult[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      while (running) got.push(await streamChat(up().dataUrl, { model, prompt: `client ${i} asks`, maxTokens: 8, dispatcher: agent }));
    }),
  );
  await agent.close();
  return got;
}
