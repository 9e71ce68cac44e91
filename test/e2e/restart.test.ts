// End-to-end crash safety: kill `glidepath up` (SIGKILL) between blue-green steps and start it again
// on the same data directory. Versions, routes (revision and weights), the active and standby
// versions and the audit log must be exactly as before; the surviving workers are adopted (same
// pids) and requests are served by the right version. A SIGTERM restart stops the workers and the
// next start brings them back (new pids) with the same state.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI,
  ROOT,
  cleanupAll,
  ensureBuilt,
  removeDir,
  simConfigYaml,
  simPids,
  startUp,
  streamChat,
  tempDir,
  trackWorkerPids,
  waitForEvent,
  writeConfig,
} from '../helpers/e2e-up.js';
import type { RouteView, UpProcess, VersionView, WorkerView } from '../helpers/e2e-up.js';
import { pidAlive } from '../../src/providers/child.js';

const MODEL = 'chat';
const PROMPT = 'After the restart, tell me what the harbour looked like.';
const MAX_TOKENS = 12;

interface AuditView {
  id: number;
  at: number;
  actor: string;
  action: string;
  target?: string;
  result: 'ok' | 'error';
}

interface StatusView {
  models: { model: string; active: string | null; standby: string | null; route: { revision: number; stable: string; weights: Record<string, number> } }[];
}

interface Snapshot {
  versions: VersionView[];
  route: Omit<RouteView, 'shares'>;
  active: string | null;
  standby: string | null;
  audit: AuditView[];
  workers: WorkerView[];
}

async function snapshot(u: UpProcess): Promise<Snapshot> {
  const versions = (await u.ok<VersionView[]>('GET', `/models/${MODEL}/versions`)).sort((a, b) => (a.version < b.version ? -1 : 1));
  const { shares: _shares, ...route } = await u.ok<RouteView & { shares: unknown }>('GET', `/models/${MODEL}/route`);
  const status = await u.ok<StatusView>('GET', '/status');
  const m = status.models.find((x) => x.model === MODEL)!;
  const audit = await u.ok<AuditView[]>('GET', '/audit?limit=10000');
  const workers = (await u.ok<WorkerView[]>('GET', '/workers')).sort((a, b) => (a.id < b.id ? -1 : 1));
  trackWorkerPids(workers.map((w) => w.pid));
  return { versions, route, active: m.active, standby: m.standby, audit, workers };
}

/** Fields of a version that must survive any restart. */
const lifecycle = (v: VersionView) => ({
  version: v.version,
  status: v.status,
  rollback_eligible: v.rollback_eligible,
  rollback_blocked_reason: v.rollback_blocked_reason,
});

/** The audit log of `before` is still there, entry for entry, in the log of `after`. */
function expectAuditKept(before: AuditView[], after: AuditView[]): void {
  const maxId = Math.max(0, ...before.map((e) => e.id));
  expect(after.filter((e) => e.id <= maxId)).toEqual(before);
}

/** One request through the gateway; its header and text must both be `version`'s. */
async function expectServedBy(u: UpProcess, version: string, expectedText: Map<string, string>, headers?: Record<string, string>): Promise<void> {
  const r = await streamChat(u.dataUrl, { model: MODEL, prompt: PROMPT, maxTokens: MAX_TOKENS, headers });
  expect(r.error).toBeUndefined();
  expect(r.version).toBe(version);
  expect(r.text).toBe(expectedText.get(version));
}

/** Each version's text for PROMPT, asked of its worker directly. */
async function referenceTexts(workers: WorkerView[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const w of workers) {
    if (out.has(w.version) || w.state !== 'ready') continue;
    const r = await streamChat(w.endpoint, { model: MODEL, prompt: PROMPT, maxTokens: MAX_TOKENS });
    if (!r.ok) throw new Error(`reference from ${w.id}: ${r.error}`);
    out.set(w.version, r.text);
  }
  return out;
}

