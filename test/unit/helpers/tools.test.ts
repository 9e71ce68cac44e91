// Regression: `npm test` right after `npm install` failed on a fresh machine, because tests needed
// promtool (Debian package prometheus) and script (bsdutils) that only .ci/run installs.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkTool, findTool } from '../../helpers/tools.js';

const ROOT = join(import.meta.dirname, '../../..');
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');
const FIXTURE_CONFIG = join(ROOT, 'test/fixtures/tools/vitest.config.ts');

/** Run the fixture's two tests (they need a program that does not exist) in a child vitest. */
function runFixture(ci: string | undefined): { status: number | null; out: string } {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CI;
  if (ci !== undefined) env.CI = ci;
  const r = spawnSync(process.execPath, [VITEST, 'run', '--config', FIXTURE_CONFIG], { cwd: ROOT, env, encoding: 'utf8', timeout: 50_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('npm test on a fresh machine without the Debian packages', () => {
  it('finds a program on PATH and nothing for a name that cannot exist', () => {
    expect(findTool('sh')).toMatch(/\/sh$/);
    expect(findTool('glidepath-no-such-tool')).toBeUndefined();
  });

  it('decides run / skip (with the package to install) / fail under CI', () => {
    expect(checkTool('sh', 'dash', { PATH: process.env.PATH })).toMatchObject({ run: true });
    expect(checkTool('glidepath-no-such-tool', 'pkg', { PATH: '' })).toEqual({
      run: false,
      skip: 'skipped: glidepath-no-such-tool not installed (apt-get install pkg)',
    });
    const ci = checkTool('glidepath-no-such-tool', 'pkg', { PATH: '', CI: 'true' });
    expect(ci.run).toBe(false);
    expect('fail' in ci && ci.fail).toMatch(/^glidepath-no-such-tool is not installed \(apt-get install pkg\)/);
  });

  it('without CI: tests needing a missing program are skipped with one line naming the package; the run passes', () => {
    const r = runFixture(undefined);
    expect(r.status, r.out).toBe(0);
    const lines = r.out.split('\n').filter((l) => l.includes('glidepath-no-such-tool not installed'));
    expect(lines).toEqual(['skipped: glidepath-no-such-tool not installed (apt-get install glidepath-no-such-package)']);
    expect(r.out).toMatch(/2 skipped/);
  });

  it('with CI=true: a missing program fails the run, naming the package', () => {
    const r = runFixture('true');
    expect(r.status, r.out).toBe(1);
    expect(r.out).toContain('glidepath-no-such-tool is not installed (apt-get install glidepath-no-such-package)');
    expect(r.out).toMatch(/2 failed/);
  });
});
