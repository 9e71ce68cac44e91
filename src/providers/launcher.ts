// Worker processes started by a small helper process, so that the gateway's own event loop never forks.
//
// Node's spawn() forks the calling process and waits until the child has exec'd. In the process that
// serves the data plane (150–250 MB resident, on a busy host) that blocked every stream for 5–17 ms
// per worker started — and a worker is started exactly when streams are being moved off a dead one
// (docs/resilience.md). The helper is a bare Node process (no module of ours, ~40 MB): it forks
// quickly and, above all, elsewhere. It is started once, on the first spawn.
import { spawn, type ChildProcess } from 'node:child_process';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';

/** How a launched process ended (as ChildProcess's 'exit' event gives it). */
export interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A process the helper started: its pid, and its end (as the helper saw it, or by pid watch if the helper died first). */
export interface Launched {
  pid: number;
  ended: Promise<Ended>;
  /**
   * Signal it, unless it has ended: through the helper, which knows when it has reaped it (its pid
   * may be another process's by the time its end is heard here); by pid once the helper is gone.
   */
  kill: (signal: NodeJS.Signals) => void;
  /**
   * It is recorded (its start wrote its pid where a restart finds it): it may outlive this process.
   * Until then, if this process dies, the helper stops it: a worker no record names would be known
   * to no one after the restart, left running on its GPUs.
   */
  keep: () => void;
}

type Reply =
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'error'; id: number; message: string }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null };

/**
 * The helper's program. It is given to `node -e` rather than read from a file next to this module,
 * so that it runs alike from the build and from the sources under the test runner (no loader).
 * Plain CommonJS with Node's own modules only. It exits when its parent goes (IPC disconnect),
 * leaving the workers running, as a worker outlived its parent's crash before.
 */
const HELPER = `
const { spawn } = require('node:child_process');
const { openSync, closeSync, readFileSync } = require('node:fs');
// a send to a parent that has just died fails (EPIPE): the disconnect that follows ends this process
const send = (m) => { if (process.connected) process.send(m, () => undefined); };
// the parent's pid is argv[1]; process.ppid is read once, at start
const orphaned = () => {
  try {
    const s = readFileSync('/proc/self/stat', 'latin1');
    return Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]) !== Number(process.argv[1]);
  } catch {
    return false;
  }
};
// id → { c: the child, kept: its parent recorded it (it may outlive the parent) }
const children = new Map();
process.on('message', (m) => {
  if (m && m.t === 'kill') return void children.get(m.id)?.c.kill(m.signal);
  if (m && m.t === 'keep') {
    const x = children.get(m.id);
    if (x) x.kept = true;
    return;
  }
  if (!m || m.t !== 'spawn') return;
  // a request read after the parent died (killed with it in flight): a worker started now would be known to no one
  if (orphaned()) process.exit(0);
  let fd;
  try {
    fd = openSync(m.logFile, 'a');
    const c = spawn(m.cmd, m.args, { env: m.env, stdio: ['ignore', fd, fd] });
    if (c.pid === undefined) {
      c.once('error', (e) => send({ t: 'error', id: m.id, message: e.message }));
      return;
    }
    children.set(m.id, { c, kept: false });
    c.once('exit', (code, signal) => {
      children.delete(m.id);
      send({ t: 'exit', id: m.id, code, signal });
    });
    c.on('error', () => undefined);
    send({ t: 'spawned', id: m.id, pid: c.pid });
  } catch (e) {
    send({ t: 'error', id: m.id, message: e instanceof Error ? e.message : String(e) });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
});
// the parent is gone: what it recorded runs on (a restart adopts it); a start it had not recorded is
// stopped, SIGTERM then SIGKILL after the grace (argv[2] ms), as a restart stops a start cut short
process.on('disconnect', () => {
  const cut = [...children.values()].filter((x) => !x.kept).map((x) => x.c);
  if (cut.length === 0) process.exit(0);
  let left = cut.length;
  for (const c of cut) {
    c.once('exit', () => { if (--left === 0) process.exit(0); });
    c.kill('SIGTERM');
  }
  setTimeout(() => { for (const c of cut) c.kill('SIGKILL'); process.exit(0); }, Number(process.argv[2]));
});
// a terminal's Ctrl-C or hang-up reaches the whole process group: the gateway's graceful stop still needs this process
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);
`;

interface Pending {
  cmd: string;
  resolve: (l: Launched) => void;
  reject: (e: Error) => void;
}

/** One helper and the processes it started for this process. */
export class Launcher {
  private helper: ChildProcess | undefined;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  /** Started and not yet ended: id → pid and the resolver of its end. */
  private readonly live = new Map<number, { pid: number; end: (e: Ended) => void }>();
  /** Started by a helper that died before them, not yet ended: id → pid (signalled and watched by pid). */
  private readonly orphans = new Map<number, number>();

