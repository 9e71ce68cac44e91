// Worker child processes: started through the launcher helper (launcher.ts) with output going straight
// to a log file (so a worker outlives a crashed parent without EPIPE), notice exits, stop with SIGTERM then SIGKILL.
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { DEFAULTS } from '../defaults.js';
import { answersHealth } from './engine.js';
import { Launcher } from './launcher.js';
import type { StartRequest, WorkerExit } from './types.js';

export interface Child {
  pid: number;
  logFile: string;
  exited: Promise<WorkerExit>;
  /** Marks the exit as expected, sends SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs: number): Promise<WorkerExit>;
  /** Its start is recorded (onSpawn): it may outlive this process. Until then this process's death stops it (launcher.ts). */
  keep(): void;
}

/** The helper that starts this process's workers (launcher.ts), started on the first spawn. */
let shared: Launcher | undefined;

/** Start a worker process whose output goes to `<workDir>/<name>.log`; rejects (worker_start_failed) when it cannot be started. */
export async function spawnChild(cmd: string, args: readonly string[], opts: { env: NodeJS.ProcessEnv; workDir: string; name: string }): Promise<Child> {
  mkdirSync(opts.workDir, { recursive: true });
  const logFile = path.join(opts.workDir, `${opts.name.replace(/[^A-Za-z0-9._-]/g, '_')}.log`);
  shared ??= new Launcher((pid) => adoptedPid(pid).exited);
  const { pid, ended, kill, keep } = await shared.spawn(cmd, args, opts.env, logFile);
  let expected = false;
  let done = false;
  const exited = ended.then(({ code, signal }): WorkerExit => {
    done = true;
    return { code, signal, expected };
  });
  return {
    pid,
    logFile,
    exited,
    keep,
    async stop(graceMs: number): Promise<WorkerExit> {
      expected = true;
      if (done) return exited;
      // (the launcher signals only a worker whose end it has not heard)
      kill('SIGTERM');
      const timer = setTimeout(() => kill('SIGKILL'), graceMs);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
}

/**
 * Tell the start's onSpawn (the control plane records the worker, pid and port) and, once recorded,
 * keep the child: it may outlive this process now. A start no one records is never kept: nothing
 * could find it after a restart, so this process's death stops it (launcher.ts).
 */
export async function recordSpawn(child: Child, onSpawn: StartRequest['onSpawn'], url: string, port: number): Promise<void> {
  if (onSpawn === undefined) return;
  await onSpawn({ pid: child.pid, url, info: { logFile: child.logFile, port } });
  child.keep();
}

/**
 * Is a process with this pid alive (signal-0 probe)? A zombie is not: a worker whose parent died
 * (the launcher, or a gateway before a restart) is reparented, and a parent that does not reap
 * would otherwise keep its pid "alive" for ever.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  if (process.platform !== 'linux') return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** A port that was free a moment ago on `host` (the OS picks it). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A worker process we watch but did not start (adopted after a restart). */
export interface Adopted {
  exited: Promise<WorkerExit>;
  stop(graceMs: number): Promise<void>;
}

/**
 * A worker adopted after a restart is not our child: no exit event and no ChildProcess to signal.
 * Its pid is watched instead (signal-0 probe every `intervalMs`), so an unexpected exit is noticed,
 * and stopping it waits for the exit (SIGTERM, then SIGKILL after the grace period) as for a child.
 */
export function adoptedPid(pid: number, intervalMs: number = DEFAULTS.providers.adoptedPollMs): Adopted {
  let expected = false;
  let timer: NodeJS.Timeout | undefined;
  let onExit: () => void = () => undefined;
  const exited = new Promise<WorkerExit>((resolve) => {
    onExit = () => {
      if (timer) clearInterval(timer);
      resolve({ code: null, signal: null, expected });
    };
    timer = setInterval(() => {
      if (!pidAlive(pid)) onExit();
    }, intervalMs);
    timer.unref();
  });
  return {
    exited,
    async stop(graceMs: number): Promise<void> {
      expected = true;
      if (!pidAlive(pid)) return onExit();
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + graceMs;
      // polling is the only way to see a non-child exit
      const { stopPollFirstMs: first, stopPollMaxMs: most } = DEFAULTS.providers;
      for (let wait: number = first; pidAlive(pid) && Date.now() < deadline; wait = Math.min(most, wait * 2)) await new Promise((r) => setTimeout(r, wait));
      if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
      onExit();
    },
  };
}

/** Stop a process known only by its pid (a worker whose start a restart cut short): SIGTERM, then SIGKILL after `graceMs`. */
export async function stopPid(pid: number, graceMs: number): Promise<void> {
  await adoptedPid(pid).stop(graceMs);
}

/** A process worker recorded before a restart, adopted when its pid is alive and it answers its health endpoint. */
export async function adoptProcess(pid: number | undefined, url: string, healthPath: string): Promise<{ pid: number; adopted: Adopted } | undefined> {
  if (pid === undefined || !pidAlive(pid)) return undefined;
  if (!(await answersHealth(url, healthPath))) return undefined;
  return { pid, adopted: adoptedPid(pid) };
}

/** What a process provider keeps of a worker to stop it: the child it started, or the process it adopted. */
export interface ProcessWorker {
  readonly pid: number | undefined;
  child: Child | undefined;
  adopted?: Adopted | undefined;
}

/** Stop a worker we started or adopted; one we know only by pid gets a SIGTERM. */
export async function stopProcess(w: ProcessWorker, graceMs: number): Promise<void> {
  if (w.child) await w.child.stop(graceMs);
  else if (w.adopted) await w.adopted.stop(graceMs);
  else if (w.pid !== undefined && pidAlive(w.pid)) process.kill(w.pid, 'SIGTERM');
}
