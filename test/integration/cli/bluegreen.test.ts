// Every admin verb through the real CLI binary against one `glidepath up` that uses its generated
// admin token (no auth section in the config): the blue-green path, refusals and their exit codes.
/* eslint-disable @typescript-eslint/no-unsafe-call -- the CLI's JSON output is checked field by field */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gp, gpTty, itWithTty, startUp } from './helpers.js';
import type { Run, Up } from './helpers.js';

const CONFIG = `
gpus: { count: 4, memory_gb: 80 }
models:
  - name: chat
    versions:
      - id: v1
        base_model: llama-3-8b
        weight_hash: sha256:1111
        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 0 } }
      - id: v2
        base_model: llama-3-8b
        weight_hash: sha256:2222
        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 0 } }
    route:
      weights: { v1: 1 }
    degradation: { required_tokens_per_s: 100, measure_interval_ms: 100 }
`;

let up: Up;
let env: Record<string, string>;
let weightsFile: string;
let weightsHash: string;
const cli = (...args: string[]): Promise<Run> => gp(args, env);
/** State checks go straight to the API (the CLI's own JSON output is checked elsewhere). */
async function apiStatus(): Promise<{ models: { active: string | null; standby: string | null }[] }> {
  const token = readFileSync(join(up.dataDir, 'admin-token'), 'utf8').trim();
  const r = await fetch(`${up.adminUrl}/admin/v1/status`, { headers: { authorization: `Bearer ${token}` } });
  return (await r.json()) as { models: { active: string | null; standby: string | null }[] };
}

beforeAll(async () => {
  up = await startUp(CONFIG);
  // the generated token is found through the data directory, as an operator on the host would
  env = { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_DATA_DIR: up.dataDir };
  // real weights for the version registered later, so `cache download` has something to copy and verify
  const bytes = Buffer.alloc(4096, 7);
  weightsFile = join(up.dir, 'weights-v3.bin');
  writeFileSync(weightsFile, bytes);
  weightsHash = createHash('sha256').update(bytes).digest('hex');
});

afterAll(async () => {
  expect(await up.stop()).toBe(0);
});

