// Regression: examples/deployment.yaml worked only with --dry-run (its model `llama` was not in the
// example fleet, and its first stage ran a script that does not exist). Given `npm start`'s fleet
// (examples/glidepath.yaml, state in a temp dir), when the example pipeline runs for real with the
// variables its header gives, then every stage runs against that fleet and it succeeds. An operator
// promotes the canary (the pipeline waits for it either way): judging it on traffic takes minutes.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, cleanupAll, ensureBuilt, removeDir, startUp, tempDir, waitForEvent, writeConfig } from '../../helpers/e2e-up.js';
import type { UpProcess } from '../../helpers/e2e-up.js';

let dir = '';
let up: UpProcess;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir('pipeline-example');
  const example = readFileSync(join(ROOT, 'examples/glidepath.yaml'), 'utf8');
  const yaml = example.replace(/^(\s*data_dir:).*$/m, `$1 ${JSON.stringify(join(dir, 'data'))}`);
  expect(yaml).toContain(join(dir, 'data'));
  up = await startUp({ configFile: writeConfig(dir, yaml), dataDir: join(dir, 'data') });
}, 60_000);

afterAll(async () => {
  await up?.kill('SIGTERM');
  cleanupAll();
  if (dir) removeDir(dir);
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: dir, env: { ...process.env, GLIDEPATH_URL: up.adminUrl, GLIDEPATH_TOKEN: up.token } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('examples/deployment.yaml works only with --dry-run', () => {
  it("runs for real against npm start's fleet: validate, canary (promoted), promote", async () => {
    const progressing = waitForEvent(up, 'canary_progressing', (e) => e.model === 'chat', 30_000);
    const run = cli(['pipeline', 'run', join(ROOT, 'examples/deployment.yaml'), '--var', 'MODEL=chat', '--var', 'VERSION=v2', '--poll', '50ms']);
    // a pipeline that stops before its canary runs says why here, not as a timeout
    const early = await Promise.race([progressing.then(() => undefined), run]);
    expect(early, early && `${early.stdout}\n${early.stderr}`).toBeUndefined();
    await up.ok('POST', '/models/chat/canary/promote', {});
    const r = await run;
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain('==> stage 1/3: validate');
    expect(r.stdout).toMatch(/\[canary\] Started canary-\w+: v2 vs v1, stages 1,5,25,50,100%/);
    expect(r.stdout).toContain('==> stage 3/3: promote');
    expect(r.stdout).toMatch(/\[promote\] chat\s+high\s+v2\s+v1\s/);
    expect(r.stdout).toMatch(/pipeline succeeded: 3 stage\(s\)/);
  });
});
