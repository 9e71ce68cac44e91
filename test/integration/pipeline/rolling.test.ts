// Given a real `glidepath up` whose model serves v1 (2 workers) and has v2 registered but not
// loaded, when a pipeline's rolling stage runs `glidepath rollout rolling --to v2` and watches the
// gates until rolling_succeeded, then waits for rolling_succeeded and healthy, then the pipeline
// succeeds and v2 is active, served by its own 2 workers.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RollingView } from '../../../src/api/types.js';
import { simConfigYaml } from '../../helpers/e2e-up.js';
import { upForFile } from '../../helpers/e2e-file.js';
import type { UpProcess, WorkerView } from '../../helpers/e2e-up.js';
import { gp } from '../cli/helpers.js';

const file = upForFile('pipeline-rolling', (dataDir) =>
  simConfigYaml({
    model: 'chat',
    dataDir,
    versions: [
      { id: 'v1', seed: 1, replicas: 2 },
      { id: 'v2', seed: 2, replicas: 2 },
    ],
  }).replace('models:\n', 'control: { tick_ms: 250 }\nmodels:\n'),
);

const cli = (up: UpProcess, args: string[]) => gp(args, { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_TOKEN: up.token }, { cwd: up.dataDir });

interface RunView {
  outcome: string;
  stages: { name: string; status: string; steps: { what: string; status: string; detail: string }[]; on_failure: unknown[] }[];
}

describe('pipeline rolling stage against glidepath up', () => {
  it('rollout rolling, then monitor until rolling_succeeded: the pipeline succeeds and v2 is active', async () => {
    const up = file.current();
    expect((await up.admin('GET', '/models/chat/rolling')).status).toBe(404);
    const pipeline = join(up.dataDir, 'rolling.yaml');
    writeFileSync(
      pipeline,
      `pipeline:
  model: chat
  stages:
    - name: rolling
      steps:
        - run: glidepath rollout rolling --to $VERSION --max-surge 1 --max-unavailable 0
        - monitor: health_gates
          until: rolling_succeeded
          for: 60s
          every: 100ms
        - on_failure: glidepath rollout abort --reason "pipeline step failed"
    - name: verify
      steps:
        - wait_for: rolling_succeeded
          timeout: 10s
        - wait_for: healthy
          timeout: 10s
rollback:
  trigger: canary.error_rate > 0.05 AND canary.requests >= 20
  action: glidepath rollout abort --reason "pipeline rollback trigger"
`,
    );
    const r = await cli(up, ['pipeline', 'run', pipeline, '--var', 'VERSION=v2', '--poll', '50ms', '-o', 'json']);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    const res = JSON.parse(r.stdout) as RunView;
    expect(res.outcome).toBe('succeeded');
    expect(res.stages.map((s) => [s.name, s.status, s.on_failure.length])).toEqual([
      ['rolling', 'ok', 0],
      ['verify', 'ok', 0],
    ]);
    const [, monitor] = res.stages[0]!.steps;
    expect(monitor?.what).toBe('monitor health_gates until rolling_succeeded');
    expect(monitor?.detail).toMatch(/^rolling update to v2 succeeded; health gates held \(\d+ checks; last: /);
    expect(res.stages[1]!.steps.map((s) => s.detail)).toEqual([
      'rolling update to v2 succeeded',
      expect.stringMatching(/^v2 is active with 2 routable worker\(s\)/),
    ]);
    expect(r.stderr).toMatch(/\[rolling\] .*v1 → v2/);

    const view = await up.ok<RollingView>('GET', '/models/chat/rolling');
    expect(view).toMatchObject({ from: 'v1', to: 'v2', phase: 'succeeded' });
    const status = await up.ok<{ models: { model: string; active: string | null }[] }>('GET', '/status');
    expect(status.models.find((m) => m.model === 'chat')?.active).toBe('v2');
    const workers = await up.ok<WorkerView[]>('GET', '/workers?model=chat');
    expect(workers.map((w) => w.version)).toEqual(['v2', 'v2']);
  }, 90_000);
});
