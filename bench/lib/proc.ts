// Benchmark plumbing: start/stop processes, wait for ports, and read a process's CPU time from /proc.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import { request } from 'undici';

/** The repository's root: the nearest folder above this file with a package.json (it runs from bench/lib/ or dist-bench/bench/lib/). */
function findRoot(from: string): string {
  for (let d = from, i = 0; i < 8; i++, d = path.dirname(d)) if (existsSync(path.join(d, 'package.json'))) return d;
  throw new Error(`no package.json above ${from}`);
}
export const ROOT = findRoot(path.dirname(fileURLToPath(import.meta.url)));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface Proc {
  child: ChildProcess;
  pid: number;
  stop(): Promise<void>;
  output(): string;
}

/**
 * Every process a benchmark started and has not stopped. A benchmark stopped from outside (Ctrl-C,
 * kill) stops them too: a killed run once left five gateways and two simulators running for hours,
 * under every later measurement.
 */
const live = new Set<ChildProcess>();
let handlers = false;
function stopAllOnSignal(): void {
  if (handlers) return;
  handlers = true;
  const stopAll = (): void => {
    for (const c of live) c.kill('SIGTERM');
  };
  process.once('exit', stopAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      stopAll();
      process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1));
    });
  }
}

export function start(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Proc {
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  stopAllOnSignal();
  live.add(child);
  child.once('exit', () => live.delete(child));
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
    if (out.length > 100_000) out = out.slice(-50_000);
  });
  child.stderr?.on('data', (c: Buffer) => {
    out += c.toString();
    if (out.length > 100_000) out = out.slice(-50_000);
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    pid: child.pid ?? -1,
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

/** Poll until `url` answers 2xx (process start-up has no push signal). */
export async function waitFor(url: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      const r = await request(url);
      await r.body.dump();
      if (r.statusCode < 300) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not come up within ${timeoutMs} ms`);
}

const TICKS = 100; // USER_HZ on Linux

/** utime + stime of a process (and its waited-for children) in ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields after the command: state(3) … utime(14) stime(15) → indexes 11, 12 in `rest`
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return ((utime + stime) * 1000) / TICKS;
}

/**
 * The arguments of a simulator as fast as the machine allows (no jitter, instant prefill, room for every
 * request), so that what a benchmark measures is the proxy in front of it; `names` are its model-naming
 * flags (`--model x` or `--served-model-name a b …`).
 */
export function fastSimArgs(
  cli: string,
  port: number,
  names: string[],
  interTokenMs = 0,
  o: { maxNumSeqs?: number; kvCapacityTokens?: number } = {},
): string[] {
  return [
    cli,
    'sim',
    '--port',
    String(port),
    ...names,
    '--inter-token-ms',
    String(interTokenMs),
    '--jitter',
    '0',
    '--itl-growth-per-seq',
    '0',
    '--prefill-tokens-per-s',
    '10000000',
    '--max-num-seqs',
    String(o.maxNumSeqs ?? 4096),
    '--kv-capacity-tokens',
    String(o.kvCapacityTokens ?? 100_000_000),
    '--max-waiting-requests',
    '100000',
  ];
}

/** fastSimArgs' simulator, started; resolves once it answers /health. */
export async function startFastSim(cli: string, port: number, names: string[], interTokenMs = 0): Promise<Proc> {
  const p = start(process.execPath, fastSimArgs(cli, port, names, interTokenMs));
  await waitFor(`http://127.0.0.1:${port}/health`);
  return p;
}

/** Run the load generator `script` (bench/lib/loadgen.ts, built) with `opts`; resolves to the JSON it prints. */
export function runLoadgen<T>(script: string, opts: Record<string, unknown>): Promise<T> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [script, JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.once('exit', (code) => {
      if (code !== 0) reject(new Error(`loadgen exited ${code}`));
      else resolve(JSON.parse(out) as T);
    });
  });
}
