// A real etcd for tests (Debian package etcd-server): started on loopback on free ports with its own data
// directory, ready when its /health says so, stopped (or killed) by the test. Tests that use it take
// `itWithEtcd`, skipped with one printed line where etcd is not installed (failed under CI=true).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { OPTIONAL_TOOLS, findTool, itWithTool } from './tools.js';
import { closedPort } from './upstream.js';

export const itWithEtcd = itWithTool('etcd', OPTIONAL_TOOLS.etcd);
export const etcdInstalled = (): boolean => findTool('etcd') !== undefined;

export interface EtcdServer {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  proc: ChildProcess;
  /** SIGTERM, wait for the exit; with `keepData` the data directory stays for a restart. */
  stop(opts?: { keepData?: boolean }): Promise<void>;
  /** Start again on the same ports and data (after stop({keepData: true})). */
  restart(): Promise<void>;
}

/** Start an etcd on loopback; resolves when it answers /health. */
export async function startEtcd(opts: { maxTxnOps?: number } = {}): Promise<EtcdServer> {
  const bin = findTool('etcd');
  if (bin === undefined) throw new Error(`etcd is not installed (apt-get install ${OPTIONAL_TOOLS.etcd})`);
  const dir = mkdtempSync(path.join(tmpdir(), 'glidepath-etcd-'));
  const [client, peer] = [await closedPort(), await closedPort()];
  const endpoint = `http://127.0.0.1:${client}`;
  const args = [
    '--name=gp',
    `--data-dir=${path.join(dir, 'data')}`,
    `--listen-client-urls=${endpoint}`,
    `--advertise-client-urls=${endpoint}`,
    `--listen-peer-urls=http://127.0.0.1:${peer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
    `--initial-cluster=gp=http://127.0.0.1:${peer}`,
    `--max-txn-ops=${opts.maxTxnOps ?? 128}`,
    '--log-level=error',
  ];
  const server: EtcdServer = {
    endpoint,
    proc: launch(),
    async stop(o = {}) {
      await exited(server.proc);
      if (o.keepData !== true) rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      server.proc = launch();
      await ready();
    },
  };
  function launch(): ChildProcess {
    return spawn(bin as string, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  async function ready(): Promise<void> {
    const deadline = Date.now() + 20_000;
    let stderr = '';
    server.proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
    while (Date.now() < deadline) {
      if (server.proc.exitCode !== null) throw new Error(`etcd exited with ${server.proc.exitCode}: ${stderr}`);
      try {
        const r = await request(`${endpoint}/health`);
        const body = (await r.body.json()) as { health?: string };
        if (body.health === 'true') return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`etcd did not become healthy in 20 s: ${stderr}`);
  }
  await ready();
  return server;
}

function exited(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    p.once('exit', () => resolve());
    p.kill('SIGTERM');
  });
}

/** After a cluster test: every replica stopped, etcd stopped, the worker processes and the directory removed. */
export async function stopCluster(
  replicas: readonly { kill(signal: NodeJS.Signals): Promise<unknown> }[],
  etcd: EtcdServer | undefined,
  cleanup: () => void,
): Promise<void> {
  for (const r of replicas) await r.kill('SIGTERM');
  await etcd?.stop();
  cleanup();
}

/** Seeded delays (ms) in [lo, hi): the same points of a run on every run (where a leader is killed). */
export function seededDelays(seed: number, count: number, lo: number, hi: number): number[] {
  let x = seed;
  return Array.from({ length: count }, () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return lo + Math.floor((x / 2 ** 31) * (hi - lo));
  });
}
