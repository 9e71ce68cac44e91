// `store:` in glidepath.yaml: SQLite by default; etcd with its defaults, paths relative to the config
// file, and every refusal naming its field.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { configIssues } from '../../helpers/config-issues.js';

const models = [{ name: 'a', versions: [{ id: 'v1', provider: { kind: 'sim' } }] }];

const issues = (store: unknown) => configIssues({ models, store });

describe('store config', () => {
  it('is the embedded SQLite file unless told otherwise', () => {
    expect(parseConfig({ models }).store).toEqual({ kind: 'sqlite' });
  });

  it('etcd: defaults, and TLS files relative to the config file', () => {
    const c = parseConfig(
      { models, store: { kind: 'etcd', endpoints: ['https://10.0.0.1:2379'], tls: { ca_file: 'ca.pem', cert_file: '/etc/c.pem', key_file: 'k.pem' } } },
      { source: '/srv/gp/glidepath.yaml' },
    );
    expect(c.store).toEqual({
      kind: 'etcd',
      endpoints: ['https://10.0.0.1:2379'],
      prefix: '/glidepath',
      timeoutMs: 2_000,
      maxTxnOps: 128,
      tls: { caFile: path.resolve('/srv/gp/ca.pem'), certFile: '/etc/c.pem', keyFile: path.resolve('/srv/gp/k.pem') },
      auth: undefined,
      replica: undefined,
      leaseTtlS: 5,
    });
  });

  it('refuses what it cannot use, naming the field', () => {
    expect(issues({ kind: 'postgres' })[0]?.path).toBe('store.kind');
    expect(issues({ kind: 'etcd' })).toEqual([expect.objectContaining({ path: 'store.endpoints' })]);
    expect(issues({ kind: 'etcd', endpoints: [] })[0]?.message).toContain('at least one etcd URL');
    expect(issues({ kind: 'etcd', endpoints: ['127.0.0.1:2379'] })).toEqual([
      { path: 'store.endpoints[0]', message: 'expected an http(s) URL, got "127.0.0.1:2379"' },
    ]);
    expect(issues({ kind: 'etcd', endpoints: ['http://e:2379'], prefix: 'glidepath' })[0]?.path).toBe('store.prefix');
    expect(issues({ kind: 'etcd', endpoints: ['http://e:2379'], tls: { ca_file: 'a', cert_file: 'c' } })[0]).toEqual({
      path: 'store.tls',
      message: 'tls: cert_file and key_file go together',
    });
    expect(issues({ kind: 'etcd', endpoints: ['http://e:2379'], auth: { username: 'gp', password: 'x' } })[0]?.path).toContain('store.auth');
    expect(issues({ kind: 'etcd', endpoints: ['http://e:2379'], max_txn_ops: 1 })[0]?.message).toContain('at least 2');
    expect(issues({ kind: 'sqlite', endpoints: ['http://e:2379'] })[0]?.path).toContain('store');
  });
});
