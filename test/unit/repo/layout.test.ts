// Regression: package.json shipped a `web/` folder that did not exist, and the README's layout
// listed a folder (`health/`) that did not exist. What a reader is told exists must exist.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

describe('package.json and the README name only what exists', () => {
  it('package.json "files" ships no folder that does not exist (dist is built)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    const missing = pkg.files.filter((f) => f !== 'dist' && !existsSync(join(ROOT, f)));
    expect(missing).toEqual([]);
  });

  it("the README's layout lists only folders that are in src/", () => {
    const m = /`src\/` follows the design \(([^)]*)\)/.exec(README);
    expect(m, 'the layout sentence in the README').not.toBeNull();
    const folders = m![1]!.split(',').map((f) => f.trim());
    expect(folders.length).toBeGreaterThan(5);
    expect(folders.filter((f) => !existsSync(join(ROOT, 'src', f)))).toEqual([]);
  });

  it('every src/ path the README names exists', () => {
    const paths = [...README.matchAll(/`(src\/[\w./-]*)`/g)].map((x) => x[1]!);
    expect(paths.length).toBeGreaterThan(5);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });
});
