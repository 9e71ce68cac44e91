// Opening the configured store: the SQLite file in the data directory, or etcd (reading its TLS files and
// the password's environment variable here, so that a bad setting is one clear `store_open_failed`).
import { readFileSync } from 'node:fs';
import type { StoreConfig } from '../config/store.js';
import { UnavailableError } from '../errors.js';
// the etcd client (etcd3 and gRPC: ~0.2 s and ~16 MB of RSS to load) is loaded only for an etcd store
import type { EtcdKv } from './kv/etcd.js';
import { openKvStore } from './kv/store.js';
import { openStore } from './sqlite.js';
import type { Store } from './types.js';

export interface OpenedStore {
  store: Store;
  /** The etcd connection behind an etcd store (cluster mode watches and elects through it). */
  etcd?: EtcdKv | undefined;
}

/** Open the store a config names; UnavailableError `store_open_failed` (or `store_unavailable`) naming what is wrong. */
export async function openConfiguredStore(cfg: { store: StoreConfig; server: { dataDir: string } }): Promise<OpenedStore> {
  const s = cfg.store;
  if (s.kind === 'sqlite') return { store: openStore(cfg.server.dataDir) };
  const read = (what: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new UnavailableError('store_open_failed', `store.tls.${what}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  let auth: { username: string; password: string } | undefined;
  if (s.auth) {
    const password = process.env[s.auth.passwordEnv];
    if (password === undefined || password === '')
      throw new UnavailableError('store_open_failed', `store.auth.password_env: the environment variable ${s.auth.passwordEnv} is not set`);
    auth = { username: s.auth.username, password };
  }
  const { EtcdKv } = await import('./kv/etcd.js');
  const etcd = new EtcdKv({
    endpoints: s.endpoints,
    prefix: s.prefix,
    timeoutMs: s.timeoutMs,
    maxTxnOps: s.maxTxnOps,
    auth,
    tls: s.tls && {
      ca: read('ca_file', s.tls.caFile),
      cert: s.tls.certFile === undefined ? undefined : read('cert_file', s.tls.certFile),
      key: s.tls.keyFile === undefined ? undefined : read('key_file', s.tls.keyFile),
    },
  });
  try {
    return { store: await openKvStore(etcd), etcd };
  } catch (err) {
    if (err instanceof UnavailableError && err.code === 'store_unavailable')
      throw new UnavailableError('store_open_failed', `cannot open the store: ${err.message}`, { cause: err });
    throw err;
  }
}