describe('restart safety (e2e, real glidepath up)', () => {
  const dirs: string[] = [];
  const ups: UpProcess[] = [];

  beforeAll(() => {
    ensureBuilt();
  });

  afterAll(async () => {
    // a running `up` stops its own workers; whatever survives (adopted or orphaned) is killed by pid
    for (const u of ups) await u.kill('SIGTERM');
    cleanupAll();
    for (const d of dirs) removeDir(d);
  });

  /** A fresh directory and its config (by default v1 routed, v2 registered, one worker each); `start` runs `up` on it. */
  const setup = (
    name: string,
    yaml = (dataDir: string) =>
      simConfigYaml({
        model: MODEL,
        dataDir,
        versions: [
          { id: 'v1', seed: 1, replicas: 1 },
          { id: 'v2', seed: 2, replicas: 1 },
        ],
      }),
  ) => {
    const dir = tempDir(name);
    dirs.push(dir);
    const dataDir = `${dir}/data`;
    const configFile = writeConfig(dir, yaml(dataDir));
    const start = async () => {
      const u = await startUp({ configFile, dataDir });
      ups.push(u);
      return u;
    };
    return { start, configFile };
  };

  /** SIGKILL `u`, start again on the same data dir, and check everything came back as it was. */
  async function killAndRestart(u: UpProcess, start: () => Promise<UpProcess>): Promise<{ up: UpProcess; before: Snapshot; after: Snapshot }> {
    const before = await snapshot(u);
    const exit = await u.kill('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    // the workers outlive their parent
    for (const w of before.workers) expect(pidAlive(w.pid!), `worker ${w.id} (pid ${w.pid}) alive after SIGKILL of up`).toBe(true);
    const up = await start();
    const after = await snapshot(up);
    expect(after.versions).toEqual(before.versions);
    expect(after.route).toEqual(before.route);
    expect({ active: after.active, standby: after.standby }).toEqual({ active: before.active, standby: before.standby });
    expectAuditKept(before.audit, after.audit);
    // adopted, not restarted: same ids, pids and endpoints
    expect(after.workers.map((w) => [w.id, w.pid, w.endpoint, w.state])).toEqual(before.workers.map((w) => [w.id, w.pid, w.endpoint, w.state]));
    expect(up.stderr()).toMatch(/adopted 1 running worker/);
    return { up, before, after };
  }

  it('given a fleet mid-blue-green, when up is SIGKILLed after deploy green, after swap, after rollback and after a sleeping-standby swap, then every restart serves the same state with the same workers', async () => {
    const { start } = setup('restart-kill');
    // given: v1 active, v2 registered
    let up = await start();
    const first = await snapshot(up);
    expect(first.versions.map(lifecycle)).toEqual([
      { version: 'v1', status: 'active', rollback_eligible: false, rollback_blocked_reason: null },
      { version: 'v2', status: 'registered', rollback_eligible: false, rollback_blocked_reason: null },
    ]);

    // deploy green → kill → restart: v2 ready at weight 0 (previewable by header), v1 still serving
    await up.ok('POST', `/models/${MODEL}/deploy`, { version: 'v2' });
    let r = await killAndRestart(up, start);
    up = r.up;
    const text = await referenceTexts(r.after.workers);
    expect(text.get('v1')).not.toBe(text.get('v2'));
    expect(r.after.versions.map((v) => [v.version, v.status])).toEqual([
      ['v1', 'active'],
      ['v2', 'ready'],
    ]);
    expect(r.after.route).toMatchObject({ stable: 'v1', weights: { v1: 1, v2: 0 } });
    expect(r.after.audit[0]).toMatchObject({ action: 'deploy_green', target: `${MODEL}/v2`, result: 'ok' });
    await expectServedBy(up, 'v1', text);
    await expectServedBy(up, 'v2', text, { 'x-glidepath-version': 'v2' });

    // swap → kill → restart: v2 active, v1 the standby
    await up.ok('POST', `/models/${MODEL}/swap`, { mode: 'overlap' });
    r = await killAndRestart(up, start);
    up = r.up;
    expect(r.after.versions.map((v) => [v.version, v.status, v.rollback_eligible])).toEqual([
      ['v1', 'standby', true],
      ['v2', 'active', false],
    ]);
    expect(r.after).toMatchObject({ active: 'v2', standby: 'v1', route: { stable: 'v2', weights: { v2: 1, v1: 0 } } });
    expect(r.after.route.revision).toBeGreaterThan(first.route.revision);
    expect(r.after.audit[0]).toMatchObject({ action: 'swap', target: MODEL, result: 'ok' });
    await expectServedBy(up, 'v2', text);

    // rollback → kill → restart: v1 active again, v2 standby but blocked as a rollback target
    const rb = await up.ok<{ rolled_back_to: string }>('POST', `/models/${MODEL}/rollback`, {});
    expect(rb.rolled_back_to).toBe('v1');
    r = await killAndRestart(up, start);
    up = r.up;
    expect(r.after.versions.map((v) => [v.version, v.status, v.rollback_eligible])).toEqual([
      ['v1', 'active', false],
      ['v2', 'standby', false],
    ]);
    expect(r.after.versions.find((v) => v.version === 'v2')!.rollback_blocked_reason).toMatch(/rolled back to v1/);
    expect(r.after).toMatchObject({ active: 'v1', standby: null, route: { stable: 'v1', weights: { v1: 1, v2: 0 } } });
    expect(r.after.audit[0]).toMatchObject({ action: 'rollback', target: MODEL, result: 'ok' });
    await expectServedBy(up, 'v1', text);

    // swap with a sleeping standby (time-shared) → kill → restart: v1 still asleep, rollback wakes it
    await up.ok('POST', `/models/${MODEL}/swap`, { to: 'v2', mode: 'overlap', standby: 'sleep' });
    const asleep = await snapshot(up);
    expect(asleep.workers.find((w) => w.version === 'v1')).toMatchObject({ state: 'sleeping', routable: false });
    // twice: the first restart must not forget (in the store) that the adopted worker is asleep
    for (let crash = 0; crash < 2; crash++) {
      r = await killAndRestart(up, start);
      up = r.up;
      expect(r.after).toMatchObject({ active: 'v2', standby: 'v1' });
      expect(r.after.workers.find((w) => w.version === 'v1')).toMatchObject({ state: 'sleeping', routable: false });
      expect(r.after.versions.find((v) => v.version === 'v1')).toMatchObject({ status: 'standby', asleep: true });
      await expectServedBy(up, 'v2', text);
    }
    const rb2 = await up.ok<{ rolled_back_to: string; method: string; wake_ms: number }>('POST', `/models/${MODEL}/rollback`, {});
    expect(rb2).toMatchObject({ rolled_back_to: 'v1', method: 'wake_then_route_switch' });
    await expectServedBy(up, 'v1', text);

    // the audit log holds the whole story, in order
    const end = await snapshot(up);
    const audit = end.audit
      .filter((e) => e.result === 'ok')
      .map((e) => e.action)
      .reverse();
    expect(audit).toEqual(['deploy_green', 'swap', 'rollback', 'swap', 'rollback']);

    // an adopted worker is still watched: its unexpected death is noticed, it leaves rotation, and the
    // health controller replaces it (docs/health.md)
    const v2 = end.workers.find((w) => w.version === 'v2')!;
    const exitedEvent = waitForEvent(up, 'worker_exited', (e) => e.version === 'v2');
    const replacedEvent = waitForEvent(up, 'worker_replaced', (e) => e.version === 'v2');
    process.kill(v2.pid!, 'SIGKILL');
    expect((await exitedEvent).message).toContain(v2.id);
    await replacedEvent;
    const workers = await up.ok<WorkerView[]>('GET', '/workers');
    expect(workers.find((w) => w.id === v2.id)).toBeUndefined();
    expect(workers.filter((w) => w.version === 'v2').map((w) => w.id)).toEqual([`${MODEL}/v2/1`]);
    await expectServedBy(up, 'v1', text);

    // and stopping `up` stops the adopted workers before it exits
    const v1 = end.workers.find((w) => w.version === 'v1')!;
    expect((await up.kill('SIGTERM')).code).toBe(0);
    expect(pidAlive(v1.pid!), `adopted worker ${v1.id} (pid ${v1.pid}) after SIGTERM of up`).toBe(false);
  }, 60_000);

  it('given a replacement still starting (its engine loading), when up is stopped with SIGTERM, then that worker is stopped too', async () => {
    const { start } = setup('restart-starting', (dataDir) =>
      simConfigYaml({
        model: MODEL,
        dataDir,
        gpus: 4,
        health: '{ interval_ms: 1000, recovery_timeout_ms: 2000, dead_after_failed_recoveries: 1 }',
        // a load of 1.5 s: the replacement stays `starting` that long
        versions: [{ id: 'v1', seed: 1, replicas: 2, loadTimeMs: 1500 }],
      }),
    );
    const up = await start();
    const [victim] = await up.ok<WorkerView[]>('GET', '/workers');
    process.kill(victim!.pid!, 'SIGKILL');
    let starting: WorkerView | undefined;
    for (;;) {
      const ws = await up.ok<WorkerView[]>('GET', '/workers');
      trackWorkerPids(ws.map((w) => w.pid));
      starting = ws.find((w) => w.state === 'starting' && w.pid !== null);
      if (starting !== undefined) break;
      // polled every 20 ms, under the admin API's 100 requests/s: back to back, a slow machine's wait
      // for the death spent the burst and the poll was refused (429); the start lasts 1.5 s
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await up.kill('SIGTERM')).code).toBe(0);
    // before, its start ran on after the shutdown had stopped the workers it knew, and it was left running
    expect(pidAlive(starting.pid!), `starting worker ${starting.id} (pid ${starting.pid}) after SIGTERM of up`).toBe(false);
  }, 45_000);

  // Before, a version's load recorded its workers only once warm, and the launcher kept them from
  // their spawn: a kill -9 during the load left them running, known to no one, and the restart freed
  // their GPUs for others while they ran on (a canary's candidate whose leader was killed while it
  // loaded was left running in the cluster e2e test). Now they are recorded as starting from their
  // spawn, and the restart that fails the version stops them.
  // (test/integration/control/restart-loading.test.ts: the same after the warm-up, before `ready`.)
  it('given a version still loading, when up is SIGKILLed, then the restart marks it failed and stops its workers: none left running, recorded or holding a GPU', async () => {
    // a model of its own: its simulators are found by their command line (`--model loadcut --version v2`)
    const model = 'loadcut';
    const { start } = setup('restart-loading', (dataDir) =>
      simConfigYaml({
        model,
        dataDir,
        versions: [
          { id: 'v1', seed: 1, replicas: 1 },
          // a load of 10 s: the deploy is still loading when up is killed
          { id: 'v2', seed: 2, replicas: 2, loadTimeMs: 10_000 },
        ],
      }),
    );
    let up = await start();
    void up.admin('POST', `/models/${model}/deploy`, { version: 'v2' }).catch(() => undefined);
    // both of v2's processes are recorded as starting (their pids written), neither has loaded
    let loading: number[] = [];
    while (loading.length < 2) {
      const ws = await up.ok<WorkerView[]>('GET', `/workers?model=${model}`);
      loading = ws.filter((w) => w.version === 'v2' && w.state === 'starting' && w.pid !== null).map((w) => w.pid!);
      trackWorkerPids(loading);
      // paced under the admin API's 100 requests/s
      if (loading.length < 2) await new Promise((r) => setTimeout(r, 20));
    }
    // and they are all of its processes
    expect(simPids(model, 'v2')).toEqual([...loading].sort((a, b) => a - b));
    expect((await up.kill('SIGKILL')).signal).toBe('SIGKILL');
    for (const pid of loading) expect(pidAlive(pid), `v2's pid ${pid} outlives up's crash`).toBe(true);
    up = await start();
    const v2 = (await up.ok<VersionView[]>('GET', `/models/${model}/versions`)).find((v) => v.version === 'v2');
    expect(v2?.status).toBe('failed');
    // no GPU is held for v2: v1's worker holds the only one taken
    const gpus = await up.ok<{ holder: { model: string; version: string } | null }[]>('GET', '/gpus');
    expect(gpus.flatMap((g) => (g.holder === null ? [] : [`${g.holder.model}/${g.holder.version}`]))).toEqual([`${model}/v1`]);
    expect((await up.ok<WorkerView[]>('GET', '/workers')).filter((w) => w.model === model && w.version === 'v2')).toEqual([]);
    for (const pid of loading) expect(pidAlive(pid), `v2's pid ${pid} after the restart`).toBe(false);
  }, 60_000);

  it('given up still booting (its workers loading), when it gets SIGTERM, then it stops them and exits 0 instead of leaving them running', async () => {
    const { configFile } = setup('restart-boot', (dataDir) =>
      simConfigYaml({ model: MODEL, dataDir, versions: [{ id: 'v1', seed: 1, replicas: 2, loadTimeMs: 20_000 }] }),
    );
    const proc = spawn(process.execPath, [CLI, 'up', '--config', configFile, '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    let err = '';
    proc.stderr.setEncoding('utf8');
    // both workers exist (their progress lines name their pids), neither is healthy for 20 s
    const pids = await new Promise<number[]>((resolve) =>
      proc.stderr.on('data', (d: string) => {
        err += d;
        const found = [...err.matchAll(/simulator pid (\d+) on /g)].map((m) => Number(m[1]));
        if (found.length === 2) resolve(found);
      }),
    );
    trackWorkerPids(pids);
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(err).toMatch(/SIGTERM while starting/);
    for (const pid of pids) expect(pidAlive(pid), `worker pid ${pid} after SIGTERM of a booting up; stderr:\n${err}`).toBe(false);
  }, 45_000);

  it('given a swapped fleet, when up is stopped with SIGTERM and started again, then its workers were stopped and come back with the same state', async () => {
    const { start } = setup('restart-term');
    let up = await start();
    await up.ok('POST', `/models/${MODEL}/deploy`, { version: 'v2' });
    await up.ok('POST', `/models/${MODEL}/swap`, { mode: 'drain-first' });
    const before = await snapshot(up);
    const text = await referenceTexts(before.workers);

    const exit = await up.kill('SIGTERM');
    expect(exit.code).toBe(0);
    // `up` waited for its workers to exit before exiting itself
    for (const w of before.workers) expect(pidAlive(w.pid!), `worker ${w.id} (pid ${w.pid}) after SIGTERM of up`).toBe(false);

    up = await start();
    const after = await snapshot(up);
    expect(after.versions.map(lifecycle)).toEqual(before.versions.map(lifecycle));
    expect(after.route).toEqual(before.route);
    expect({ active: after.active, standby: after.standby }).toEqual({ active: 'v2', standby: 'v1' });
    expectAuditKept(before.audit, after.audit);
    // restarted, not adopted: same worker ids, new processes
    expect(after.workers.map((w) => [w.id, w.state])).toEqual(before.workers.map((w) => [w.id, w.state]));
    for (const w of after.workers) {
      expect(before.workers.some((b) => b.pid === w.pid)).toBe(false);
      expect(pidAlive(w.pid!)).toBe(true);
    }
    await expectServedBy(up, 'v2', text);
    await expectServedBy(up, 'v1', text, { 'x-glidepath-version': 'v1' });
    const rb = await up.ok<{ rolled_back_to: string }>('POST', `/models/${MODEL}/rollback`, {});
    expect(rb.rolled_back_to).toBe('v1');
    await expectServedBy(up, 'v1', text);
  }, 45_000);
});
