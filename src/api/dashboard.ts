// The dashboard's side of the admin listener: login (an admin token → an HttpOnly, SameSite=Strict
// session cookie), logout, the session's CSRF token, the built front end, and the admin API's
// second way in — the session cookie instead of a bearer token, with the CSRF token and a
// same-origin check on every change. docs/dashboard.md has the security model.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { zodMessage } from '../config/issues.js';
import { DEFAULTS } from '../defaults.js';
import {
  BadRequestError,
  ForbiddenError,
  GlidepathError,
  MethodNotAllowedError,
  NotFoundError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
} from '../errors.js';
import { parseJsonBody, readBody } from '../http/body.js';
import type { Store } from '../store/types.js';
import type { Authenticator, Principal } from './auth.js';
import { tokenHash } from './auth.js';
import { sendJsonRes } from './router.js';
import type { Session } from './session.js';
import { LoginThrottle, SessionStore } from './session.js';
import { StaticBundle, setSecurityHeaders } from './static.js';

export const DASHBOARD_PREFIX = '/dashboard';
export const SESSION_COOKIE = 'gp_session';
export const CSRF_HEADER = 'x-glidepath-csrf';

const loginBody = z.object({ token: z.string().min(1).max(512) }).strict();

/** What GET /dashboard/session and a login answer: who, which role, and the CSRF token for changes. */
export interface SessionView {
  name: string;
  role: Principal['role'];
  csrf: string;
  expires_at: number;
  idle_ms: number;
}

/**
 * The request's `gp_session` cookies: the first well-formed value (a malformed one before it, say from
 * another app on this host, does not hide it), and whether any was malformed.
 */
export function sessionCookies(header: string | undefined): { id: string | undefined; malformed: boolean } {
  let malformed = false;
  if (header === undefined) return { id: undefined, malformed };
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0 || part.slice(0, i).trim() !== SESSION_COOKIE) continue;
    const v = part.slice(i + 1).trim();
    if (/^[A-Za-z0-9_-]{1,128}$/.test(v)) return { id: v, malformed };
    malformed = true;
  }
  return { id: undefined, malformed };
}

/** The `gp_session` cookie's value, if the request has a well-formed one (the first, when repeated). */
export function sessionCookie(header: string | undefined): string | undefined {
  return sessionCookies(header).id;
}

/** Behind a TLS terminator the cookie must not travel in clear: Secure when the request came over TLS. */
function overTls(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean }).encrypted === true || req.headers['x-forwarded-proto'] === 'https';
}

/**
 * Where the page's changes may come from: a browser sends `Origin` with every POST/PUT/DELETE; it
 * must name this very host. Missing on a cookie-authenticated change: refused (no browser omits it).
 */
function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (origin === undefined || host === undefined) return false;
  return origin === `http://${host}` || origin === `https://${host}`;
}

function equalSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class Dashboard {
  readonly sessions: SessionStore;
  readonly throttle: LoginThrottle;
  readonly bundle: StaticBundle;

  constructor(
    private readonly auth: Authenticator,
    private readonly store: Pick<Store, 'appendAudit'>,
    opts: { webRoot: string; sessions?: SessionStore; throttle?: LoginThrottle },
  ) {
    this.sessions = opts.sessions ?? new SessionStore();
    this.throttle = opts.throttle ?? new LoginThrottle();
    this.bundle = new StaticBundle(opts.webRoot);
  }

  static owns(pathname: string): boolean {
    return pathname === '/' || pathname === DASHBOARD_PREFIX || pathname.startsWith(`${DASHBOARD_PREFIX}/`);
  }

  /**
   * Who makes an admin API call: the bearer token when there is an Authorization header; otherwise
   * the session cookie, whose token must still exist and, for a change, with the session's CSRF
   * token and from this origin.
   */
  principal(req: IncomingMessage, method: string): Principal {
    const header = req.headers.authorization;
    const cookie = header === undefined ? sessionCookies(req.headers.cookie) : { id: undefined, malformed: false };
    const id = cookie.id;
    // a session cookie that is not one: said so, not "missing Authorization header"
    if (id === undefined && cookie.malformed)
      throw new UnauthorizedError(
        `the ${SESSION_COOKIE} cookie is malformed (expected 1 to 128 letters, digits, _ or -): log in again at ${DASHBOARD_PREFIX}/, or send "Authorization: Bearer <token>"`,
      );
    // no cookie: the bearer token (its own 401 when the header is missing)
    if (id === undefined) {
      return this.auth.authenticate(header);
    }
    const s = this.live(id);
    if (method !== 'GET' && method !== 'HEAD') this.checkCsrf(req, s);
    return s.principal;
  }

  /**
   * A stream (SSE) opened with the session cookie ends when its session does: checked every
   * `checkMs` without counting as a use, so an open page alone does not keep a session alive.
   */
  bindStream(req: IncomingMessage, res: ServerResponse, checkMs: number = Math.min(this.sessions.limits.idleMs, DEFAULTS.dashboard.streamCheckMs)): void {
    if (req.headers.authorization !== undefined) return;
    const id = sessionCookie(req.headers.cookie);
    if (id === undefined) return;
    const timer = setInterval(() => {
      if (!this.sessions.alive(id)) res.end();
    }, checkMs);
    timer.unref();
    res.on('close', () => clearInterval(timer));
  }

  private live(id: string): Session {
    const s = this.sessions.get(id);
    if (s === undefined) throw new GlidepathError('session_expired', 'the dashboard session is unknown or expired; log in again');
    // a token revoked (or its role changed) since the login ends its sessions at once
    const now = this.auth.byHash(s.tokenHash);
    if (now === undefined || now.role !== s.principal.role) {
      this.sessions.end(id);
      throw new GlidepathError('session_expired', "the dashboard session's token was revoked or changed; log in again");
    }
    return s;
  }

  private checkCsrf(req: IncomingMessage, s: Session): void {
    const got = req.headers[CSRF_HEADER];
    if (typeof got !== 'string' || !equalSecret(got, s.csrf))
      throw new GlidepathError('csrf_rejected', `a change with the session cookie needs the session's CSRF token in ${CSRF_HEADER}`);
    if (!sameOrigin(req))
      throw new GlidepathError(
        'csrf_rejected',
        `a change with the session cookie must come from this origin (Origin ${JSON.stringify(req.headers.origin ?? 'missing')})`,
      );
  }

  /** Every request under /dashboard (and `/`, which sends the browser there). */
  async handle(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> {
    setSecurityHeaders(res);
    res.setHeader('cache-control', 'no-store');
    const method = req.method ?? 'GET';
    if (pathname === '/' || pathname === DASHBOARD_PREFIX) {
      req.resume();
      res.writeHead(302, { location: `${DASHBOARD_PREFIX}/`, 'content-length': 0 });
      res.end();
      return;
    }
    const rest = pathname.slice(DASHBOARD_PREFIX.length + 1);
    switch (rest) {
      case 'login':
        if (method !== 'POST') throw new MethodNotAllowedError(`${pathname} accepts POST only`, ['POST']);
        return this.login(req, res);
      case 'logout':
        if (method !== 'POST') throw new MethodNotAllowedError(`${pathname} accepts POST only`, ['POST']);
        return this.logout(req, res);
      case 'session': {
        if (method !== 'GET') throw new MethodNotAllowedError(`${pathname} accepts GET only`, ['GET']);
        const id = sessionCookie(req.headers.cookie);
        // no cookie at all: not logged in, which is no error (the page shows its login form); a cookie
        // whose session is gone is 401 session_expired
        if (id === undefined) {
          sendJsonRes(res, 200, null);
          return;
        }
        sendJsonRes(res, 200, this.view(this.live(id)));
        return;
      }
    }
    if (method !== 'GET' && method !== 'HEAD') throw new MethodNotAllowedError(`${pathname} accepts GET and HEAD only`, ['GET', 'HEAD']);
    req.resume();
    const f = this.bundle.file(rest === '' ? 'index.html' : rest);
    if (f === null) throw new GlidepathError('dashboard_not_built', `the dashboard is not built (no ${this.bundle.dir}/index.html); run npm run build`);
    if (f === undefined) throw new NotFoundError('not_found', `no dashboard file ${JSON.stringify(rest.slice(0, 100))}`);
    // the files are small and change with every build: revalidate each time, answer 304 when unchanged
    res.setHeader('cache-control', 'no-cache');
    res.setHeader('etag', f.etag);
    if (req.headers['if-none-match'] === f.etag) {
      res.writeHead(304);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': f.type, 'content-length': f.body.length });
    res.end(method === 'HEAD' ? undefined : f.body);
  }

  private view(s: Session): SessionView {
    return { name: s.principal.name, role: s.principal.role, csrf: s.csrf, expires_at: this.sessions.expiresAt(s), idle_ms: this.sessions.limits.idleMs };
  }

  private async login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // login CSRF: a page elsewhere must not log this browser in under someone else's token
    if (req.headers.origin !== undefined && !sameOrigin(req))
      throw new ForbiddenError(`login from another origin (${JSON.stringify(req.headers.origin)}) refused`);
    const addr = req.socket.remoteAddress ?? '';
    const wait = this.throttle.retryAfterS(addr);
    if (wait > 0) {
      req.resume();
      throw new GlidepathError('login_throttled', `too many failed logins from ${addr}; try again in ${wait} s`, { retryAfterS: wait });
    }
    const ct = req.headers['content-type'];
    if (ct === undefined || !/^application\/json\b/i.test(ct)) throw new UnsupportedMediaTypeError(ct);
    const raw = await readBody(req, DEFAULTS.dashboard.maxLoginBodyBytes);
    const parsed = loginBody.safeParse(raw.length === 0 ? {} : parseJsonBody(raw));
    if (!parsed.success) throw new BadRequestError('invalid_body', zodMessage(parsed.error));
    const hash = tokenHash(parsed.data.token);
    const principal = this.auth.byHash(hash);
    if (principal === undefined) {
      this.throttle.failed(addr);
      throw new UnauthorizedError('invalid token');
    }
    const { id, session } = this.sessions.create(principal, hash);
    await this.store.appendAudit({ at: Date.now(), actor: principal.name, action: 'dashboard.login', params: { role: principal.role }, result: 'ok' });
    const maxAge = Math.floor(this.sessions.limits.maxMs / 1000);
    res.setHeader('set-cookie', `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}${overTls(req) ? '; Secure' : ''}`);
    sendJsonRes(res, 200, this.view(session));
  }

  private async logout(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.resume();
    const id = sessionCookie(req.headers.cookie);
    if (id !== undefined) {
      const s = this.sessions.get(id);
      if (s !== undefined) {
        this.checkCsrf(req, s);
        this.sessions.end(id);
        await this.store.appendAudit({ at: Date.now(), actor: s.principal.name, action: 'dashboard.logout', params: {}, result: 'ok' });
      }
    }
    res.setHeader('set-cookie', `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${overTls(req) ? '; Secure' : ''}`);
    sendJsonRes(res, 200, { ok: true });
  }
}
