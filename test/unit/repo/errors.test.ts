// The error catalogue is the one table of codes: every code src/ raises, answers, records or audits is
// in it, every code in it is used, and docs/errors.md says exactly what it says.
//
// Most codes are already checked by the compiler (every error constructor takes an ErrorCode). This
// scan is the net for codes written as plain strings: error bodies built by hand, request-record
// codes, the CLI's ApiError, and anything a later change adds outside the typed constructors.
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS_DOC, renderErrorsDoc } from '../../../scripts/errors/render.js';
import { CATALOGUE, errorTypeOf, GlidepathError } from '../../../src/errors.js';
import type { ErrorCode } from '../../../src/errors.js';

const SRC = join(import.meta.dirname, '../../../src');

function sources(dir = SRC): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') ? [{ file: relative(SRC, p), text: readFileSync(p, 'utf8') }] : [];
  });
}

/** Where a string literal is an error code, whatever builds it (a site may be limited to some files). */
const CODE_SITES: readonly (readonly [RegExp, (file: string) => boolean])[] = [
  // the catalogue's classes, and the parser's and the CLI's, whose first argument is the code
  [
    /new (?:Glidepath|BadRequest|NotFound|Conflict|Unprocessable|TooManyRequests|Upstream|Unavailable|GatewayTimeout|Parse|Api)Error\(\s*'([a-z0-9_]+)'/g,
    () => true,
  ],
  [/\bbad\(\s*'([a-z0-9_]+)'/g, (f) => f.startsWith('gateway/http1/')], // the HTTP parser's 400s
  [/\bthis\.fail\(\s*'([a-z0-9_]+)'/g, (f) => f === 'gateway/front.ts'], // the front's own answers
  [/\bcode: '([a-z0-9_]+)'/g, () => true], // error bodies and refusals built by hand
  [/\berrorCode(?: =|:) '([a-z0-9_]+)'/g, () => true], // request records, audit entries
  [/\bfinish(?:Stream)?\([^,()]+, '([a-z0-9_]+)'/g, (f) => f === 'gateway/proxy.ts'], // the proxy's records
  [/\bdone\([^,()]+, '([a-z0-9_]+)'/g, (f) => f === 'gateway/shadow.ts'], // the shadow's records
  [/\bsseErrorEvent\([^,()]+, '([a-z0-9_]+)'/g, () => true],
];

const isCode = (c: string): c is ErrorCode => Object.hasOwn(CATALOGUE, c);

describe('the error catalogue (src/errors.ts)', () => {
  const files = sources();

  it('every code src/ writes is in the table', () => {
    const unknown: string[] = [];
    let seen = 0;
    for (const { file, text } of files) {
      if (file === 'errors.ts') continue;
      for (const [re, applies] of CODE_SITES) {
        if (!applies(file)) continue;
        for (const m of text.matchAll(re)) {
          seen++;
          if (!isCode(m[1]!)) unknown.push(`${file}: ${m[1]!}`);
        }
      }
    }
    expect(seen).toBeGreaterThan(150); // the scan finds the sites at all
    expect(unknown).toEqual([]);
  });

  it('every code in the table is used somewhere in src/', () => {
    // errors.ts counts from its classes on (the fixed-code ones use theirs there), not the table itself
    const text = files.map((f) => (f.file === 'errors.ts' ? f.text.slice(f.text.indexOf('export class GlidepathError')) : f.text)).join('\n');
    const unused = Object.keys(CATALOGUE).filter((c) => !text.includes(`'${c}'`));
    expect(unused).toEqual([]);
  });

  it('a code has one status, and its type follows from it', () => {
    expect(new GlidepathError('route_revision_conflict', 'x').status).toBe(409);
    expect(new GlidepathError('server_overloaded', 'x').status).toBe(503);
    expect(new GlidepathError('rate_limited', 'x').toBody().error.type).toBe('rate_limit_error');
    expect(new GlidepathError('injected_fault', 'x', { status: 418 }).status).toBe(418); // the one code whose status the caller names
    for (const [code, [status]] of Object.entries(CATALOGUE)) {
      expect([code, status >= 400 && status <= 599]).toEqual([code, true]);
      expect(typeof errorTypeOf(status)).toBe('string');
    }
  });

  it('docs/errors.md is the table, rendered (npm run docs:errors rewrites it)', () => {
    const doc = readFileSync(ERRORS_DOC, 'utf8');
    const listed = [...doc.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]!);
    expect(listed.filter((c) => !isCode(c))).toEqual([]); // no code the table lacks
    expect(Object.keys(CATALOGUE).filter((c) => !listed.includes(c))).toEqual([]); // none missing
    expect(doc).toBe(renderErrorsDoc());
  });
});
