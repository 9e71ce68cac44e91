// The dashboard's sessions: random 256-bit ids kept in memory (only their hashes), each with its
// CSRF token, a sliding idle lifetime and a hard one, bounded in number; and the throttle on failed
// logins per client address. Nothing here is persisted: a restart logs everyone out, by design.
import { createHash, randomBytes } from 'node:crypto';
import { DEFAULTS } from '../defaults.js';
import type { Principal } from './auth.js';

export interface SessionLimits {
  idleMs: number;
  maxMs: number;
  maxSessions: number;
  /** Sessions one token may hold (default DEFAULTS.dashboard.maxSessionsPerToken). */
  maxPerToken?: number;
}

export interface Session {
  /** The principal at login; checked against the token store again on every use (`tokenHash`). */
  readonly principal: Principal;
  /** The SHA-256 of the token the session was opened with (never the token itself). */
  readonly tokenHash: Buffer;
  /** Sent by the page in `x-glidepath-csrf` with every change. */
  readonly csrf: string;
  readonly createdAt: number;
  lastSeen: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  idleMs: DEFAULTS.dashboard.sessionIdleMs,
  maxMs: DEFAULTS.dashboard.sessionMaxMs,
  maxSessions: DEFAULTS.dashboard.maxSessions,
  maxPerToken: DEFAULTS.dashboard.maxSessionsPerToken,
};

/** The map is keyed by the id's hash, so that neither lookup timing nor a heap dump gives an id away. */
function key(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

export class SessionStore {
  /** Insertion order is creation order: the first entry is the oldest session. */
  private readonly sessions = new Map<string, Session>();

  constructor(
    readonly limits: SessionLimits = DEFAULT_SESSION_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /**
   * A new session. Past `maxPerToken` sessions of the same token, that token's oldest ends (so logins
   * with one token never end another's sessions); past `maxSessions`, the expired ones, then the oldest.
   */
  create(principal: Principal, tokenHash: Buffer): { id: string; session: Session } {
    const now = this.now();
    const perToken = this.limits.maxPerToken ?? DEFAULTS.dashboard.maxSessionsPerToken;
    const mine = [...this.sessions].filter(([, s]) => s.tokenHash.equals(tokenHash));
    for (const [k] of mine.slice(0, Math.max(0, mine.length - perToken + 1))) this.sessions.delete(k);
    if (this.sessions.size >= this.limits.maxSessions) this.sweep(now);
    while (this.sessions.size >= this.limits.maxSessions) {
      const oldest = this.sessions.keys().next();
      if (oldest.done === true) break;
      this.sessions.delete(oldest.value);
    }
    const id = randomBytes(32).toString('base64url');
    const session: Session = { principal, tokenHash, csrf: randomBytes(32).toString('base64url'), createdAt: now, lastSeen: now };
    this.sessions.set(key(id), session);
    return { id, session };
  }

  /** The live session of `id` (its idle time restarts), or undefined: unknown, idle too long, or past its hard limit. */
  get(id: string): Session | undefined {
    const k = key(id);
    const s = this.sessions.get(k);
    if (s === undefined) return undefined;
    const now = this.now();
    if (this.expired(s, now)) {
      this.sessions.delete(k);
      return undefined;
    }
    s.lastSeen = now;
    return s;
  }

  /** Whether `id` is a live session, without counting this as a use (for a stream's periodic check). */
  alive(id: string): boolean {
    const s = this.sessions.get(key(id));
    return s !== undefined && !this.expired(s, this.now());
  }

  end(id: string): boolean {
    return this.sessions.delete(key(id));
  }

  /** When the session ends if it is not used again (epoch ms). */
  expiresAt(s: Session): number {
    return Math.min(s.lastSeen + this.limits.idleMs, s.createdAt + this.limits.maxMs);
  }

  private expired(s: Session, now: number): boolean {
    return now >= this.expiresAt(s);
  }

  private sweep(now: number): void {
    for (const [k, s] of this.sessions) if (this.expired(s, now)) this.sessions.delete(k);
  }
}

/**
 * Failed logins per client address in fixed one-minute windows. Bounded: past `maxAddresses` the
 * address seen longest ago is forgotten (a flood from many addresses forgets, it does not grow).
 */
export class LoginThrottle {
  private readonly failures = new Map<string, { windowStart: number; count: number }>();

  constructor(
    private readonly perMinute: number = DEFAULTS.dashboard.loginFailuresPerMinute,
    private readonly maxAddresses: number = DEFAULTS.dashboard.maxLoginAddresses,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until `addr` may try again, or 0 when it may now. */
  retryAfterS(addr: string): number {
    const e = this.failures.get(addr);
    if (e === undefined) return 0;
    const left = e.windowStart + 60_000 - this.now();
    if (left <= 0) {
      this.failures.delete(addr);
      return 0;
    }
    return e.count >= this.perMinute ? Math.ceil(left / 1000) : 0;
  }

  failed(addr: string): void {
    const now = this.now();
    let e = this.failures.get(addr);
    if (e === undefined || now - e.windowStart >= 60_000) {
      this.failures.delete(addr);
      if (this.failures.size >= this.maxAddresses) {
        const oldest = this.failures.keys().next();
        if (oldest.done !== true) this.failures.delete(oldest.value);
      }
      e = { windowStart: now, count: 0 };
      this.failures.set(addr, e);
    }
    e.count++;
  }

  get size(): number {
    return this.failures.size;
  }
}
