// `up` checks its two listen addresses before it loads a single worker: a taken port is found in
// milliseconds, not after every worker has loaded and warmed, and the message names the listener,
// the address, and the flag and config key that change it.
import { createServer } from 'node:net';
import type { GlidepathConfig } from '../../config/types.js';
import { parseHostPort } from '../../gateway/server.js';

export interface Listener {
  name: string;
  flag: string;
  key: string;
  address: string;
}

export function listenersOf(cfg: GlidepathConfig): Listener[] {
  return [
    { name: 'data plane', flag: '--listen', key: 'server.listen', address: cfg.server.listen },
    { name: 'admin API', flag: '--admin-listen', key: 'server.admin_listen', address: cfg.server.adminListen },
  ];
}

/** Why `l` cannot listen, in words, with the way to change it. */
export function describeListenError(l: Listener, err: NodeJS.ErrnoException): string {
  const why =
    err.code === 'EADDRINUSE'
      ? 'the port is already in use (another glidepath up, or another server)'
      : err.code === 'EACCES'
        ? 'permission denied (ports below 1024 need privileges)'
        : err.code === 'EADDRNOTAVAIL'
          ? 'the host is not an address of this machine'
          : err.message;
  return `the ${l.name} cannot listen on ${l.address}: ${why}; choose another address with ${l.flag} HOST:PORT or ${l.key} in the config`;
}

/** Bind `host:port` and release it at once; the error when that fails. */
function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    s.listen({ host, port }, () => s.close(() => resolve(undefined)));
  });
}

/**
 * Throws, naming the listener and how to change it, when an address is taken (or not bindable) or
 * both listeners are given the same one. Port 0 is always free. A port taken between this check and
 * the real listen still fails there: `explainListenError` words that error the same way.
 */
export async function checkListenAddresses(listeners: readonly Listener[]): Promise<void> {
  const [a, b] = listeners;
  if (a && b && a.address === b.address && parseHostPort(a.address).port !== 0) {
    throw new Error(
      `the data plane and the admin API cannot both listen on ${a.address}; choose another address with ${b.flag} HOST:PORT or ${b.key} in the config`,
    );
  }
  for (const l of listeners) {
    const { host, port } = parseHostPort(l.address);
    if (port === 0) continue;
    const err = await tryListen(host, port);
    if (err) throw new Error(describeListenError(l, err), { cause: err });
  }
}

/** A listen error from starting the app, in the same words as the check; anything else unchanged. */
export function explainListenError(listeners: readonly Listener[], err: unknown): unknown {
  const e = err as NodeJS.ErrnoException & { port?: number };
  if (e?.syscall !== 'listen' || typeof e.port !== 'number') return err;
  const l = listeners.find((x) => parseHostPort(x.address).port === e.port);
  return l === undefined ? err : new Error(describeListenError(l, e), { cause: err });
}
