// The dashboard's session store, login throttle, cookie parsing, static bundle and the evidence ECDFs: pure parts, fake clocks.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sessionCookie, sessionCookies } from '../../../src/api/dashboard.js';
import { ecdfPair } from '../../../src/api/series.js';
import { LoginThrottle, SessionStore } from '../../../src/api/session.js';
import { StaticBundle } from '../../../src/api/static.js';

const P = { name: 'ops', role: 'operator' as const };
const H = Buffer.alloc(32, 1);

describe('SessionStore', () => {
  it('gives 256-bit random ids and CSRF tokens, different every time', () => {
    const s = new SessionStore({ idleMs: 1000, maxMs: 10_000, maxSessions: 10 });
    const a = s.create(P, H);
    const b = s.create(P, H);
    expect(Buffer.from(a.id, 'base64url')).toHaveLength(32);
    expect(Buffer.from(a.session.csrf, 'base64url')).toHaveLength(32);
    expect(a.id).not.toBe(b.id);
    expect(a.session.csrf).not.toBe(b.session.csrf);
    expect(s.get(a.id)?.principal).toEqual(P);
    expect(s.get('nope')).toBeUndefined();
  });

  it('slides the idle lifetime with each use and ends a session at its hard limit however used', () => {
    let now = 0;
    const s = new SessionStore({ idleMs: 1000, maxMs: 2500, maxSessions: 10 }, () => now);
    const { id } = s.create(P, H);
    for (now = 900; now < 2500; now += 900) expect(s.get(id), `at ${now}`).toBeDefined();
    now = 2500;
    expect(s.get(id)).toBeUndefined();
    const b = s.create(P, H);
    now += 999;
    expect(s.get(b.id)).toBeDefined();
    now += 1000;
    expect(s.get(b.id)).toBeUndefined();
  });

  it('holds at most maxSessions, ending the oldest first', () => {
    const s = new SessionStore({ idleMs: 1000, maxMs: 2000, maxSessions: 3 }, () => 0);
    const ids = Array.from({ length: 5 }, () => s.create(P, H).id);
    expect(s.size).toBe(3);
    expect(ids.map((id) => s.get(id) !== undefined)).toEqual([false, false, true, true, true]);
  });

  it("holds at most maxPerToken sessions of one token, ending that token's oldest: logins with one token never end another's sessions", () => {
    const s = new SessionStore({ idleMs: 1000, maxMs: 2000, maxSessions: 6, maxPerToken: 2 }, () => 0);
    const other = Buffer.alloc(32, 7);
    const theirs = s.create(P, other).id;
    const ids = Array.from({ length: 10 }, () => s.create(P, H).id);
    expect(s.size).toBe(3);
    expect(s.get(theirs)).toBeDefined();
    expect(ids.map((id) => s.get(id) !== undefined)).toEqual([false, false, false, false, false, false, false, false, true, true]);
  });

  it('ends a session on logout', () => {
    const s = new SessionStore();
    const { id } = s.create(P, H);
    expect(s.end(id)).toBe(true);
    expect(s.get(id)).toBeUndefined();
  });
});

describe('LoginThrottle', () => {
  it('refuses an address after its failures in a minute, for the rest of that minute only, and bounds the addresses it keeps', () => {
    let now = 0;
    const t = new LoginThrottle(3, 2, () => now);
    for (let i = 0; i < 3; i++) {
      expect(t.retryAfterS('a')).toBe(0);
      t.failed('a');
    }
    now = 20_000;
    expect(t.retryAfterS('a')).toBe(40);
    expect(t.retryAfterS('b')).toBe(0);
    now = 60_000;
    expect(t.retryAfterS('a')).toBe(0);
    for (const a of ['x', 'y', 'z']) t.failed(a);
    expect(t.size).toBe(2);
  });
});

describe('sessionCookie', () => {
  it('finds gp_session among other cookies and refuses a malformed value', () => {
    expect(sessionCookie('a=1; gp_session=abc_DEF-9; b=2')).toBe('abc_DEF-9');
    expect(sessionCookie('gp_sessionx=1')).toBeUndefined();
    expect(sessionCookie('gp_session=a b')).toBeUndefined();
    expect(sessionCookie(undefined)).toBeUndefined();
  });

  // regression: a malformed first gp_session hid a valid one after it, and was reported as a missing Authorization header
  it('takes a well-formed gp_session after a malformed one, and says when one was malformed', () => {
    expect(sessionCookies('gp_session=abc!; gp_session=good_1')).toEqual({ id: 'good_1', malformed: true });
    expect(sessionCookies('gp_session=abc!')).toEqual({ id: undefined, malformed: true });
    expect(sessionCookies('gp_session=ok; gp_session=abc!')).toEqual({ id: 'ok', malformed: false });
    expect(sessionCookies('other=abc!')).toEqual({ id: undefined, malformed: false });
    expect(sessionCookies(`gp_session=${'a'.repeat(129)}`)).toEqual({ id: undefined, malformed: true });
  });
});

describe('ecdfPair', () => {
  it('evaluates both ECDFs on one grid from the smallest to the largest sample', () => {
    const e = ecdfPair([1, 2, 3, 4], [3, 5], 5);
    expect(e.x).toEqual([1, 2, 3, 4, 5]);
    expect(e.stable).toEqual([0.25, 0.5, 0.75, 1, 1]);
    expect(e.canary).toEqual([0, 0, 0.5, 0.5, 1]);
    expect([e.n_stable, e.n_canary]).toEqual([4, 2]);
  });

  it('leaves a side without samples empty (null), and drops NaN', () => {
    const e = ecdfPair([NaN, 2], [], 3);
    expect(e.x).toEqual([2]);
    expect(e.stable).toEqual([1]);
    expect(e.canary).toEqual([null]);
    expect(ecdfPair([], []).x).toEqual([]);
  });
});

describe('StaticBundle', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-web-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is null before the build, then serves only plain file names of known types from its own folder', () => {
    const b = new StaticBundle(path.join(dir, 'web'));
    expect(b.file('index.html')).toBeNull();
    mkdirSync(path.join(dir, 'web', 'sub'), { recursive: true });
    writeFileSync(path.join(dir, 'web', 'index.html'), '<!doctype html>');
    writeFileSync(path.join(dir, 'web', 'app.js'), 'x');
    writeFileSync(path.join(dir, 'web', '.env'), 'secret');
    writeFileSync(path.join(dir, 'web', 'notes.txt'), 'no type');
    writeFileSync(path.join(dir, 'web', 'sub', 'a.js'), 'nested');
    writeFileSync(path.join(dir, 'secret.js'), 'outside');
    expect(b.file('index.html')?.type).toBe('text/html; charset=utf-8');
    expect(b.file('app.js')?.body.toString()).toBe('x');
    for (const bad of ['.env', 'notes.txt', 'sub/a.js', '../secret.js', '..', 'sub']) expect(b.file(bad), bad).toBeUndefined();
  });
});
