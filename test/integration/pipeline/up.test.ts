// A pipeline against a real `glidepath up` (simulated workers): deploy green → wait_for
// green_ready → swap → wait_for healthy succeeds; a trigger that fires runs `glidepath rollback`.
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../../..');
const MAIN = join(ROOT, 'dist/cli/main.js');

const CONFIG = `server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  data_dir: ./data
gpus:
  count: 4
  memory_gb: 80
models:
  - name: chat
    versions:
      - id: v1
        base_model: llama-3-8b
        weight_hash: sha256:1111
        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 1, load_time_ms: 50 } }
      - id: v2
        base_model: llama-3-8b
        weight_hash: sha256:2222
        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 1, load_time_ms: 50 } }
    route:
      weights: { v1: 1 }
`;

let dir = '';
let up: ChildProcessWithoutNullStreams | undefined;
let upExit: Promise<unknown> = Promise.resolve();
let adminUrl = '';

beforeAll(async () => {
  expect(existsSync(MAIN)).toBe(true);
  dir = mkdtempSync(join(tmpdir(), 'gp-pipeline-up-'));
  writeFileSync(join(dir, 'glidepath.yaml'), CONFIG);
  up = spawn(process.execPath, [MAIN, 'up', '--config', join(dir, 'glidepath.yaml')], { cwd: dir });
  const child = up;
  upExit = new Promise((resolve) => child.on('exit', resolve));
  up.stdout.resume();
  // `glidepath: data plane http://… admin API http://… state …` (on stderr) says it is serving
  for await (const line of createInterface({ input: up.stderr })) {
    const m = /admin API (http:\/\/\S+)/.exec(line);
    if (m) {
      adminUrl = m[1] as string;
      break;
    }
  }
  up.stderr.resume();
  expect(adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
}, 120_000);

afterAll(async () => {
  up?.kill('SIGTERM');
  await upExit;
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], { cwd: dir, env: { ...process.env, GLIDEPATH_URL: adminUrl, GLIDEPATH_DATA_DIR: join(dir, 'data') } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('glidepath pipeline run against glidepath up', () => {
  it('deploys green, swaps, and rolls back when the trigger fires', async () => {
    const deploy = join(dir, 'deploy.yaml');
    writeFileSync(
      deploy,
      `pipeline:
  model: chat
  stages:
    - name: load_green
      steps:
        - run: glidepath deploy green --version $VERSION
        - wait_for: green_ready
          timeout: 1m
    - name: promote
      steps:
        - run: dynamo swap --confirm
        - wait_for: healthy
          timeout: 1m
rollback:
  trigger: error_rate > 0.5
  action: glidepath rollback --instant
`,
    );
    const ok = await cli(['pipeline', 'run', deploy, '--var', 'VERSION=v2', '--poll', '50ms']);
    expect(ok.stderr.split('\n').filter((l) => l.includes('error'))).toEqual([]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('ok: v2 is ready');
    expect(ok.stdout).toMatch(/\[promote\] Swapped chat: v1 → v2/);
    expect(ok.stdout).toMatch(/ok: v2 is active with 1 routable worker\(s\)/);

    // requests >= 0 is known (0) on an idle fleet: the trigger fires at the first check
    const fire = join(dir, 'fire.yaml');
    writeFileSync(
      fire,
      `pipeline:
  model: chat
  stages:
    - name: canary
      steps:
        - monitor: health_gates
          for: 1m
          every: 50ms
rollback:
  trigger: requests >= 0
  action: glidepath rollback --instant --reason "pipeline trigger"
`,
    );
    const rb = await cli(['pipeline', 'run', fire, '-o', 'json']);
    expect(rb.code).toBe(1);
    const res = JSON.parse(rb.stdout) as { outcome: string; rollback: { versions: unknown; action: { status: string } } };
    expect(res.outcome).toBe('rolled_back');
    expect(res.rollback.versions).toEqual({ active: 'v2', stable: 'v2' });
    expect(res.rollback.action.status).toBe('ok');
    expect(rb.stderr).toContain('[canary] Rolled back to v1');
    const st = await cli(['status', '-o', 'json']);
    expect((JSON.parse(st.stdout) as { models: { active: string }[] }).models[0]!.active).toBe('v1');
  });
});
