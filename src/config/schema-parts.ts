// The building blocks of the config schemas: zod types with Glidepath's wording of what was expected.
import { z } from 'zod';

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
