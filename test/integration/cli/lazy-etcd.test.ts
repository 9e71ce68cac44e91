// The embedded default does not load the etcd client: `up`'s modules reach etcd3 (and gRPC under it,
// ~0.25 s and ~16 MB to load) only when the config names an etcd store. Checked on the built CLI, in a
// process of its own, by whether etcd3 is in the CommonJS module cache after the import.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT, ensureBuilt } from './helpers.js';

beforeAll(() => ensureBuilt());

/** Import the built module `rel` (under dist/) in a fresh Node process: whether etcd3 was loaded. */
function loadsEtcd(rel: string): boolean {
  const url = pathToFileURL(join(ROOT, 'dist', rel)).href;
  const script = [
    "import { createRequire } from 'node:module';",
    `await import(${JSON.stringify(url)});`,
    'const cache = Object.keys(createRequire(import.meta.url).cache);',
    "process.stdout.write(String(cache.some((k) => k.includes('/node_modules/etcd3/'))));",
  ].join('\n');
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' }) === 'true';
}

describe('the etcd client is loaded only for an etcd store', () => {
  it('not by `glidepath up` (the verb) nor the control plane it starts on SQLite', () => {
    expect(loadsEtcd('cli/up/index.js')).toBe(false);
    expect(loadsEtcd('control/app.js')).toBe(false);
    expect(loadsEtcd('control/cluster.js')).toBe(false);
  });

  it('by the etcd store itself (the check sees the client when it is there)', () => {
    expect(loadsEtcd('store/kv/etcd.js')).toBe(true);
  });
});