describe('glidepath admin verbs (generated admin token)', () => {
  it('status: the model, its active version, route and GPUs; json too', async () => {
    const r = await cli('status');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/GPUs: 3 free of 4/);
    expect(r.stdout).toMatch(/^MODEL\s+PRIORITY\s+ACTIVE\s+STANDBY\s+ROUTE\s+REVISION$/m);
    expect(r.stdout).toMatch(/^chat\s+standard\s+v1\s+-\s+v1 100%/m);
    const j = await cli('status', '--output', 'json');
    expect(j.code).toBe(0);
    expect(j.json.models[0]).toMatchObject({ model: 'chat', active: 'v1', standby: null });
    // --url wins over GLIDEPATH_URL, and a pasted API prefix is tolerated
    const url = await gp(['status', '-o', 'json', '--url', `${up.adminUrl}/admin/v1/`], {
      GLIDEPATH_URL: 'http://127.0.0.1:9',
      GLIDEPATH_DATA_DIR: up.dataDir,
    });
    expect(url.code).toBe(0);
    expect(url.json.models[0].model).toBe('chat');
  });

  it('version list: seed 000 columns; the only model is the default', async () => {
    const r = await cli('version', 'list');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^VERSION\s+STATUS\s+LOADED_AT\s+GPU_ASSIGNMENT\s+WEIGHT\s+LOAD_TIME\s+ROLLBACK$/);
    expect(lines[1]).toMatch(/^v1\s+active\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+GPU 0\s+100%\s+[\d.]+ ms/);
    expect(lines[2]).toMatch(/^v2\s+registered\s+-\s+-\s+-\s+-\s+-$/);
    const j = await cli('version', 'list', '-o', 'json', '--model', 'chat');
    expect(j.json.map((v: { version: string; status: string }) => [v.version, v.status])).toEqual([
      ['v1', 'active'],
      ['v2', 'registered'],
    ]);
  });

  it('version show: metadata and KV-cache compatibility with the active version', async () => {
    const r = await cli('version', 'show', 'v2');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^chat\/v2$/m);
    expect(r.stdout).toMatch(/status\s+registered/);
    expect(r.stdout).toMatch(/weights\s+sim:\/\/weights \(sha256:2222\)/);
    expect(r.stdout).toMatch(/KV-cache\s+compatible with v1 \(active\)/);
    const a = await cli('version', 'show', 'v1');
    expect(a.stdout).toMatch(/KV-cache\s+- \(this is the active version\)/);
    const j = await cli('version', 'show', 'v2', '-o', 'json');
    expect(j.json.kv_cache_compatibility).toEqual({ with: 'v1', compatible: true, mismatches: [] });
    const missing = await cli('version', 'show', 'v9');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no version v9 of model chat \(known: v1, v2\) \(version_not_found\)/);
  });

  it('swap with no ready green is refused (exit 1) and says to deploy first', async () => {
    const r = await cli('swap', '--confirm');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/model chat has no ready version to swap in; run `glidepath deploy green --version V` first \(no_green\)/);
  });

  it('rollback with no standby is refused (exit 1)', async () => {
    const r = await cli('rollback', '--instant');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/model chat has no rollback-eligible standby version \(no_standby\)/);
  });

  it('deploy green: shows loading progress, then the ready version', async () => {
    const r = await cli('deploy', 'green', '--version', 'v2');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/\[\d+\.\ds\] chat\/v2\/0: simulator pid \d+ on http:\/\/127\.0\.0\.1:\d+, loading weights/);
    expect(r.stderr).toMatch(/\[\d+\.\ds\] chat\/v2\/0: warming up/);
    expect(r.stdout).toMatch(/^Green ready: chat\/v2 loaded in [\d.]+ m?s on GPU 1 \(not serving yet/);
    const again = await cli('deploy', 'green', '--version', 'v2', '-o', 'json');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/version chat\/v2 is already loaded \(ready\) \(already_loaded\)/);
    const list = await cli('version', 'list');
    expect(list.stdout).toMatch(/^v2\s+ready\s+\S+ \S+\s+GPU 1\s+0%/m);
  });

  it('swap without --confirm off a terminal is bad usage (exit 2) and changes nothing', async () => {
    const r = await cli('swap');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/pass --confirm to run it without a terminal \(nothing changed\)/);
    const st = await apiStatus();
    expect(st.models[0]!.active).toBe('v1');
  });

  itWithTty('swap on a terminal asks first; anything but yes changes nothing (exit 1)', async () => {
    const r = await gpTty(['swap'], env, 'n\n');
    expect(r.stdout).toContain('Swap chat: v1 → v2 (overlap)? [y/N]');
    expect(r.stdout).toContain('error: swap not confirmed; nothing changed');
    expect(r.code).toBe(1);
    const st = await apiStatus();
    expect(st.models[0]!.active).toBe('v1');
  });

  it('swap --confirm: green becomes active, blue the standby', async () => {
    const r = await cli('swap', '--confirm');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Swapped chat: v1 → v2 \(overlap\); route switch [\d.]+ ms, total [\d.]+ ms$/m);
    expect(r.stdout).toMatch(/v1 is now the standby \(warm\)/);
    const st = await apiStatus();
    expect(st.models[0]).toMatchObject({ active: 'v2', standby: 'v1' });
    const list = await cli('version', 'list');
    expect(list.stdout).toMatch(/^v1\s+standby\s+.*GPU 0\s+0%\s+\S+ m?s\s+eligible$/m);
  });

  it('retire refuses the active version and the standby without --force (exit 1)', async () => {
    const active = await cli('version', 'retire', 'v2');
    expect(active.code).toBe(1);
    expect(active.stderr).toMatch(/version chat\/v2 is active; swap or roll back to another version first \(retire_active\)/);
    const standby = await cli('version', 'retire', 'v1');
    expect(standby.code).toBe(1);
    expect(standby.stderr).toMatch(/version chat\/v1 is the standby \(rollback target\); pass --force to retire it anyway \(retire_standby\)/);
  });

  it('rollback --instant: back to the standby in one route switch (seed 000 wording)', async () => {
    const r = await cli('rollback', '--instant', '--reason', 'bad outputs');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Rolled back to v1 in \d+(\.\d+)? ms$/m);
    expect(r.stdout).toMatch(/^Traffic now serving from GPU 0; v2 is standby, blocked as a rollback target$/m);
    const st = await apiStatus();
    expect(st.models[0]).toMatchObject({ active: 'v1', standby: null });
    // the rolled-back version is not a rollback target
    const again = await cli('rollback', '--instant', '-o', 'json');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/standby but not eligible: v2 — rolled back to v1/);
  });

  it('version register: from a file and from flags; duplicates and bad fields refused', async () => {
    const file = join(up.dir, 'v3.yaml');
    writeFileSync(
      file,
      `id: v3\nbase_model: llama-3-8b\nweights: ${weightsFile}\nweight_hash: sha256:${weightsHash}\narchitecture: { layers: 40 }\nprovider: { kind: sim, sim: { seed: 3, inter_token_ms: 0 } }\n`,
    );
    const r = await cli('version', 'register', '--file', file);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Registered chat\/v3 \(card [0-9a-f]{16}\); load it with `glidepath deploy green --version v3`$/m);
    const show = await cli('version', 'show', 'v3');
    expect(show.stdout).toMatch(/status\s+registered/);
    expect(show.stdout).toMatch(/architecture\s+40 layers/);
    expect(show.stdout).toMatch(/KV-cache\s+INCOMPATIBLE with v1 \(active\): layers: 32 vs 40/);
    const dup = await cli('version', 'register', '--file', file);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/version chat\/v3 is already registered \(version_exists\)/);
    const flags = await cli('version', 'register', '--id', 'v4', '--weight-hash', 'sha256:4444', '--quantization', 'fp8', '-o', 'json');
    expect(flags.code).toBe(0);
    expect(flags.json).toMatchObject({ version: 'v4', status: 'registered', quantization: 'fp8', weight_hash: 'sha256:4444' });
    const bad = await cli('version', 'register', '--id', 'v5', '--file', file.replace('v3', 'nope'));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--file: cannot read/);
    writeFileSync(file, 'id: v6\ntp: 9\nwarmup: { requests: -1 }\n');
    const invalid = await cli('version', 'register', '--file', file);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/warmup\.requests: expected a non-negative integer, got -1 \(invalid_body\)/);
    writeFileSync(file, 'id: v6\ntp: 9\n');
    const tooBig = await cli('version', 'register', '--file', file);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toMatch(/tp: 9 needs more GPUs than the 4 in the inventory \(invalid_body\)/);
  });

  it('cache download: copies and verifies the weights; a version without real weights is refused', async () => {
    const r = await cli('cache', 'download', '--version', 'v3');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Cached chat\/v3: 4\.0 KiB from \S+weights-v3\.bin in [\d.]+ m?s → \S+$/m);
    expect(r.stdout).toContain(`Weight hash verified: sha256:${weightsHash}`);
    const again = await cli('cache', 'download', '--version', 'v3', '-o', 'json');
    expect(again.code).toBe(0);
    expect(again.json).toMatchObject({ model: 'chat', version: 'v3', already_cached: true, verified: true, bytes: 4096, duration_ms: expect.any(Number) });
    const sim = await cli('cache', 'download', '--version', 'v4');
    expect(sim.code).toBe(1);
    // simulated weights (with a placeholder hash): nothing to copy, said before the hash is looked at
    expect(sim.stderr).toMatch(/weights "sim:\/\/[^"]*" are simulated: there is nothing to download \(unsupported_weights_uri\)/);
  });

  it('plan --to: the strategy table for this cluster with a recommendation', async () => {
    const r = await cli('plan', '--to', 'v3');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^v1 → v3: \d+ of 4 GPU\(s\) free/m);
    expect(r.stdout).toMatch(/^STRATEGY\s+EXTRA GPUS\s+OVERHEAD\s+DOWNTIME\s+MAX CAPACITY DROP\s+ROLLBACK\s+TOTAL DEPLOY\s+FEASIBLE$/m);
    expect(r.stdout).toMatch(/^Blue-green\s+1 \(100%\)/m);
    expect(r.stdout).toMatch(/^recommended: /m);
    const j = await cli('plan', '--to', 'v3', '-o', 'json');
    expect(j.json.rows.map((x: { strategy: string }) => x.strategy)).toContain('blue-green');
    expect(j.json.current.id).toBe('v1');
    expect(j.json.rows.find((x: { strategy: string }) => x.strategy === 'blue-green')).toMatchObject({ extra_gpus: 1, extra_gpus_pct: 100, feasible: true });
    const active = await cli('plan', '--to', 'v1');
    expect(active.code).toBe(1);
    expect(active.stderr).toMatch(/version chat\/v1 is already active \(already_active\)/);
  });

  it('workers: every worker with version, role, health, breaker, weight, state and GPUs', async () => {
    const r = await cli('workers');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^WORKER\s+VERSION\s+ROLE\s+HEALTH\s+BREAKER\s+WEIGHT\s+STATE\s+GPUS\s+ENDPOINT\s+PID\s+IN_FLIGHT\s+LAST_FAILURE$/m);
    expect(r.stdout).toMatch(/^chat\/v1\/0\s+v1\s+serving\s+HEALTHY\s+closed\s+1\s+ready\s+GPU 0\s+http:\/\/127\.0\.0\.1:\d+\s+\d+\s+0\s+-$/m);
    expect(r.stdout).toMatch(/^chat\/v2\/0\s+v2\s+serving\s+HEALTHY\s+closed\s+1\s+ready\s+GPU 1\s+/m);
    const j = await cli('workers', '-o', 'json', '--model', 'chat');
    expect(j.json.map((w: { id: string }) => w.id).sort()).toEqual(['chat/v1/0', 'chat/v2/0']);
  });

  it("capacity: the level, what the model must serve, and each routed worker's measured engine load and request slots", async () => {
    // the engines' metrics are read every 100 ms: the first read is soon there
    let j = await cli('capacity', '-o', 'json');
    // two reads make a rate
    for (const until = Date.now() + 5_000; j.json.workers[0]?.tokens_per_s === null && Date.now() < until;) j = await cli('capacity', '-o', 'json');
    expect(j.json).toMatchObject({ model: 'chat', level: 0, ratio: 1, required_tokens_per_s: 100, capacity_tokens_per_s: 100 });
    expect(j.json.workers).toEqual([
      {
        version: 'v1',
        worker: 'chat/v1/0',
        weight: 1,
        capacity_tokens_per_s: 100,
        measured: true,
        tokens_per_s: expect.any(Number) as unknown,
        running: 0,
        waiting: 0,
        kv_usage: 0,
        saturated: false,
        measured_at: expect.any(Number) as unknown,
        error: null,
        slots: { limit: 128, shared: 128, busy: 0, queued: 0 },
      },
    ]);
    const r = await cli('capacity');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^chat: degradation level 0, capacity 100 of 100 tokens\/s required \(ratio 1\.00\)$/m);
    expect(r.stdout).toMatch(/^chat\/v1\/0\s+v1\s+1\s+100\s+yes\s+\S+\s+0\s+0\s+0%\s+no\s+128\s+0\s+0\s+-$/m);
  });

  it('version retire: a never-loaded version frees nothing; the standby goes with --force', async () => {
    const r = await cli('version', 'retire', 'v3');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('Retired v3, freed 0 GPUs (was not loaded)\n');
    const forced = await cli('version', 'retire', 'v2', '--force');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toBe('Retired v2, freed 1 GPU (GPU 1)\n');
    const j = await cli('version', 'retire', 'v4', '-o', 'json');
    expect(j.json).toMatchObject({ model: 'chat', version: 'v4', freed_gpus: 0 });
    const gone = await cli('version', 'retire', 'v4');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/already retired \(already_retired\)/);
  });

  it('audit: every change with its result, filtered by action, result, actor, target, time and limit', async () => {
    const all = await cli('audit', '-o', 'json');
    expect(all.code).toBe(0);
    const actions = (all.json as { action: string; result: string; error_code: string | null }[]).map(
      (e) => `${e.action}:${e.result}${e.error_code ? `:${e.error_code}` : ''}`,
    );
    // newest first; refusals are audited with their code
    expect(actions.reverse()).toEqual([
      'swap:error:no_green',
      'rollback:error:no_standby',
      'deploy_green:ok',
      'deploy_green:error:already_loaded',
      'swap:ok',
      'retire:error:retire_active',
      'retire:error:retire_standby',
      'rollback:ok',
      'rollback:error:no_standby',
      'register_version:ok',
      'register_version:error:version_exists',
      'register_version:ok',
      'cache_download:ok',
      'cache_download:ok',
      'cache_download:error:unsupported_weights_uri',
      'retire:ok',
      'retire:ok',
      'retire:ok',
      'retire:error:already_retired',
    ]);
    const table = await cli('audit', '--action', 'swap');
    expect(table.code).toBe(0);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^AT\s+ACTOR\s+ACTION\s+TARGET\s+RESULT\s+DURATION\s+PARAMS$/);
    expect(rows.slice(1)).toHaveLength(2);
    expect(rows[1]).toMatch(/admin\s+swap\s+chat\s+ok\s+[\d.]+ m?s\s+mode=overlap standby=warm$/);
    expect(rows[2]).toMatch(/admin\s+swap\s+chat\s+error \(no_green\)/);
    const errors = await cli('audit', '--result', 'error', '--target', 'chat/v1', '-o', 'json');
    expect(errors.json.map((e: { error_code: string }) => e.error_code)).toEqual(['retire_standby']);
    const byActor = await cli('audit', '--actor', 'admin', '--since', '1h', '--limit', '3', '-o', 'json');
    expect(byActor.json).toHaveLength(3);
    const nobody = await cli('audit', '--actor', 'someone-else');
    expect(nobody.code).toBe(0);
    expect(nobody.stdout).toBe('no audit entries match\n');
    const past = await cli('audit', '--until', '2001-01-01T00:00:00Z', '-o', 'json');
    expect(past.json).toEqual([]);
  });

  it('bad usage exits 2 with a message naming the problem', async () => {
    const cases: [string[], RegExp][] = [
      [['status', '--bogus'], /unknown option '--bogus'/],
      [['version', 'list', '--output', 'yaml'], /--output must be "table" or "json", got "yaml"/],
      [['swap', '--confirm', '--mode', 'sideways'], /--mode must be one of overlap, drain-first, got "sideways"/],
      [['swap', '--confirm', '--drain-timeout', '5000'], /--drain-timeout only applies to --mode drain-first/],
      [['swap', '--confirm', '--mode', 'drain-first', '--drain-timeout', 'soon'], /--drain-timeout must be a positive integer, got "soon"/],
      [['deploy', 'green'], /required option '--version <version>' not specified/],
      [['version', 'show'], /missing required argument 'version'/],
      [['version', 'register'], /needs a version id: pass --id V/],
      [['audit', '--limit', '0'], /--limit must be a positive integer, got "0"/],
      [['audit', '--since', 'last tuesday'], /--since must be epoch ms, an ISO date/],
      [['audit', '--result', 'maybe'], /--result must be one of ok, error/],
      [['status', '--url', 'ftp://x'], /--url: expected an http\(s\) URL/],
      [['version', 'frobnicate'], /unknown command 'frobnicate'/],
      [['cache', 'download'], /required option '--version <version>' not specified/],
      [['plan'], /required option '--to <version>' not specified/],
    ];
    const runs = await Promise.all(cases.map(([args]) => cli(...args)));
    runs.forEach((r, i) => {
      const [args, re] = cases[i]!;
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(re);
    });
  });

  it('a wrong token is 401 (exit 1) with a hint; an unreachable API says to start glidepath up', async () => {
    const wrong = await gp(['status'], { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_TOKEN: 'gp_not-the-token' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/invalid bearer token — the token in GLIDEPATH_TOKEN was rejected \(unauthorized\)/);
    const none = await gp(['status'], { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_DATA_DIR: join(up.dir, 'empty') });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/missing Authorization header.*no token found: set GLIDEPATH_TOKEN, pass --token/);
    const flag = await gp(['status', '--token', 'nope', '--url', up.adminUrl]);
    expect(flag.stderr).toMatch(/the token given with --token was rejected \(unauthorized\)/);
    const down = await gp(['status', '--url', 'http://127.0.0.1:9'], { GLIDEPATH_DATA_DIR: up.dataDir });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      /cannot reach the admin API at http:\/\/127\.0\.0\.1:9 \(connection refused\): is `glidepath up` running at http:\/\/127\.0\.0\.1:9\?/,
    );
  });
});
