// `glidepath pipeline run|check` through the built CLI against a fake admin API on port 0.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PipelineRunView } from '../../../src/api/types.js';

const ROOT = join(import.meta.dirname, '../../..');
const MAIN = join(ROOT, 'dist/cli/main.js');
const TOKEN = 'gp_test_token';

function newestMtime(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** What the fake admin API answers; tests change it before each run. */
interface FakeState {
  /** GETs of /models/m/versions/v2 that answer `loading` before it turns `ready`. */
  loadingPolls: number;
  /** GET /status calls that show healthy numbers before the error rate jumps (Infinity: never). */
  goodStatusCalls: number;
  statusCalls: number;
  v2Polls: number;
  notices: unknown[];
  unauthorized: number;
  /** Phases GET /models/llama/canary answers, one per call; the last one repeats. */
  canaryPhases: string[];
  canaryCalls: number;
}

const fresh = (): FakeState => ({
  loadingPolls: 0,
  goodStatusCalls: Infinity,
  statusCalls: 0,
  v2Polls: 0,
  notices: [],
  unauthorized: 0,
  canaryPhases: [],
  canaryCalls: 0,
});
const state: FakeState = fresh();
let server: Server;
let url = '';
let dir = '';

const window = (requests: number, errorRate: number, p99: number) => ({
  requests,
  errors: Math.round(requests * errorRate),
  error_rate: errorRate,
  latency_ms: { p50: p99 / 2, p90: p99, p99, mean: p99 / 2 },
  ttft_ms: { p50: 20, p90: 30, p99: 40, mean: 20 },
  tpot_ms: { p50: 5, p90: 6, p99: 7, mean: 5 },
});

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'POST' && path === '/notify') {
    state.notices.push(JSON.parse(body));
    send(res, 200, { ok: true });
    return;
  }
  if (req.headers.authorization !== `Bearer ${TOKEN}`) {
    state.unauthorized++;
    send(res, 401, { error: { message: 'invalid bearer token', type: 'authentication_error', code: 'unauthorized' } });
    return;
  }
  if (path === '/admin/v1/status') {
    state.statusCalls++;
    const bad = state.statusCalls > state.goodStatusCalls;
    send(res, 200, {
      ready: { ready: true, problems: [] },
      models: [
        {
          model: 'llama',
          active: 'v1',
          standby: null,
          route: { revision: 1, stable: 'v1', weights: { v1: 1 } },
          versions: [{ version: 'v1', status: 'active', window: bad ? window(1000, 0.05, 120) : window(1000, 0.0002, 120) }],
        },
      ],
    });
  } else if (path === '/admin/v1/models/llama/versions/v2') {
    state.v2Polls++;
    send(res, 200, { model: 'llama', version: 'v2', status: state.v2Polls > state.loadingPolls ? 'ready' : 'loading', health: { state: 'unknown' } });
  } else if (path === '/admin/v1/models/llama/versions/v1') {
    send(res, 200, { model: 'llama', version: 'v1', status: 'active', health: { state: 'healthy' } });
  } else if (path === '/admin/v1/models/llama/canary' && state.canaryPhases.length > 0) {
    const phase = state.canaryPhases[Math.min(state.canaryCalls++, state.canaryPhases.length - 1)] as string;
    send(res, 200, {
      canary: 'v2',
      stable: 'v1',
      phase,
      stages: [5, 50, 100],
      stage_index: 0,
      percent: 5,
      rollback: phase === 'rolled_back' ? { reason: 'error rate 4% vs 0.1%' } : null,
    });
  } else if (path === '/admin/v1/workers') {
    send(res, 200, [{ id: 'w1', model: 'llama', version: 'v1', routable: true }]);
  } else {
    send(res, 404, { error: { message: `no route ${path}`, type: 'not_found_error', code: 'not_found' } });
  }
}

