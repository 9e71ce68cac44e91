// End-to-end stop-start (docs/rolling.md): a real `glidepath up` on one GPU — no room for a second
// copy — serving v1 under continuous streaming load; stop-start to v2 (its load takes a while):
// requests arriving in the gap wait in the hold queue, none fails, the downtime is measured and
// printed, and every answer after comes from v2. Then a v3 that cannot start: v2 is loaded again.
import { describe, expect, it } from 'vitest';
import { loadFor, streamChat } from '../helpers/e2e-up.js';
import { upForFile } from '../helpers/e2e-file.js';
import { gp } from '../integration/cli/helpers.js';

const MODEL = 'chat';
const LOAD_MS = 400;

function yaml(dataDir: string): string {
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 1, memory_gb: 80 }',
    'models:',
    `  - name: ${MODEL}`,
    '    versions:',
    '      - id: v1',
    '        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 5, jitter: 0 } }',
    '      - id: v2',
    `        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 5, jitter: 0, load_time_ms: ${LOAD_MS} } }`,
    '      - id: v3',
    // a command that exits at once: the version can never come up
    '        provider: { kind: process, command: "false", health_path: /health, grace_period_ms: 200 }',
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

const file = upForFile('stop-start', yaml);

const load = (clients: number, stop: Promise<unknown>) => loadFor(() => file.current(), MODEL, clients, stop);

describe('stop-start', () => {
  it('one GPU, v1 → v2 under load: requests in the gap wait in the hold queue, none fails; the downtime is measured', async () => {
    const up = file.current();
    let done!: (x: unknown) => void;
    const finished = new Promise((r) => (done = r));
    const traffic = load(8, finished);
    // some traffic on v1 first
    await new Promise((r) => setTimeout(r, 300));
    const r = await up.ok<{ from: string; to: string; downtime_ms: number; load_ms: number; freed_gpus: number }>('POST', `/models/${MODEL}/stop-start`, {
      to: 'v2',
    });
    await new Promise((res) => setTimeout(res, 300));
    done(undefined);
    const got = await traffic;
    expect(r).toMatchObject({ from: 'v1', to: 'v2', freed_gpus: 1 });
    expect(r.load_ms).toBeGreaterThanOrEqual(LOAD_MS);
    expect(r.downtime_ms).toBeGreaterThanOrEqual(r.load_ms);
    expect(got.filter((s) => !s.ok).map((s) => s.error)).toEqual([]);
    const versions = got.map((s) => s.version);
    expect(versions).toContain('v1');
    expect(versions).toContain('v2');
    // once v2 answered, v1 never again
    expect(versions.slice(versions.indexOf('v2')).every((v) => v === 'v2')).toBe(true);
    const held = got.filter((s) => s.headersAt - s.startedAt > LOAD_MS / 2);
    expect(held.length).toBeGreaterThan(0);
    console.log(
      `stop-start e2e: downtime ${Math.round(r.downtime_ms)} ms (load ${Math.round(r.load_ms)} ms); ${got.length} streams, 0 failed; ${held.length} waited in the hold queue (longest ${Math.round(Math.max(...held.map((s) => s.headersAt - s.startedAt)))} ms)`,
    );
    const status = await up.ok<{ models: { active: string | null }[] }>('GET', '/status');
    expect(status.models[0]?.active).toBe('v2');
  }, 60_000);

  it('a version that cannot come up: the old one is loaded again and serves; the answer says so', async () => {
    const up = file.current();
    const res = await up.admin<{ error: { code: string; message: string } }>('POST', `/models/${MODEL}/stop-start`, { to: 'v3' });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('stop_start_failed');
    expect(res.body.error.message).toMatch(/^stop-start of chat to v3 failed \(.+\); v2 was loaded again and serves as before$/);
    const after = await streamChat(up.dataUrl, { model: MODEL, prompt: 'still there?', maxTokens: 4 });
    expect(after).toMatchObject({ ok: true, version: 'v2' });
  }, 60_000);

  it("from the CLI: progress on stderr, the downtime in the result line (against glidepath plan's estimate); bad flags are usage errors", async () => {
    const up = file.current();
    const env = { GLIDEPATH_URL: up.adminUrl, GLIDEPATH_TOKEN: up.token };
    const plan = await up.ok<{ rows: { strategy: string; downtime_ms: number }[] }>('GET', `/models/${MODEL}/plan?to=v1`);
    const planned = plan.rows.find((row) => row.strategy === 'stop-start')?.downtime_ms ?? NaN;
    const r = await gp(['rollout', 'stop-start', '--to', 'v1', '-o', 'json'], env);
    expect(r.code).toBe(0);
    const measured = (r.json as { downtime_ms: number }).downtime_ms;
    // v1's load was measured when `up` started it: the plan's estimate is that load, the stop-start adds its drain and unload
    console.log(`stop-start e2e: glidepath plan estimated ${Math.round(planned)} ms of downtime for v2 → v1; measured ${Math.round(measured)} ms`);
    expect(measured).toBeGreaterThan(planned * 0.5);
    expect(measured).toBeLessThan(planned * 2 + 500);
    const human = await gp(['rollout', 'stop-start', '--to', 'v2'], env);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(
      /^Stop-start chat: v1 → v2 with [\d.]+ m?s of downtime \(new requests held; v2 loaded in [\d.]+ m?s on 1 freed GPU\(s\); \d+ drained, 0 aborted\)\n$/,
    );
    expect(human.stderr).toMatch(/new requests held; draining v1/);
    const bad = await gp(['rollout', 'stop-start', '--to', 'v2', '--drain-timeout', 'soon'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--drain-timeout must be a positive integer, got "soon"/);
  }, 60_000);
});
