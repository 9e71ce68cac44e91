// Test helpers for the admin CLI: one real `glidepath up` per test file (port 0, temp data dir) and
// the real CLI binary run against it.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { OPTIONAL_TOOLS, findTool, itWithTool } from '../../helpers/tools.js';

export const ROOT = join(import.meta.dirname, '../../..');
export const MAIN = join(ROOT, 'dist/cli/main.js');

/**
 * `npm test` builds first (pretest); a direct vitest run needs `npm run build` before it. Only a
 * missing build is built here: rebuilding a "stale" dist while another test file's CLI processes
 * are loading it made them fail at random (a half-written module), and in a shared tree the
 * sources are always newer than something.
 */
export function ensureBuilt(): void {
  if (!existsSync(MAIN)) spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'ignore' });
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build`);
}

export interface Up {
  dir: string;
  dataDir: string;
  adminUrl: string;
  dataUrl: string;
  /** Everything `up` wrote to stderr so far. */
  log(): string;
  /** SIGTERM, wait for the exit, start again on the same config and data dir (new ports). */
  restart(): Promise<void>;
  stop(): Promise<number | null>;
}

interface Proc {
  child: ChildProcessWithoutNullStreams;
  exited: Promise<number | null>;
  dataUrl: string;
  adminUrl: string;
}

async function launch(cfgFile: string, dir: string, dataDir: string, onLog: (l: string) => void): Promise<Proc> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [MAIN, 'up', '--config', cfgFile, '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
    { cwd: dir, env: cleanEnv() },
  );
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let log = '';
  const lines = createInterface({ input: child.stderr });
  const ready = new Promise<{ dataUrl: string; adminUrl: string }>((resolve, reject) => {
    lines.on('line', (l) => {
      log += `${l}\n`;
      onLog(l);
      const m = /^glidepath: data plane (\S+)\s+admin API (\S+)/.exec(l);
      if (m) resolve({ dataUrl: m[1] as string, adminUrl: m[2] as string });
    });
    void exited.then((code) => reject(new Error(`glidepath up exited with ${code} before listening:\n${log}`)));
  });
  return { child, exited, ...(await ready) };
}

async function terminate(p: Proc): Promise<number | null> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  return p.exited;
}

/** Start `glidepath up` with `config` in a fresh temp dir; resolves once it prints its URLs. */
export async function startUp(config: string): Promise<Up> {
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'gp-cli-'));
  const dataDir = join(dir, 'data');
  const cfgFile = join(dir, 'glidepath.yaml');
  writeFileSync(cfgFile, config);
  let log = '';
  const onLog = (l: string) => (log += `${l}\n`);
  let proc = await launch(cfgFile, dir, dataDir, onLog);
  const up: Up = {
    dir,
    dataDir,
    adminUrl: proc.adminUrl,
    dataUrl: proc.dataUrl,
    log: () => log,
    async restart() {
      const code = await terminate(proc);
      if (code !== 0) throw new Error(`glidepath up exited with ${code} on SIGTERM:\n${log}`);
      proc = await launch(cfgFile, dir, dataDir, onLog);
      up.adminUrl = proc.adminUrl;
      up.dataUrl = proc.dataUrl;
    },
    async stop() {
      const code = await terminate(proc);
      rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
  return up;
}

/** The environment without any GLIDEPATH_* the developer may have set. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GLIDEPATH_')) env[k] = v;
  return { ...env, ...extra };
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (for `--output json`). */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- CLI JSON output is checked field by field
}

/** Run the real CLI binary; `env` replaces the GLIDEPATH_* variables (none inherited). */
export function gp(args: readonly string[], env: Record<string, string> = {}, opts: { cwd?: string; input?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { cwd: opts.cwd ?? tmpdir(), env: cleanEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin.end(opts.input ?? '');
    child.on('error', reject);
    child.on('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** `script` gives the CLI a terminal (stdin and stderr are TTYs); undefined where it is missing. */
const SCRIPT = findTool('script');

/** `it` for tests that use gpTty: skipped where script(1) is missing, a failure under CI. */
export const itWithTty = itWithTool('script', OPTIONAL_TOOLS.script);

/** Run the CLI on a pseudo-terminal with `input` typed in (for prompts). Output is stdout+stderr. */
export function gpTty(args: readonly string[], env: Record<string, string>, input: string): Promise<Run> {
  if (SCRIPT === undefined) return Promise.reject(new Error(`script(1) is not installed (apt-get install ${OPTIONAL_TOOLS.script}): use itWithTty`));
  const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
  const cmd = [process.execPath, MAIN, ...args].map(quote).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn(SCRIPT, ['-qec', cmd, '/dev/null'], { cwd: tmpdir(), env: cleanEnv(env) });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.resume();
    child.stdin.end(input);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr: '', json: undefined }));
  });
}
