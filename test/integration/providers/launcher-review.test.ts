// Review of the launcher (launcher.ts, child.ts): signals that reach a stranger holding a worker's old
// pid, a worker started for a gateway already dead, a host that exits while its worker still runs,
// a sim start no longer retried when its spawn fails, and a launcher that cannot start said to have exited.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { adoptedPid, pidAlive, spawnChild } from '../../../src/providers/child.js';
import { Launcher } from '../../../src/providers/launcher.js';
import { SimProvider } from '../../../src/providers/sim.js';
import { itWhen } from '../../helpers/tools.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-launch-review-'));
/** Processes a test started that a failure could leave behind (pid → command line): killed at the end if still themselves. */
const strays = new Map<number, string>();
const stray = (pid: number): void => void strays.set(pid, cmdline(pid));
afterAll(() => {
  for (const [pid, cmd] of strays) if (pidAlive(pid) && cmdline(pid) === cmd) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const node = process.execPath;

/** The pids whose parent is `ppid`, a pid's command line, the launcher helper a process started (its `node -e` program waits for its parent's disconnect): a module the hosts below import too. */
const PROC_MJS = path.join(dir, 'proc.mjs');
writeFileSync(
  PROC_MJS,
  `import { readdirSync, readFileSync } from 'node:fs';
const stat = (pid) => { try { return readFileSync('/proc/' + pid + '/stat', 'latin1'); } catch { return ''; } };
export function childrenOf(ppid) {
  return readdirSync('/proc').filter((e) => /^[0-9]+$/.test(e) && Number(stat(e).slice(stat(e).lastIndexOf(')') + 2).split(' ')[1]) === ppid).map(Number);
}
export function cmdline(pid) {
  try { return readFileSync('/proc/' + pid + '/cmdline', 'utf8'); } catch { return ''; }
}
export function helperOf(ppid) {
  return childrenOf(ppid).find((pid) => cmdline(pid).includes("process.on('disconnect'") && !/[)] [ZX] /.test(stat(pid)));
}
`,
);
const { cmdline, helperOf } = (await import(pathToFileURL(PROC_MJS).href)) as {
  cmdline: (pid: number) => string;
  helperOf: (ppid: number) => number | undefined;
};

/** The live pids whose command line holds `mark`. */
function marked(mark: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid)
    .map(Number)
    .filter((pid) => cmdline(pid).includes(mark) && pidAlive(pid));
}

/** Runs `body` (TypeScript, top-level await; `spawnChild`, `helperOf` and `writeSync` in scope) as a separate host process under vite-node; its stdout lines as they come. */
function host(name: string, body: string): { proc: ChildProcess; line: (re: RegExp) => Promise<RegExpMatchArray>; out: () => string; exited: Promise<void> } {
  const file = path.join(dir, `${name}.ts`);
  writeFileSync(
    file,
    [
      `import { writeSync } from 'node:fs';`,
      `import { spawnChild } from ${JSON.stringify(path.join(ROOT, 'src/providers/child.ts'))};`,
      `import { helperOf } from ${JSON.stringify(pathToFileURL(PROC_MJS).href)};`,
      body,
    ].join('\n'),
  );
  const proc = spawn(node, [path.join(ROOT, 'node_modules/vite-node/vite-node.mjs'), file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  stray(proc.pid as number);
  let out = '';
  const waiters: (() => void)[] = [];
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const line = (re: RegExp): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const look = (): void => {
        const m = re.exec(out);
        if (m) return resolve(m);
        if (proc.exitCode !== null || proc.signalCode !== null) return reject(new Error(`host ${name} ended without ${String(re)}; it printed: ${out}`));
        waiters.push(look);
      };
      look();
      void exited.then(look);
    });
  return { proc, line, out: () => out, exited };
}

/** Can this process choose the next pid (root: /proc/sys/kernel/ns_last_pid)? */
const canPickPid = ((): boolean => {
  try {
    writeFileSync('/proc/sys/kernel/ns_last_pid', readFileSync('/proc/sys/kernel/ns_last_pid', 'utf8'));
    return true;
  } catch {
    return false;
  }
})();
/** Where it cannot (not root), the pid-reuse test is skipped with a line, or failed under CI. */
const itChoosingPids = itWhen(canPickPid, 'choosing the next pid', 'not permitted', 'run as root: it writes /proc/sys/kernel/ns_last_pid');

describe('launcher review', () => {
  // Before, ChildProcess.kill never signalled a reaped child. Now the launcher reaps the worker and
  // the gateway hears of it one IPC message later: a stop() in between signals the bare pid, which
  // by then may be another process's. Here the event loop is held from the worker's death to the
  // stop() call, and the pid is handed to a stranger on purpose (ns_last_pid).
  itChoosingPids('stop() on a worker that has just exited never signals a process that took its pid', async () => {
    const c = await spawnChild('/bin/sleep', ['3600'], { env: process.env, workDir: dir, name: 'reused' });
    const pid = c.pid;
    process.kill(pid, 'SIGKILL');
    const deadline = Date.now() + 10_000;
    while (existsSync(`/proc/${pid}`)) if (Date.now() > deadline) throw new Error('the launcher did not reap its worker');
    let stranger: ChildProcess | undefined;
    for (let i = 0; i < 20 && stranger?.pid !== pid; i++) {
      stranger?.kill('SIGKILL');
      writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1));
      stranger = spawn('/bin/sleep', ['3600'], { stdio: 'ignore' });
      stray(stranger.pid as number);
    }
    const s = stranger as ChildProcess;
    expect(s.pid).toBe(pid);
    const strangerEnd = new Promise<NodeJS.Signals | null>((resolve) => s.once('exit', (_code, sig) => resolve(sig)));
    const stopped = c.stop(5_000); // still in the same turn of the loop: the worker's end is not heard yet
    expect(await stopped).toMatchObject({ code: null, signal: 'SIGKILL' });
    // the stranger dies of the SIGKILL sent to it here, not of a SIGTERM meant for the worker
    s.kill('SIGKILL');
    expect(await strangerEnd).toBe('SIGKILL');
  });

  // Before, a worker existed as soon as spawnChild returned, and the start recorded its pid (onSpawn)
  // at once. Now a request can sit in the helper's socket while the helper boots; if the gateway is
  // killed meanwhile the helper still reads the request and starts a worker no one will ever record,
  // adopt or stop (its GPUs are given to others by releaseOrphanGpus after the restart).
  it('a worker is never started for a gateway that was killed before it heard of the worker', async () => {
    const mark = `gp-review-orphan-${process.pid}-${Date.now()}`;
    const h = host(
      'killed-mid-spawn',
      `
void spawnChild(process.execPath, ['-e', 'setInterval(() => {}, 1e6)', ${JSON.stringify(mark)}], { env: process.env, workDir: ${JSON.stringify(dir)}, name: 'orphan' });
writeSync(1, 'helper ' + String(helperOf(process.pid)) + '\\n');
process.kill(process.pid, 'SIGKILL');
`,
    );
    const helper = Number((await h.line(/^helper (\d+)$/m))[1]);
    expect(helper).toBeGreaterThan(0);
    stray(helper);
    await h.exited;
    // the helper goes when its parent has gone; whatever it was going to start exists by then
    await expect.poll(() => pidAlive(helper), { timeout: 30_000 }).toBe(false);
    const orphans = marked(mark);
    for (const pid of orphans) stray(pid);
    expect(orphans).toEqual([]);
  });

  // Before, a worker outlived its gateway's crash whatever its start had reached. One whose pid no
  // record held yet (the gateway killed between the spawn and onSpawn's write) ran on, known to no
  // one after the restart: the rolling update's kill -9 e2e test found such a simulator left running.
  // Now the helper stops the starts its parent had not kept; a kept one runs on, for the restart to
  // adopt (or stop, as a start cut short).
  it('when its gateway dies, a start the gateway had not recorded is stopped and a recorded one runs on', async () => {
    const mark = `gp-review-cut-${process.pid}-${Date.now()}`;
    const h = host(
      'killed-after-spawn',
      `
const opts = (name: string) => ({ env: process.env, workDir: ${JSON.stringify(dir)}, name });
const kept = await spawnChild(process.execPath, ['-e', 'setInterval(() => {}, 1e6)', ${JSON.stringify(`${mark}-kept`)}], opts('kept'));
kept.keep();
// (the helper reads its messages in order: once this one is spawned, the keep above was taken)
const cut = await spawnChild(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1e6)", ${JSON.stringify(`${mark}-cut`)}], opts('cut'));
writeSync(1, 'workers ' + kept.pid + ' ' + cut.pid + ' helper ' + String(helperOf(process.pid)) + '\\n');
process.kill(process.pid, 'SIGKILL');
`,
    );
    const m = await h.line(/^workers (\d+) (\d+) helper (\d+)$/m);
    const [kept, cut, helper] = [Number(m[1]), Number(m[2]), Number(m[3])];
    for (const pid of [kept, cut, helper]) stray(pid);
    await h.exited;
    // the cut start ignores SIGTERM: the helper waits the grace, SIGKILLs it, then goes
    await expect.poll(() => pidAlive(helper), { timeout: 30_000 }).toBe(false);
    await expect.poll(() => pidAlive(cut), { timeout: 10_000 }).toBe(false);
    expect(pidAlive(kept)).toBe(true);
    expect(marked(mark).sort()).toEqual([kept]);
    process.kill(kept, 'SIGKILL');
  });

  // Before, a live child process kept its host alive until the child ended (so its end was heard).
  // When the helper dies, its channel closes first and its process handle is unref'd, so the host
  // may exit before it even hears of the death; if it does hear, the workers are watched by pid with
  // an unref'd timer. Either way the host exits with the worker running and its end never heard.
  it('a host whose launcher died stays alive while a worker it started runs, and hears its end', async () => {
    const h = host(
      'helper-died',
      `
const c = await spawnChild('/bin/sleep', ['3600'], { env: process.env, workDir: ${JSON.stringify(dir)}, name: 'watched' });
void c.exited.then((e) => writeSync(1, 'ended ' + JSON.stringify(e) + '\\n'));
const helper = helperOf(process.pid);
writeSync(1, 'worker ' + c.pid + ' helper ' + String(helper) + '\\n');
process.kill(helper, 'SIGKILL');
`,
    );
    const m = await h.line(/^worker (\d+) helper (\d+)$/m);
    const worker = Number(m[1]);
    stray(worker);
    await expect.poll(() => pidAlive(Number(m[2]))).toBe(false);
    process.kill(worker, 'SIGKILL');
    await h.exited;
    expect(h.out()).toMatch(/^ended \{"code":null,"signal":null,"expected":false\}$/m);
  });

  // Before, a spawn that failed (the 'error' event) ended the child, failed waitHealthy inside the
  // try, and the loop tried again. Now spawnChild rejects before the try: one failed spawn (here the
  // launcher dying with the request in hand) fails the whole start at once.
  it('a sim start whose spawn fails (its launcher died) is retried like any failed attempt', async () => {
    const first = await spawnChild('/bin/true', [], { env: process.env, workDir: dir, name: 'warm' });
    await first.exited;
    const helper = helperOf(process.pid);
    expect(helper).toBeTypeOf('number');
    process.kill(helper as number, 'SIGSTOP'); // it is sent the request but cannot answer
    const cfg = parseConfig({ gpus: { count: 1 }, models: [{ name: 'm', versions: [{ id: 'v1', provider: { kind: 'sim', sim: { seed: 1 } } }] }] });
    const workDir = path.join(dir, 'sim-retry');
    const spawned: number[] = [];
    const started = new SimProvider({ startSlackMs: 3_000 })
      .start({ version: cfg.models[0]!.versions[0]!, workerId: 'm/v1/0', gpus: ['0'], workDir, onSpawn: (s) => Promise.resolve(void spawned.push(s.pid)) })
      .then(
        (w) => w,
        (e: unknown) => e as Error,
      );
    try {
      await expect.poll(() => existsSync(workDir)).toBe(true); // made by spawnChild just before it sends its request
    } finally {
      process.kill(helper as number, 'SIGKILL');
    }
    const r = await started;
    for (const pid of spawned) stray(pid);
    if (!(r instanceof Error)) await new SimProvider().stop(r);
    expect(String(r instanceof Error ? r.message : 'started')).not.toMatch(/launcher process exited/);
    expect(spawned.length).toBeGreaterThan(0);
  });

  // A helper that cannot be started is reported as one that "exited", not with the reason.
  it('a launcher that cannot be started is refused with the reason', async () => {
    const l = new Launcher((pid) => adoptedPid(pid, 20).exited);
    const real = process.execPath;
    process.execPath = path.join(dir, 'no-such-node');
    let p: Promise<unknown>;
    try {
      p = l.spawn(real, ['-e', '0'], process.env, path.join(dir, 'x.log'));
    } finally {
      process.execPath = real;
    }
    const err = await p.catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'worker_start_failed' });
    expect(String((err as Error).message)).toMatch(/no-such-node.*ENOENT/);
  });
});
