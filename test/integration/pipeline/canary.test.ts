// Given a real `glidepath up` with steady traffic and a canary that fails 20 % of its requests,
// when seed 000's canary stage runs as a pipeline (canary start → monitor until canary_succeeded),
// then the pipeline's own trigger (canary.error_rate) fires, aborts the canary and exits 1.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoadGen, canaryConfigYaml } from '../../helpers/e2e-canary.js';
import type { CanaryView } from '../../../src/api/types.js';
import { CLI, cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from '../../helpers/e2e-up.js';
import type { UpProcess } from '../../helpers/e2e-up.js';

let dir = '';
let up: UpProcess;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir('pipeline-canary');
  // the judge tolerates any error rate here (and needs 500 samples for latency), so only the
  // pipeline's trigger can stop this canary: the test is about the pipeline, not the judge
  const yaml = canaryConfigYaml({
    dataDir: dir,
    tickMs: 100,
    models: [
      {
        name: 'chat',
        versions: [
          { id: 'v1', seed: 1, prefillTokensPerS: 1000 },
          { id: 'v2', seed: 2, prefillTokensPerS: 1000, errorRate: 0.2 },
        ],
        canary: { stages: [10, 50, 100], stageDurationMs: 60_000, minSamples: 500 },
      },
    ],
  }).replace('min_samples: 500', 'min_samples: 500, max_error_rate: 0.9, max_error_increase: 1000');
  expect(yaml).toContain('max_error_rate: 0.9');
  up = await startUp({ configFile: writeConfig(dir, yaml), dataDir: dir });
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

describe('pipeline canary stage against glidepath up', () => {
  it('the trigger catches an erroring canary and the rollback action aborts it', async () => {
    const file = join(dir, 'deployment.yaml');
    writeFileSync(
      file,
      `pipeline:
  model: chat
  stages:
    - name: canary
      steps:
        - run: glidepath canary start --version $VERSION
        - monitor: health_gates
          until: canary_succeeded
          for: 60s
          every: 100ms
        - on_failure: glidepath canary abort --reason "pipeline step failed"
rollback:
  trigger: canary.error_rate > 0.05 AND canary.requests >= 20
  action: dynamo canary abort --reason "pipeline rollback trigger"
`,
    );
    const load = new LoadGen(up.dataUrl, ['chat'], { concurrency: 6, maxTokens: 8, maxRequests: 20_000, maxMs: 60_000 });
    try {
      const r = await cli(['pipeline', 'run', file, '--var', 'VERSION=v2', '-o', 'json']);
      expect(r.code, r.stderr).toBe(1);
      const res = JSON.parse(r.stdout) as {
        outcome: string;
        rollback: { versions: Record<string, string>; evaluation: { checks: { expr: string; value: number | null }[] }; action: { status: string } };
      };
      expect(res.outcome).toBe('rolled_back');
      expect(res.rollback.versions).toMatchObject({ active: 'v1', stable: 'v1', canary: 'v2' });
      const rate = res.rollback.evaluation.checks.find((c) => c.expr === 'canary.error_rate > 0.05')!.value!;
      expect(rate).toBeGreaterThan(0.05);
      expect(res.rollback.action.status).toBe('ok');
    } finally {
      await load.stop();
    }
    const view = await up.ok<CanaryView>('GET', '/models/chat/canary');
    expect(view.phase).toBe('aborted');
    // (the reason is on the rollback record; `message` can be overwritten by a tick that was in flight)
    expect((view as unknown as { rollback: { reason: string } }).rollback.reason).toBe('pipeline rollback trigger');
    const route = await up.ok<{ weights: Record<string, number> }>('GET', '/models/chat/route');
    expect(route.weights.v2 ?? 0).toBe(0);
  });
});
