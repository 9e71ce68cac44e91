// The admin token bootstrap the CLI relies on: generated once (0600), reused across starts, and
// revoked once the config names its own tokens.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Authenticator, bootstrapTokens, sha256hex } from '../../../src/api/auth.js';
import { openStore } from '../../../src/store/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'gp-token-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('admin token bootstrap', () => {
  it('generates an admin token file (0600), keeps it across starts, revokes it when the config names tokens', async () => {
    const file = join(dir, 'admin-token');
    let store = openStore(dir);
    await bootstrapTokens(store, [], dir);
    const token = readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^gp_[A-Za-z0-9_-]{32}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect((await Authenticator.load(store)).authenticate(`Bearer ${token}`)).toEqual({ name: 'admin', role: 'admin' });
    await store.close();

    // a restart with the same data directory reuses the token
    store = openStore(dir);
    await bootstrapTokens(store, [], dir);
    expect(readFileSync(file, 'utf8').trim()).toBe(token);
    await store.close();

    // regression: the generated token stayed valid after auth.tokens were added to the config
    store = openStore(dir);
    await bootstrapTokens(store, [{ name: 'ops', role: 'operator', sha256: sha256hex('ops-secret') }], dir);
    const auth = await Authenticator.load(store);
    expect(() => auth.authenticate(`Bearer ${token}`)).toThrow(/invalid bearer token/);
    expect(auth.authenticate('Bearer ops-secret')).toEqual({ name: 'ops', role: 'operator' });
    expect(existsSync(file)).toBe(false);
    await store.close();
  });
});
