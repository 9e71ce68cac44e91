// The error catalogue is the one table of codes: every code src/ raises, answers, records or audits is
// in it, every code in it is used, and docs/errors.md says exactly what it says.
//
// Most codes are already checked by the compiler (every error constructor takes an ErrorCode). This
// scan is the net for codes written as plain strings: error bodies built by hand, request-record
// codes, audit entries, the CLI's ApiError, and anything a later change adds outside the typed
// constructors. The same scan decides which codes are used, so a code named only in a comment is not.
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS_DOC, renderErrorsDoc } from '../../../scripts/errors/render.js';
import { CATALOGUE, errorTypeOf, GlidepathError, UpstreamError, withoutStack } from '../../../src/errors.js';
import { CATALOGUE_PARTS } from '../../../src/errors/catalogue.js';
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
  // the catalogue's classes, the parser's, the domain's and the CLI's, whose first argument is the code
  [
    /new (?:Glidepath|BadRequest|NotFound|Conflict|Unprocessable|Upstream|Unavailable|TooManyRequests|GatewayTimeout|Parse|VersionRule|Api)Error\(\s*'([a-z0-9_]+)'/g,
    () => true,
  ],
  [/\bApiError\.local\(\s*'([a-z0-9_]+)'/g, () => true], // the CLI's own codes
  [/\bbad\(\s*'([a-z0-9_]+)'/g, (f) => f.startsWith('gateway/http1/')], // the HTTP parser's 400s
  [/\bthis\.fail\((?:stream, headers, c, )?'([a-z0-9_]+)'/g, (f) => f === 'gateway/front-conn.ts' || f === 'gateway/front-h2.ts'], // the fronts' own answers
  [/\banswer\(\s*'([a-z0-9_]+)'/g, (f) => f === 'gateway/limits.ts'], // refusals
  [/\bfinish(?:Stream)?\([^,()]+, '([a-z0-9_]+)'/g, (f) => f === 'gateway/proxy.ts'], // the proxy's records
  [/\bdone\([^,()]+, '([a-z0-9_]+)'/g, (f) => f === 'gateway/shadow.ts'], // the shadow's records
  [/\bsseErrorEvent\([^,()]+, '([a-z0-9_]+)'/g, () => true],
];

/** A code property (error bodies built by hand, records, audit entries, literal types): every lower-case literal in its value. */
const CODE_PROPERTY = /\b(?:code:|errorCode(?::| =)) ([^{,;\n][^,;\n]*)/g;
const LITERAL = /'([a-z][a-z0-9_]*)'/g;

/** Every (file, code) written as a string literal where src/ builds an error, outside the table itself. */
function codeSites(files: readonly { file: string; text: string }[]): { file: string; code: string }[] {
  const out: { file: string; code: string }[] = [];
  for (const { file, text } of files) {
    if (file.startsWith('errors/')) continue; // the table itself (its parts)
    for (const [re, applies] of CODE_SITES) {
      if (applies(file)) for (const m of text.matchAll(re)) out.push({ file, code: m[1]! });
    }
    for (const m of text.matchAll(CODE_PROPERTY)) for (const l of m[1]!.matchAll(LITERAL)) out.push({ file, code: l[1]! });
  }
  return out;
}

const isCode = (c: string): c is ErrorCode => Object.hasOwn(CATALOGUE, c);

describe('the error catalogue (src/errors/catalogue.ts)', () => {
  const files = sources();
  const sites = codeSites(files);

  it('no code is defined in two of its parts (the join would keep the last one silently)', () => {
    const total = CATALOGUE_PARTS.reduce((n, p) => n + Object.keys(p).length, 0);
    expect(total).toBe(Object.keys(CATALOGUE).length);
  });

  it('every code src/ writes is in the table', () => {
    expect(sites.length).toBeGreaterThan(150); // the scan finds the sites at all
    expect(sites.filter((s) => !isCode(s.code)).map((s) => `${s.file}: ${s.code}`)).toEqual([]);
  });

  it('no code is built at run time, and no error type is written by hand', () => {
    // a code assembled from parts (`http_${status}`) is one the table cannot list; a type written by
    // hand can disagree with the code's status (the type follows from the status: errorTypeOf)
    const built = /\b(?:code:|errorCode(?::| =)) [^,;\n]*`/g;
    const typed = /\btype: '[a-z_]+_error'/g;
    const found = files
      .filter((f) => !f.file.startsWith('errors'))
      .flatMap(({ file, text }) => [...text.matchAll(built), ...text.matchAll(typed)].map((m) => `${file}: ${m[0]}`));
    expect(found).toEqual([]);
  });

  it('every code in the table is used somewhere in src/', () => {
    // used: written at a site above, or fixed by one of the classes of src/errors.ts (UnauthorizedError…)
    const classes = files.find((f) => f.file === 'errors.ts')!.text;
    const fixed = [...classes.matchAll(/\bsuper\(\s*'([a-z0-9_]+)'/g)].map((m) => m[1]!);
    expect(fixed.length).toBeGreaterThan(3);
    const used = new Set([...sites.map((s) => s.code), ...fixed]);
    expect(Object.keys(CATALOGUE).filter((c) => !used.has(c))).toEqual([]);
  });

  it('a code has one status, and its type follows from it', () => {
    expect(new GlidepathError('route_revision_conflict', 'x').status).toBe(409);
    expect(new GlidepathError('server_overloaded', 'x').status).toBe(503);
    expect(new GlidepathError('rate_limited', 'x').toBody().error.type).toBe('rate_limit_error');
    expect(new GlidepathError('injected_fault', 'x', { status: 418 }).status).toBe(418); // the one code whose status the caller names
    // @ts-expect-error -- any other code answers with the table's status (npm run typecheck fails here if it may name one)
    expect(new GlidepathError('rate_limited', 'x', { status: 418 }).status).toBe(429);
    for (const [code, [status]] of Object.entries(CATALOGUE)) {
      expect([code, status >= 400 && status <= 599]).toEqual([code, true]);
      expect(typeof errorTypeOf(status)).toBe('string');
    }
  });

  it("a worker's failures carry no stack (withoutStack), and every other error keeps its own", () => {
    const limit = Error.stackTraceLimit;
    const e = new UpstreamError('upstream_stream_broken', 'worker w1 dropped the stream');
    expect(e.stack).toBe('UpstreamError: worker w1 dropped the stream');
    expect(e).toMatchObject({ code: 'upstream_stream_broken', status: 502, name: 'UpstreamError' });
    expect(withoutStack(() => new Error('reset')).stack).toBe('Error: reset');
    expect(Error.stackTraceLimit).toBe(limit);
    expect(() =>
      withoutStack(() => {
        throw new Error('made in make()');
      }),
    ).toThrow('made in make()');
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new GlidepathError('route_revision_conflict', 'x').stack).toMatch(/\n\s+at /);
  });

  it('docs/errors.md is the table, rendered (npm run docs:errors rewrites it)', () => {
    const doc = readFileSync(ERRORS_DOC, 'utf8');
    const listed = [...doc.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]!);
    expect(listed.filter((c) => !isCode(c))).toEqual([]); // no code the table lacks
    expect(Object.keys(CATALOGUE).filter((c) => !listed.includes(c))).toEqual([]); // none missing
    expect(doc).toBe(renderErrorsDoc());
  });
});
