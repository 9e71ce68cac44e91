// Admin API authentication: bearer tokens (stored hashed) with roles, compared in constant time,
// and the generated admin token that makes the embedded default safe without setup.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Role } from '../config/types.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import type { Store } from '../store/types.js';

export const ROLE_RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };
export const TOKEN_FILE = 'admin-token';

export interface Principal {
  name: string;
  role: Role;
}

export function sha256hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export class Authenticator {
  private tokens: { name: string; role: Role; hash: Buffer }[] = [];

  constructor(private readonly store: Store) {
    this.reload();
  }

  reload(): void {
    this.tokens = this.store.listTokens().map((t) => ({ name: t.name, role: t.role, hash: Buffer.from(t.sha256, 'hex') }));
  }

  /**
   * Check `Authorization: Bearer <token>`. Every stored hash is compared (constant time each, and
   * no early exit) so timing reveals neither which token nor how much of it matched.
   */
  authenticate(header: string | undefined): Principal {
    if (header === undefined) throw new UnauthorizedError('missing Authorization header; send "Authorization: Bearer <token>"');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new UnauthorizedError('Authorization header must be "Bearer <token>"');
    const h = createHash('sha256').update(m[1] as string).digest();
    let found: Principal | undefined;
    for (const t of this.tokens) {
      if (timingSafeEqual(h, t.hash) && found === undefined) found = { name: t.name, role: t.role };
    }
    if (!found) throw new UnauthorizedError('invalid bearer token');
    return found;
  }

  require(p: Principal, role: Role, action: string): void {
    if (ROLE_RANK[p.role] < ROLE_RANK[role]) {
      throw new ForbiddenError(`token ${JSON.stringify(p.name)} has role ${p.role}; ${action} needs ${role}`);
    }
  }
}

/**
 * Sync config tokens into the store; when no token exists at all, create an admin token, store its
 * hash, and write the plaintext to `<dataDir>/admin-token` (mode 0600) for the CLI. Returns a hint
 * for the operator (never the token itself when it came from the config).
 */
export function bootstrapTokens(store: Store, configTokens: readonly { name: string; role: Role; sha256: string }[], dataDir: string): string {
  const now = Date.now();
  for (const t of store.listTokens()) if (t.source === 'config' && !configTokens.some((c) => c.name === t.name)) store.deleteToken(t.name);
  for (const t of configTokens) store.putToken({ name: t.name, role: t.role, sha256: t.sha256, createdAt: now, source: 'config' });
  const file = path.join(dataDir, TOKEN_FILE);
  if (configTokens.length > 0) return 'from the config (auth.tokens)';
  const generated = store.listTokens().find((t) => t.source === 'generated');
  if (generated && existsSync(file)) {
    const plain = readFileSync(file, 'utf8').trim();
    if (sha256hex(plain) === generated.sha256) return `${file} (used by the CLI when GLIDEPATH_TOKEN is unset)`;
  }
  const token = `gp_${randomBytes(24).toString('base64url')}`;
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  store.putToken({ name: 'admin', role: 'admin', sha256: sha256hex(token), createdAt: now, source: 'generated' });
  return `${file} (generated; used by the CLI when GLIDEPATH_TOKEN is unset)`;
}
