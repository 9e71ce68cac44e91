// The launcher: worker processes started by a helper process (the gateway never forks), with their
// output in a log file, their ends as the helper saw them, errors that name the command, and workers
// still watched (by pid) when the helper itself dies.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { adoptedPid, pidAlive, spawnChild } from '../../../src/providers/child.js';
import { Launcher } from '../../../src/providers/launcher.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-launch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const node = process.execPath;
/** A process that prints `line` and stays until signalled (or exits with `code`). */
const prog = (line: string, code?: number): string[] => [
  '-e',
  `console.log(${JSON.stringify(line)});${code === undefined ? 'setInterval(() => {}, 1e6);' : `process.exit(${code});`}`,
];

describe('spawnChild through the launcher', () => {
  it('starts a process in its own environment, appends its output to the log, and stops it with SIGTERM (an expected exit)', async () => {
    const c = await spawnChild(node, ['-e', 'console.log(process.env.MARK); setInterval(() => {}, 1e6)'], {
      env: { ...process.env, MARK: 'marked-42' },
      workDir: dir,
      name: 'w/one',
    });
    expect(c.logFile).toBe(path.join(dir, 'w_one.log'));
    expect(pidAlive(c.pid)).toBe(true);
    // its first line is in the log once it is printed; the process is ours to stop
    await expect.poll(() => readFileSync(c.logFile, 'utf8')).toContain('marked-42');
    const r = await c.stop(5_000);
    expect(r).toEqual({ code: null, signal: 'SIGTERM', expected: true });
    expect(pidAlive(c.pid)).toBe(false);
    // stopping again answers the same end
    expect(await c.stop(5_000)).toEqual(r);
  });

  it('reports an exit of its own (code, not expected), and a kill -9 (signal)', async () => {
    const a = await spawnChild(node, prog('bye', 3), { env: process.env, workDir: dir, name: 'exits' });
    expect(await a.exited).toEqual({ code: 3, signal: null, expected: false });
    const b = await spawnChild(node, prog('hi'), { env: process.env, workDir: dir, name: 'killed' });
    process.kill(b.pid, 'SIGKILL');
    expect(await b.exited).toEqual({ code: null, signal: 'SIGKILL', expected: false });
  });

  it('SIGKILLs a process that ignores SIGTERM after the grace period', async () => {
    const c = await spawnChild(node, ['-e', "process.on('SIGTERM', () => console.log('ignored')); console.log('up'); setInterval(() => {}, 1e6)"], {
      env: process.env,
      workDir: dir,
      name: 'stubborn',
    });
    await expect.poll(() => readFileSync(c.logFile, 'utf8')).toContain('up');
    expect(await c.stop(200)).toEqual({ code: null, signal: 'SIGKILL', expected: true });
  });

  it('a command that does not exist is refused with worker_start_failed naming it and the reason', async () => {
    const err = await spawnChild('/nonexistent/engine-binary', [], { env: process.env, workDir: dir, name: 'missing' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'worker_start_failed' });
    expect(String((err as Error).message)).toMatch(/could not start \/nonexistent\/engine-binary: .*ENOENT/);
  });

  it('a log file that cannot be opened is refused the same way', async () => {
    mkdirSync(path.join(dir, 'a-directory.log'));
    const err = await spawnChild(node, prog('x'), { env: process.env, workDir: dir, name: 'a-directory' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'worker_start_failed' });
    expect(String((err as Error).message)).toMatch(/EISDIR/);
  });
});

describe('Launcher', () => {
  it('when its helper dies, processes it started are watched by pid, and the next spawn starts a new helper', async () => {
    const l = new Launcher((pid) => adoptedPid(pid, 20).exited);
    const a = await l.spawn(node, prog('a'), process.env, path.join(dir, 'a.log'));
    const helper = l.helperPid;
    expect(helper).toBeTypeOf('number');
    process.kill(helper as number, 'SIGKILL');
    await expect.poll(() => l.helperPid).toBeUndefined();
    // the worker outlives its helper, and its end is still noticed
    expect(pidAlive(a.pid)).toBe(true);
    process.kill(a.pid, 'SIGKILL');
    expect(await a.ended).toEqual({ code: null, signal: null });
    const b = await l.spawn(node, prog('b', 0), process.env, path.join(dir, 'b.log'));
    expect(l.helperPid).not.toBe(helper);
    expect(await b.ended).toEqual({ code: 0, signal: null });
  });
});