beforeAll(async () => {
  const built = join(ROOT, 'dist/cli/pipeline/index.js');
  const stale =
    !existsSync(built) ||
    statSync(built).mtimeMs <
      Math.max(newestMtime(join(ROOT, 'src/rollout/pipeline')), newestMtime(join(ROOT, 'src/cli/pipeline')), newestMtime(join(ROOT, 'src/api')));
  if (stale) spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'ignore' });
  expect(existsSync(MAIN)).toBe(true);
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => handle(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'gp-pipeline-'));
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  Object.assign(state, fresh());
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[]): Promise<Ran> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd: dir,
    env: { ...process.env, GLIDEPATH_URL: url, GLIDEPATH_TOKEN: TOKEN, NO_COLOR: '1' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

let n = 0;
function file(yaml: string): string {
  const f = join(dir, `p${++n}.yaml`);
  writeFileSync(f, yaml);
  return f;
}

/** A command that prints its words: `$NODE -e ...` keeps the tests free of shell and PATH. */
const say = (text: string) => `$NODE -e "console.log('${text}')"`;
const NODE = ['--var', `NODE=${process.execPath}`];

const PIPELINE = (opts: { canaryRun?: string; monitor?: string } = {}) => `pipeline:
  name: test-deploy
  model: llama
  stages:
    - name: validate
      steps:
        - run: ${say('validating $VERSION')}
    - name: load_green
      steps:
        - run: ${say('deploying')}
        - wait_for: green_ready
          timeout: 5s
    - name: canary
      steps:
        - run: ${opts.canaryRun ?? say('canary started')}
          timeout: 10s
        - monitor: health_gates
${opts.monitor ?? '          for: 200ms\n          every: 20ms'}
        - on_failure: ${say('stage cleanup ran')}
    - name: promote
      steps:
        - run: ${say('promoted $VERSION')}
rollback:
  trigger: error_rate > 0.001 OR p99_latency > 500ms
  action: ${say('rollback action ran')}
  notify: pagerduty
`;

describe('glidepath pipeline run', () => {
  it('runs every stage in order and exits 0', async () => {
    state.loadingPolls = 2;
    const r = await cli(['pipeline', 'run', file(PIPELINE()), '--var', 'VERSION=v2', ...NODE, '--poll', '10ms']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = r.stdout;
    expect(out).toContain('==> stage 1/4: validate');
    expect(out).toContain('     [validate] validating v2');
    expect(out).toContain('     [promote] promoted v2');
    expect(out).toContain('v2 is ready');
    expect(out).toMatch(/health gates held for 200 ms \(\d+ checks; last: not fired\)/);
    expect(out).not.toContain('rollback action ran');
    expect(out).not.toContain('stage cleanup ran');
    expect(out.trimEnd().split('\n').at(-1)).toMatch(/^pipeline succeeded: 4 stage\(s\) in \d+ ms$/);
    // wait_for polled until ready (2 loading answers, then ready); monitor evaluated repeatedly
    expect(state.v2Polls).toBe(3);
    expect(state.statusCalls).toBeGreaterThanOrEqual(2);
    expect(state.unauthorized).toBe(0);
  });

  it('a failing run step runs its stage on_failure, skips later stages and exits 1', async () => {
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE({ canaryRun: '$NODE -e "process.exit(3)"' })),
      '--var',
      'VERSION=v2',
      ...NODE,
      '--poll',
      '10ms',
      '-o',
      'json',
    ]);
    expect(r.code).toBe(1);
    const res = JSON.parse(r.stdout) as PipelineRunView;
    expect(res).toMatchObject({ ok: false, outcome: 'failed', failed_stage: 'canary', model: 'llama' });
    expect(res.reason).toMatch(/^run .* -e 'process.exit\(3\)': exit 3 after \d+ ms$/);
    expect(res.stages.map((s) => s.status)).toEqual(['ok', 'ok', 'failed', 'not_run']);
    expect(res.stages[2]!.on_failure).toMatchObject([{ kind: 'on_failure', status: 'ok' }]);
    // in json mode the commands' output and the progress go to stderr
    expect(r.stderr).toContain('[canary] stage cleanup ran');
    expect(r.stderr).not.toContain('promoted');
    expect(res.rollback).toBeNull();
  });

  it('a run step past its timeout is killed and fails the stage', async () => {
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE({ canaryRun: '$NODE -e "setTimeout(() => {}, 60000)"\n          timeout: 300ms' }).replace('          timeout: 10s\n', '')),
      '--var',
      'VERSION=v2',
      ...NODE,
      '--poll',
      '10ms',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAILED: timed out after 300 ms and was killed/);
    expect(r.stdout).toContain('[canary] stage cleanup ran');
  });

  it('the trigger firing during monitor runs the rollback action, notifies and exits 1', async () => {
    state.goodStatusCalls = 3; // healthy for three checks, then the error rate jumps to 5%
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE({ monitor: '          for: 30s\n          every: 10ms' })),
      '--var',
      'VERSION=v2',
      ...NODE,
      '--poll',
      '10ms',
      '--notify-url',
      `${url}/notify`,
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAILED: trigger fired: error_rate > 0.001 (measured 0.05)');
    expect(r.stdout).toContain('==> rollback: error_rate > 0.001 OR p99_latency > 500ms fired: error_rate > 0.001 (measured 0.05)');
    expect(r.stdout).toContain('[canary] rollback action ran');
    // the rollback action replaces the stage's on_failure
    expect(r.stdout).not.toContain('stage cleanup ran');
    expect(r.stdout).not.toContain('promoted');
    expect(r.stdout).toContain(`notify pagerduty: sent to 1/1 webhook(s) (${url}/notify)`);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(
      /^pipeline rolled back in stage canary: rollback trigger fired: error_rate > 0\.001 \(measured 0\.05\)$/,
    );
    expect(state.statusCalls).toBe(4);
    expect(state.notices).toHaveLength(1);
    expect(state.notices[0]).toMatchObject({
      kind: 'pipeline_rolled_back',
      model: 'llama',
      version: 'v1',
      message: 'pipeline test-deploy rolled back in stage canary: fired: error_rate > 0.001 (measured 0.05)',
      data: {
        channel: 'pagerduty',
        pipeline: 'test-deploy',
        stage: 'canary',
        trigger: 'error_rate > 0.001 OR p99_latency > 500ms',
        versions: { active: 'v1', stable: 'v1' },
        action: { result: expect.stringMatching(/^ok: exit 0/) },
      },
    });
  });

  it('monitor until canary_succeeded watches the gates until the canary ends', async () => {
    state.canaryPhases = ['progressing', 'progressing', 'promoting', 'succeeded'];
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE({ monitor: '          until: canary_succeeded\n          every: 10ms' })),
      '--var',
      'VERSION=v2',
      ...NODE,
      '--poll',
      '10ms',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('-> monitor health_gates until canary_succeeded');
    expect(r.stdout).toMatch(/ok: canary of v2 succeeded; health gates held \(4 checks; last: not fired\)/);
    expect(state.canaryCalls).toBe(4);
  });

  it('monitor until canary_succeeded fails when the canary is rolled back, and on_failure runs', async () => {
    state.canaryPhases = ['progressing', 'rolled_back'];
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE({ monitor: '          until: canary_succeeded\n          every: 10ms' })),
      '--var',
      'VERSION=v2',
      ...NODE,
      '--poll',
      '10ms',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAILED: canary of v2 ended rolled_back: error rate 4% vs 0.1%');
    expect(r.stdout).toContain('[canary] stage cleanup ran');
    expect(r.stdout).not.toContain('rollback action ran');
  });

  it('wait_for gives up at its timeout with the last state it saw', async () => {
    state.loadingPolls = Infinity;
    const yaml = PIPELINE().replace('          timeout: 5s', '          timeout: 100ms');
    const r = await cli(['pipeline', 'run', file(yaml), '--var', 'VERSION=v2', ...NODE, '--poll', '10ms']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAILED: green_ready not reached within 100 ms (last: v2 is loading)');
    expect(r.stdout).not.toContain('[canary]');
  });

  it('a rejected token fails the API steps with the reason', async () => {
    const child = await new Promise<Ran>((resolve) => {
      const c = spawn(process.execPath, [MAIN, 'pipeline', 'run', file(PIPELINE()), '--var', 'VERSION=v2', ...NODE, '--poll', '10ms', '--token', 'wrong'], {
        cwd: dir,
        env: { ...process.env, GLIDEPATH_URL: url },
      });
      let stdout = '';
      c.stdout.setEncoding('utf8').on('data', (x: string) => (stdout += x));
      c.on('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(child.code).toBe(1);
    expect(child.stdout).toMatch(/FAILED: 3 admin API calls in a row failed: invalid bearer token/);
  });

  it('runs glidepath (and the dynamo alias) as this CLI', async () => {
    const inner = file(PIPELINE());
    const yaml = `pipeline:\n  stages:\n    - name: nested\n      steps:\n        - run: glidepath pipeline check ${inner}\n        - run: dynamo pipeline check ${inner}\n`;
    const r = await cli(['pipeline', 'run', file(yaml)]);
    expect(r.code).toBe(0);
    expect(r.stdout.match(/\[nested\] ok: 4 stage\(s\): validate, load_green, canary, promote/g)).toHaveLength(2);
  });
});

describe('glidepath pipeline run --dry-run and check', () => {
  it('prints what would happen and executes nothing', async () => {
    const marker = join(dir, 'executed');
    const yaml = PIPELINE({ canaryRun: `$NODE -e "require('fs').writeFileSync('${marker}', 'x')"` });
    const f = file(yaml);
    const r = await cli(['pipeline', 'run', f, '--dry-run', '--var', 'VERSION=v2', '--var', 'NODE=node']);
    expect(r.code).toBe(0);
    expect(existsSync(marker)).toBe(false);
    expect(state.statusCalls + state.v2Polls).toBe(0);
    expect(r.stdout).toBe(
      [
        `pipeline test-deploy (${f}): 4 stage(s), timeout 2h, model llama`,
        '  variable NODE = "node"  (lines 7, 10, 15, 20, 23, 26)',
        '  variable VERSION = "v2"  (lines 7, 23)',
        'rollback trigger: error_rate > 0.001 OR p99_latency > 500ms',
        "  when it fires during a monitor step: run node -e 'console.log('\\''rollback action ran'\\'')'; notify pagerduty (not sent: no webhook); the pipeline stops with exit 1",
        'stage 1/4: validate',
        "  1. run node -e 'console.log('\\''validating v2'\\'')'  (timeout 30m)  [line 7]",
        'stage 2/4: load_green',
        "  1. run node -e 'console.log('\\''deploying'\\'')'  (timeout 30m)  [line 10]",
        '  2. wait_for green_ready  (timeout 5s)  [line 11]',
        'stage 3/4: canary',
        `  1. run node -e 'require('\\''fs'\\'').writeFileSync('\\''${marker}'\\'', '\\''x'\\'')'  (timeout 10s)  [line 15]`,
        '  2. monitor health_gates for 200ms, every 20ms: roll back when error_rate > 0.001 OR p99_latency > 500ms  [line 17]',
        "  on failure: run node -e 'console.log('\\''stage cleanup ran'\\'')'  (timeout 30m)",
        'stage 4/4: promote',
        "  1. run node -e 'console.log('\\''promoted v2'\\'')'  (timeout 30m)  [line 23]",
        'dry run: nothing was executed',
        '',
      ].join('\n'),
    );
  });

  it('dry run as JSON names the spawned argv', async () => {
    const yaml = `pipeline:\n  stages:\n    - name: s\n      steps:\n        - run: dynamo swap --confirm\n`;
    const r = await cli(['pipeline', 'run', file(yaml), '--dry-run', '-o', 'json']);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout);
    expect(plan.stages[0].steps[0]).toEqual({
      kind: 'run',
      command: 'dynamo swap --confirm',
      argv: ['dynamo', 'swap', '--confirm'],
      exec: [process.execPath, MAIN, 'swap', '--confirm'],
      timeout: '30m',
      line: 5,
    });
  });

  it('dry run shows where rollback.notify would go: --notify-url and the webhooks of --config', async () => {
    const cfg = join(dir, 'glidepath.yaml');
    writeFileSync(
      cfg,
      'notifications:\n  webhooks: ["https://hooks.example.com/x?token=secret"]\nmodels:\n  - name: llama\n    versions:\n      - id: v1\n        provider: { kind: sim }\n',
    );
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE()),
      '--dry-run',
      '-o',
      'json',
      '--var',
      'VERSION=v2',
      ...NODE,
      '--notify-url',
      'http://127.0.0.1:9/hook',
      '-c',
      cfg,
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).rollback.notify).toEqual({ channel: 'pagerduty', webhooks: ['http://127.0.0.1:9/hook', 'https://hooks.example.com/x'] });
    const bad = await cli(['pipeline', 'run', file(PIPELINE()), '--dry-run', '--var', 'VERSION=v2', ...NODE, '-c', join(dir, 'missing.yaml')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^--config: .*missing\.yaml: 1 problem\(s\)\n {2}file not found\n$/);
  });

  it('an invalid file exits 2 with every problem and its line, running nothing', async () => {
    const r = await cli([
      'pipeline',
      'run',
      file(PIPELINE().replace('- wait_for: green_ready', '- wait_fr: green_ready').replace('> 500ms', '> 500 mss')),
      ...NODE,
    ]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('4 problem(s)');
    expect(r.stderr).toContain('line 7: pipeline.stages[0].steps[0].run: variable $VERSION is not set (pass --var VERSION=… or set it in the environment)');
    expect(r.stderr).toContain('line 11: pipeline.stages[1].steps[1]: unknown step kind "wait_fr"; expected run, wait_for, monitor or on_failure');
    expect(r.stderr).toContain('line 23: pipeline.stages[3].steps[0].run: variable $VERSION is not set');
    expect(r.stderr).toContain('line 25: rollback.trigger: column 41: unknown unit "mss" after 500; units for p99_latency: ms or s (no unit means ms)');
    expect(state.statusCalls).toBe(0);
  });

  it('usage errors exit 2', async () => {
    expect((await cli(['pipeline', 'run', file(PIPELINE()), '--var', 'no-equals'])).code).toBe(2);
    expect((await cli(['pipeline', 'run', file(PIPELINE()), '--poll', 'fast'])).code).toBe(2);
    expect((await cli(['pipeline', 'run'])).code).toBe(2);
  });

  // regression: past 2^31 - 1 ms Node's timers fire after 1 ms, so `--timeout 600h` timed the run out at once;
  // `0.4ms` rounded to 0 and did the same
  it('a duration no timer can keep exits 2 naming the flag or the key, running nothing', async () => {
    const flag = await cli(['pipeline', 'run', file(PIPELINE()), ...NODE, '--var', 'VERSION=v2', '--timeout', '600h']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('error: --timeout: expected a duration of at most 2147483647 ms (~24.8 days, the longest a timer waits), got "600h"');
    const poll = await cli(['pipeline', 'run', file(PIPELINE()), ...NODE, '--var', 'VERSION=v2', '--poll', '0.4ms']);
    expect(poll.code).toBe(2);
    expect(poll.stderr).toContain('error: --poll: expected a duration of at least 1ms, got "0.4ms"');
    const keys = await cli([
      'pipeline',
      'check',
      file(
        PIPELINE({ monitor: '          for: 900h\n          every: 0.4ms' })
          .replace('timeout: 5s', 'timeout: 600h')
          .replace('name: test-deploy', 'name: test-deploy\n  timeout: 700h'),
      ),
    ]);
    expect(keys.code).toBe(2);
    expect(keys.stderr).toContain('4 problem(s)');
    expect(keys.stderr).toContain('pipeline.timeout: 700h is longer than a timer can wait: at most 2147483647 ms (~24.8 days)');
    expect(keys.stderr).toMatch(/line \d+: pipeline\.stages\[1\]\.steps\[1\]\.timeout: 600h is longer than a timer can wait/);
    expect(keys.stderr).toMatch(/line \d+: pipeline\.stages\[2\]\.steps\[1\]\.for: 900h is longer than a timer can wait/);
    expect(keys.stderr).toMatch(/line \d+: pipeline\.stages\[2\]\.steps\[1\]\.every: a duration under 1ms rounds to 0: give at least 1ms/);
    expect(state.statusCalls).toBe(0);
  });

  it('check passes examples/deployment.yaml and lists the variables to give', async () => {
    const r = await cli(['pipeline', 'check', join(ROOT, 'examples/deployment.yaml')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^ok: 3 stage\(s\): validate, canary, promote\nvariables to give with --var NAME=value \(or the environment\) when running: MODEL \(lines [\d, ]+\), VERSION \(lines [\d, ]+\)\n$/,
    );
    const bad = await cli(['pipeline', 'check', file('pipeline:\n  stages:\n    - name: a\n      steps:\n        - runn: x\n'), '-o', 'json']);
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout)).toMatchObject({
      ok: false,
      issues: [{ path: 'pipeline.stages[0].steps[0]', line: 5, message: 'unknown step kind "runn"; expected run, wait_for, monitor or on_failure' }],
    });
  });
});
