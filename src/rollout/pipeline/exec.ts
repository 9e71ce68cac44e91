// Running one pipeline command: no shell, `glidepath`/`dynamo` mapped to this very CLI, output
// streamed line by line, a timeout and an abort signal that kill the command's whole process group.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PIPELINE_DEFAULTS } from './defaults.js';

/**
 * dist/cli/main.js, found from this file (dist/rollout/pipeline/exec.js) so a clean checkout works;
 * when this file runs from src/ (tests, tsx) the built CLI beside it is used.
 */
export const CLI_PATH = ((): string => {
  const beside = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
  const built = fileURLToPath(new URL('../../../dist/cli/main.js', import.meta.url));
  return existsSync(beside) || !existsSync(built) ? beside : built;
})();

/** Names that run this CLI: `glidepath`, and `dynamo` so seed 000's pipelines run unchanged. */
export const CLI_ALIASES = ['glidepath', 'dynamo'];

/** The argv actually spawned for a step's argv. */
export function resolveArgv(argv: readonly string[], cliPath = CLI_PATH): string[] {
  const [cmd, ...rest] = argv;
  if (cmd !== undefined && CLI_ALIASES.includes(cmd)) return [process.execPath, cliPath, ...rest];
  return [...argv];
}

export interface ExecResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** Set when the command could not be started at all (e.g. not found). */
  spawnError: string | undefined;
  durationMs: number;
}

export interface ExecOptions {
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal | undefined;
  /** Each complete output line (and a final partial line), without its newline. */
  onLine: (line: string, stream: 'stdout' | 'stderr') => void;
  killGraceMs?: number;
  cwd?: string;
}

export function describeExit(r: ExecResult, timeoutMs: number): string {
  if (r.spawnError !== undefined) return r.spawnError;
  if (r.timedOut) return `timed out after ${timeoutMs} ms and was killed`;
  if (r.aborted) return 'stopped (pipeline timeout or interrupt)';
  if (r.signal) return `killed by ${r.signal}`;
  return `exit ${r.exitCode}`;
}

export function execCommand(argv: readonly string[], o: ExecOptions): Promise<ExecResult> {
  const start = Date.now();
  const [cmd, ...args] = argv;
  return new Promise((resolve) => {
    if (cmd === undefined) {
      resolve({ exitCode: null, signal: null, timedOut: false, aborted: false, spawnError: 'empty command', durationMs: 0 });
      return;
    }
    if (o.signal?.aborted) {
      resolve({ exitCode: null, signal: null, timedOut: false, aborted: true, spawnError: undefined, durationMs: 0 });
      return;
    }
    // detached: the command leads its own process group, so a timeout also stops its children
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: o.env, cwd: o.cwd, detached: process.platform !== 'win32' });
    let timedOut = false;
    let aborted = false;
    let spawnError: string | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const kill = (sig: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        if (process.platform !== 'win32') process.kill(-child.pid, sig);
        else child.kill(sig);
      } catch {
        // already gone
      }
    };
    const stop = () => {
      kill('SIGTERM');
      killTimer ??= setTimeout(() => kill('SIGKILL'), o.killGraceMs ?? PIPELINE_DEFAULTS.killGraceMs);
      killTimer.unref();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, o.timeoutMs);
    const onAbort = () => {
      aborted = true;
      stop();
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });

    const pipe = (stream: NodeJS.ReadableStream, name: 'stdout' | 'stderr') => {
      let buf = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        buf += chunk;
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          o.onLine(buf.slice(0, i).replace(/\r$/, ''), name);
          buf = buf.slice(i + 1);
        }
      });
      stream.on('end', () => {
        if (buf !== '') o.onLine(buf, name);
        buf = '';
      });
    };
    pipe(child.stdout, 'stdout');
    pipe(child.stderr, 'stderr');
    child.on('error', (err: NodeJS.ErrnoException) => {
      spawnError =
        err.code === 'ENOENT' ? `command not found: ${cmd}` : err.code === 'EACCES' ? `permission denied: ${cmd}` : `cannot start ${cmd}: ${err.message}`;
    });
    // 'close' (not 'exit') so every output line has been delivered before the step reports
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      o.signal?.removeEventListener('abort', onAbort);
      resolve({ exitCode: code, signal, timedOut, aborted, spawnError, durationMs: Date.now() - start });
    });
  });
}
