import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, get, post } from './helpers.js';

const ROOT = join(import.meta.dirname, '../../..');
const MAIN = join(ROOT, 'dist/cli/main.js');

function newestMtime(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return t;
}

beforeAll(() => {
  // `npm test` builds first (pretest); rebuild here only when dist is missing or older than the sources
  const built = join(ROOT, 'dist/cli/sim/index.js');
  const stale = !existsSync(built) || statSync(built).mtimeMs < Math.max(newestMtime(join(ROOT, 'src/sim')), newestMtime(join(ROOT, 'src/cli')));
  if (stale) spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'ignore' });
  expect(existsSync(MAIN)).toBe(true);
}, 120_000);

interface Listening {
  event: string;
  url: string;
  model: string;
  version: string;
  pid: number;
}

const children = new Set<ChildProcessWithoutNullStreams>();
afterAll(() => {
  // a failed assertion must not leave a simulator running
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function start(args: string[]): { child: ChildProcessWithoutNullStreams; lines: AsyncIterator<string>; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [MAIN, 'sim', ...args], { cwd: ROOT });
  children.add(child);
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exit };
}

async function listening(lines: AsyncIterator<string>): Promise<Listening> {
  const r = await lines.next();
  return JSON.parse(r.value as string) as Listening;
}

describe('glidepath sim (CLI)', () => {
  it('prints one listening line per worker, serves, and exits 0 on SIGTERM', async () => {
    const { child, lines, exit } = start(['--port', '0', '--workers', '2', '--model', 'm1', '--version', 'v7', '--seed', '3']);
    const a = await listening(lines);
    const b = await listening(lines);
    for (const l of [a, b]) {
      expect(l).toMatchObject({ event: 'listening', model: 'm1', version: 'v7', pid: child.pid });
      expect(l.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(Object.keys(l)).toEqual(['event', 'url', 'model', 'version', 'pid']);
    }
    expect(a.url).not.toBe(b.url);
    const r = await post(a.url, '/v1/chat/completions', chat('cli', { model: 'm1', max_tokens: 4 }));
    expect(r.status).toBe(200);
    const r2 = await post(b.url, '/v1/chat/completions', chat('cli', { model: 'm1', max_tokens: 4 }));
    expect(r2.json.choices[0].message.content).toBe(r.json.choices[0].message.content);
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
  });

  it('applies timing and fault flags; the process-exit fault ends the process', async () => {
    const { lines, exit } = start(['--port', '0', '--process-exit', '--load-time-ms', '0']);
    const l = await listening(lines);
    expect((await get(l.url, '/admin/faults')).json.faults).toEqual({ process_exit: true });
    await expect(post(l.url, '/v1/chat/completions', chat('die'))).rejects.toThrow();
    expect(await exit).toBe(1);
  });

  it('exits 0 on SIGINT too', async () => {
    const { child, lines, exit } = start(['--port', '0']);
    await listening(lines);
    child.kill('SIGINT');
    expect(await exit).toBe(0);
  });

  it.each([
    [['--port', 'abc'], /--port must be a number/],
    [['--port', '0', '--jitter', '2'], /--jitter must be a number from 0 to 1/],
    [['--port', '0', '--error-status', '200'], /--error-status must be an HTTP status/],
    [['--port', '0', '--max-num-seqs', '1.5'], /--max-num-seqs must be a positive integer/],
    [['--port', '8000', '--workers', '2'], /--workers > 1 needs --port-base/],
    [['--port', '0', '--kv-role', 'decoder'], /--kv-role: expected both, prefill, decode, got "decoder"/],
    [['--port', '0', '--kv-layout', ' '], /--kv-layout must not be empty/],
    [['--port', '0', '--warmup-requests', '-1'], /--warmup-requests must be a non-negative integer/],
    [['--bogus'], /unknown option '--bogus'/],
  ])('bad flags %j exit 2 with a clear message', (args, message) => {
    const r = spawnSync(process.execPath, [MAIN, 'sim', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});
