// Worker child processes: spawn with output going straight to a log file (so a worker outlives a
// crashed parent without EPIPE), notice exits, stop with SIGTERM then SIGKILL.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import type { WorkerExit } from './types.js';

export interface Child {
  proc: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<WorkerExit>;
  /** Marks the exit as expected, sends SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs: number): Promise<WorkerExit>;
}

export function spawnChild(cmd: string, args: readonly string[], opts: { env: NodeJS.ProcessEnv; workDir: string; name: string }): Child {
  mkdirSync(opts.workDir, { recursive: true });
  const logFile = path.join(opts.workDir, `${opts.name.replace(/[^A-Za-z0-9._-]/g, '_')}.log`);
  const fd = openSync(logFile, 'a');
  let proc: ChildProcess;
  try {
    proc = spawn(cmd, args, { env: opts.env, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  let expected = false;
  const exited = new Promise<WorkerExit>((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal, expected }));
    proc.once('error', () => resolve({ code: null, signal: null, expected }));
  });
  return {
    proc,
    pid: proc.pid ?? -1,
    logFile,
    exited,
    async stop(graceMs: number): Promise<WorkerExit> {
      expected = true;
      if (proc.exitCode !== null || proc.signalCode !== null) return exited;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
}

/** Is a process with this pid alive (signal 0 probe)? */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
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
