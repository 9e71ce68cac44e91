// The building blocks of the config schemas: zod types with Glidepath's wording of what was expected.
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';

/** Human rendering of a bad value for error messages: strings quoted, objects as their kind. */
export function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'bigint') return v.toString();
  // numbers, booleans; functions and symbols have no JSON form
  return JSON.stringify(v) ?? typeof v;
}

export const msg = (what: string) => ({ error: (iss: { input?: unknown }) => `expected ${what}, got ${show(iss.input)}` });

export const posInt = () => z.number(msg('a positive integer')).int(msg('a positive integer')).positive(msg('a positive integer'));
export const nonNegInt = () => z.number(msg('a non-negative integer')).int(msg('a non-negative integer')).min(0, msg('a non-negative integer'));
export const nonNeg = () => z.number(msg('a non-negative number')).min(0, msg('a non-negative number')).refine(Number.isFinite, msg('a finite number'));
export const positive = () => z.number(msg('a positive number')).positive(msg('a positive number')).refine(Number.isFinite, msg('a finite number'));
export const fraction = () => z.number(msg('a number from 0 to 1')).min(0, msg('a number from 0 to 1')).max(1, msg('a number from 0 to 1'));

const TIMER_MAX_MS = DEFAULTS.durations.timerMaxMs;

/** `86400000` → `a day`, `604800000` → `7 days`; other bounds as they are. */
function humanMs(ms: number): string {
  if (ms === TIMER_MAX_MS) return '~24.8 days, the longest a timer waits';
  if (ms % 86_400_000 === 0) return ms === 86_400_000 ? 'a day' : `${ms / 86_400_000} days`;
  return `${ms / 1000} s`;
}

/** The wording of a duration past its bound: the bound in ms and in words. */
export const tooLong = (max: number) => msg(`at most ${max} ms (${humanMs(max)})`);

/**
 * A duration in ms that can reach a timer: a positive integer up to `max` (default the longest a
 * timer waits, DEFAULTS.durations.timerMaxMs: past it Node fires after 1 ms). Every config key and
 * admin API field in ms is one of these three, so none can loop every ms or time out at once.
 */
export const durationMs = (max: number = TIMER_MAX_MS) => posInt().max(max, tooLong(max));
/** As durationMs, 0 allowed (0: the thing is off). */
export const durationMsOrZero = (max: number = TIMER_MAX_MS) => nonNegInt().max(max, tooLong(max));
/** As durationMsOrZero, fractions of a ms allowed (the simulator's timings). */
export const durationMsFraction = (max: number = TIMER_MAX_MS) =>
  z.number(msg('a non-negative number')).min(0, msg('a non-negative number')).max(max, tooLong(max));

/** A sticky salt (the gateway's, a route's): non-empty and at most DEFAULTS.gateway.maxStickySaltChars characters. */
export const stickySalt = () =>
  z
    .string(msg('a sticky salt'))
    .min(1, msg('a non-empty sticky salt'))
    .max(DEFAULTS.gateway.maxStickySaltChars, {
      error: (iss: { input?: unknown }) =>
        `expected a sticky salt of at most ${DEFAULTS.gateway.maxStickySaltChars} characters, got ${typeof iss.input === 'string' ? iss.input.length : '?'} characters`,
    });

export const name = (what: string) =>
  z.string(msg(what)).regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, msg(`${what} (letters, digits, . _ : / -; at most 128 characters)`));
export const str = (what = 'a string') => z.string(msg(what)).min(1, msg(`a non-empty ${what.replace(/^an? /, '')}`));
export const bool = () => z.boolean(msg('true or false'));
export const url = () =>
  z.string(msg('an http(s) URL')).refine((s) => {
    try {
      const u = new URL(s);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  }, msg('an http(s) URL'));