  constructor(
    /** Watches a pid whose helper died before it (signal-0 probes): the end it resolves. */
    private readonly watchPid: (pid: number) => Promise<Ended>,
    /** When this process dies: how long the helper gives a start not yet kept between SIGTERM and SIGKILL. */
    private readonly cutStartGraceMs: number = DEFAULTS.control.failedStartStopGraceMs,
  ) {}

  /** The helper's pid while it runs (for operators' tools and tests). */
  get helperPid(): number | undefined {
    return this.helper?.pid;
  }

  /** Start `cmd` with its output appended to `logFile`; resolves with its pid once it runs, rejects when it cannot be started. */
  spawn(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv, logFile: string): Promise<Launched> {
    const h = this.ensure();
    const id = ++this.seq;
    return new Promise<Launched>((resolve, reject) => {
      this.pending.set(id, { cmd, resolve, reject });
      this.holdOpen();
      h.send({ t: 'spawn', id, cmd, args, env, logFile }, (err) => {
        if (err) this.fail(id, `the launcher did not take the request (${err.message})`);
      });
    });
  }

  private ensure(): ChildProcess {
    if (this.helper !== undefined) return this.helper;
    const h = spawn(process.execPath, ['-e', HELPER, String(process.pid), String(this.cutStartGraceMs)], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { PATH: process.env.PATH ?? '' },
    });
    this.helper = h;
    h.unref();
    h.on('message', (m: Reply) => this.onReply(m));
    h.on('error', (e) => this.lost(h, `the launcher process failed (${e.message})`));
    h.once('exit', (code, signal) => this.lost(h, `the launcher process exited (${signal ?? `code ${String(code)}`})`));
    return h;
  }

  private kill(id: number, signal: NodeJS.Signals): void {
    const h = this.helper;
    if (h !== undefined && this.live.has(id)) {
      // not taken: the helper is dying; once its loss is noticed the worker is signalled by pid
      h.send({ t: 'kill', id, signal }, (err) => {
        if (err) setTimeout(() => this.kill(id, signal), 10);
      });
      return;
    }
    const pid = this.orphans.get(id);
    if (pid === undefined) return;
    try {
      process.kill(pid, signal);
    } catch {
      // gone already: the pid watch reports its end
    }
  }

  private keep(id: number): void {
    // a helper already gone stops nothing when this process dies: nothing to tell it
    if (this.live.has(id)) this.helper?.send({ t: 'keep', id }, () => undefined);
  }

  private onReply(m: Reply): void {
    if (m.t === 'spawned') {
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      const ended = new Promise<Ended>((end) => this.live.set(m.id, { pid: m.pid, end }));
      const id = m.id;
      p.resolve({ pid: m.pid, ended, kill: (signal) => this.kill(id, signal), keep: () => this.keep(id) });
    } else if (m.t === 'error') {
      this.fail(m.id, m.message);
    } else {
      const l = this.live.get(m.id);
      if (l === undefined) return;
      this.live.delete(m.id);
      l.end({ code: m.code, signal: m.signal });
    }
    this.holdOpen();
  }

  private fail(id: number, why: string): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    p.reject(new UnavailableError('worker_start_failed', `could not start ${p.cmd}: ${why}`));
    this.holdOpen();
  }

  /** The helper is gone: requests in flight fail, processes it started are watched by pid, the next spawn starts a new one. */
  private lost(h: ChildProcess, why: string): void {
    if (this.helper !== h) return;
    this.helper = undefined;
    for (const id of [...this.pending.keys()]) this.fail(id, why);
    for (const [id, l] of this.live) {
      this.live.delete(id);
      this.orphans.set(id, l.pid);
      // as the channel did: this process stays alive until the end of what it started is known
      const hold = setInterval(() => undefined, 2 ** 30);
      void this.watchPid(l.pid).then(({ code, signal }) => {
        clearInterval(hold);
        this.orphans.delete(id);
        l.end({ code, signal });
      });
    }
    this.holdOpen();
  }

  /**
   * Like a child process, the helper keeps this process alive while something it started runs or is
   * being started: its channel, and its process handle too, so that its death (the channel closes
   * first) is still heard and its workers watched.
   */
  private holdOpen(): void {
    const h = this.helper;
    if (h === undefined) return;
    const hold = this.pending.size + this.live.size > 0;
    if (hold) h.ref();
    else h.unref();
    if (h.channel == null) return;
    if (hold) h.channel.ref();
    else h.channel.unref();
  }
}
