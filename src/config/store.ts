// The `store:` section: the embedded SQLite file (default) or etcd for cluster mode — its endpoints,
// prefix, TLS and credentials, and the replica's lease — as written, and as the rest of the code sees it.
import path from 'node:path';
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { durationMs, msg, positive, str, url } from './schema-parts.js';

const E = DEFAULTS.store.etcd;

const envName = () =>
  z.string(msg('an environment variable name')).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, msg('an environment variable name such as ETCD_PASSWORD'));

const etcdSchema = z
  .object({
    kind: z.literal('etcd'),
    endpoints: z.array(url(), msg('a list of etcd URLs')).min(1, msg('at least one etcd URL')),
    prefix: z
      .string(msg('a key prefix'))
      .regex(/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/, msg('a key prefix such as /glidepath (starts with /, letters, digits, . _ / -)'))
      .default(E.prefix),
    timeout_ms: durationMs().default(E.timeoutMs),
    max_txn_ops: z.number(msg('an integer of at least 2')).int(msg('an integer of at least 2')).min(2, msg('an integer of at least 2')).default(E.maxTxnOps),
    /** PEM files; relative paths are relative to the config file. */
    tls: z
      .object({ ca_file: str('a file'), cert_file: str('a file').optional(), key_file: str('a file').optional() })
      .strict()
      .optional(),
    /** The password is read from the environment variable named, never from the file. */
    auth: z
      .object({ username: str('a user name'), password_env: envName() })
      .strict()
      .optional(),
    /** The URL the other replicas reach this one's admin API at (needed when admin_listen binds every address). */
    advertise_url: url().optional(),
    /** This replica's name in elections and status; default `<hostname>-<pid>`. */
    replica: str('a replica name').optional(),
    /** How long a dead leader holds the controllers before another replica takes over. */
    // etcd keeps the lease alive on a timer of a share of it: bounded like every other duration (a day)
    lease_ttl_s: positive()
      .max(DEFAULTS.durations.maxIntervalMs / 1000, msg(`at most ${DEFAULTS.durations.maxIntervalMs / 1000} s (a day)`))
      .default(E.leaseTtlS),
  })
  .strict()
  .refine((s) => (s.tls?.cert_file === undefined) === (s.tls?.key_file === undefined), { message: 'tls: cert_file and key_file go together', path: ['tls'] });

export const storeSchema = z
  .discriminatedUnion('kind', [z.object({ kind: z.literal('sqlite') }).strict(), etcdSchema], msg('kind: sqlite or etcd'))
  .default({ kind: 'sqlite' });

export type RawStore = z.infer<typeof storeSchema>;

export interface EtcdStoreConfig {
  readonly kind: 'etcd';
  readonly endpoints: readonly string[];
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxTxnOps: number;
  readonly tls?: { readonly caFile: string; readonly certFile?: string | undefined; readonly keyFile?: string | undefined } | undefined;
  readonly auth?: { readonly username: string; readonly passwordEnv: string } | undefined;
  readonly replica?: string | undefined;
  /** Where the other replicas reach this one's admin API; default the admin listener's own URL. */
  readonly advertiseUrl?: string | undefined;
  readonly leaseTtlS: number;
}

export type StoreConfig = { readonly kind: 'sqlite' } | EtcdStoreConfig;

/** Normalise; `at` resolves a path relative to the config file. */
export function storeConfig(raw: RawStore, at: (p: string) => string = (p) => path.resolve(p)): StoreConfig {
  if (raw.kind === 'sqlite') return { kind: 'sqlite' };
  return {
    kind: 'etcd',
    endpoints: raw.endpoints,
    prefix: raw.prefix,
    timeoutMs: raw.timeout_ms,
    maxTxnOps: raw.max_txn_ops,
    tls: raw.tls && { caFile: at(raw.tls.ca_file), certFile: raw.tls.cert_file && at(raw.tls.cert_file), keyFile: raw.tls.key_file && at(raw.tls.key_file) },
    auth: raw.auth && { username: raw.auth.username, passwordEnv: raw.auth.password_env },
    replica: raw.replica,
    advertiseUrl: raw.advertise_url?.replace(/\/+$/, ''),
    leaseTtlS: raw.lease_ttl_s,
  };
}

/** A cluster replica whose admin listener binds every address must say where the others reach it: the issue, if any. */
export function advertiseIssue(store: StoreConfig, adminListen: string): { path: string; message: string } | undefined {
  if (store.kind !== 'etcd' || store.advertiseUrl !== undefined) return undefined;
  const host = adminListen.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  if (host !== '0.0.0.0' && host !== '::' && host !== '') return undefined;
  return {
    path: 'store.advertise_url',
    message: `server.admin_listen ${adminListen} binds every address: say where the other replicas reach this one's admin API (e.g. http://gw-1.internal:8081)`,
  };
}
