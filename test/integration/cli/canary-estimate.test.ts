// Regression: `canary start` with the defaults at the example's traffic needed hours and said
// nothing. It now prints the expected duration from the power analysis (the stage plan `plan`
// shows) and warns on stderr when that is long.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gp, startUp } from './helpers.js';
import type { Run, Up } from './helpers.js';

const CONFIG = `
gpus: { count: 4, memory_gb: 80 }
models:
  - name: chat
    versions:
      - id: v1
        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 0 } }
      - id: v2
        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 0 } }
    route:
      weights: { v1: 1 }
`;

let up: Up;
let env: Record<string, string>;
const cli = (...args: string[]): Promise<Run> => gp(args, env);

beforeAll(async () => {
  up = await startUp(CONFIG);
  env = { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_DATA_DIR: up.dataDir };
  // loaded beforehand, so that each canary starts at once and can be aborted at once
  expect((await cli('deploy', 'green', '--version', 'v2')).code).toBe(0);
});

afterAll(async () => {
  expect(await up.stop()).toBe(0);
});

// one canary per model at a time: each test's canary is rolled back after it
afterEach(async () => {
  await cli('canary', 'abort');
});

async function chat(): Promise<void> {
  const r = await fetch(`${up.dataUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  expect(r.status).toBe(200);
  await r.arrayBuffer();
}

describe('canary start needs hours and says nothing', () => {
  it('without traffic: says the duration is unknown and what the first stage waits for; no warning', async () => {
    const r = await cli('canary', 'start', '--version', 'v2');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Started canary-\w+: v2 vs v1, stages 2,5,10,25,50,100%/);
    expect(r.stdout).toMatch(/^expected duration: unknown, the model has no live traffic yet: each stage waits for its canary samples \(\d+ at 2 %\)$/m);
    expect(r.stderr).toBe('');
  });

  it('at a trickle of traffic: the expected hours, per stage, and a warning on stderr', async () => {
    // two requests then this CLI's start-up: a few requests per second at most, so a 0.1 % first
    // stage gets a few canary requests an hour and needs hours for its samples
    await chat();
    await chat();
    const r = await cli('canary', 'start', '--version', 'v2', '--stages', '0.1,100');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^expected duration: ~[\d.]+ h at [\d.]+ req\/s live \(0\.1 % ~[\d.]+ h\), then promotion$/m);
    expect(r.stderr).toMatch(
      /^warning: this canary is expected to take ~[\d.]+ h \(at 0\.1 % the canary gets [\d.]+ req\/s and needs \d+ samples\); more traffic, fewer or larger stages \(--stages\), or --shadow-share shorten it\n$/,
    );
  });

  it('-o json: the stage plan is in the document, the warning still on stderr', async () => {
    await chat();
    const r = await cli('canary', 'start', '--version', 'v2', '--stages', '0.1,100', '-o', 'json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json.stage_plan).toMatchObject({ stages: [{ percent: 0.1 }] });
    expect(r.json.stage_plan.total_ms).toBeGreaterThan(3_600_000);
    expect(r.stderr).toMatch(/^warning: this canary is expected to take/);
  });
});
