// End-to-end crash safety of a rolling update: `glidepath up` SIGKILLed at three seeded random points
// of a v1 → v2 update (v2's workers take a while to load, so some kills land mid-start), started
// again on the same data directory each time: the update adopts the workers it finds and carries on
// from the store, and ends with exactly v2's four workers — no duplicate started, none lost, and no
// worker process left running that the fleet does not know.
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, ensureBuilt, removeDir, simPids, startUp, tempDir, trackWorkerPids, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess, WorkerView } from '../helpers/e2e-up.js';
import { checkTrace, over, rollingYaml, untilFor } from '../helpers/e2e-rolling.js';
import type { RollingView } from '../../src/api/types.js';

// a name of its own: the orphan check looks for this model's simulator processes
const MODEL = 'rollkill';

/** Seeded delays (ms) in [lo, hi): the same three points on every run. */
function delays(seed: number, n: number, lo: number, hi: number): number[] {
  let x = seed;
  return Array.from({ length: n }, () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return lo + Math.floor((x / 2 ** 31) * (hi - lo));
  });
}

describe('rolling update survives kill -9 of up (e2e)', () => {
  const dir = tempDir('rolling-kill');
  afterAll(() => {
    cleanupAll();
    for (const pid of simPids(MODEL)) process.kill(pid, 'SIGKILL');
    removeDir(dir);
  });

  it("three kills at seeded random points: the update continues from the store, ends with v2's 4 workers, no duplicate, none orphaned", async () => {
    ensureBuilt();
    writeConfig(dir, rollingYaml(`${dir}/state`, { model: MODEL, v2LoadMs: 400 }));
    const start = async () => {
      const up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
      return up;
    };
    let up: UpProcess = await start();
    await up.ok('POST', `/models/${MODEL}/rolling`, { to: 'v2' });
    const points = delays(20261127, 3, 200, 1_600);
    for (const ms of points) {
      await new Promise((r) => setTimeout(r, ms));
      const before = await up.ok<RollingView>('GET', `/models/${MODEL}/rolling`);
      if (over(before)) break;
      trackWorkerPids((await up.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`)).map((w) => w.pid));
      expect((await up.kill('SIGKILL')).signal).toBe('SIGKILL');
      up = await start();
      const after = await up.ok<RollingView>('GET', `/models/${MODEL}/rolling`);
      const ws = await up.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
      trackWorkerPids(ws.map((w) => w.pid));
      // adopted, not restarted: never more workers than the surge allows, never two with one id
      expect(new Set(ws.map((w) => w.id)).size).toBe(ws.length);
      expect(ws.length).toBeLessThanOrEqual(5);
      console.log(
        `rolling kill -9 after ${ms} ms at step ${before.step} (${before.phase}); after the restart: step ${after.step}, ${ws.map((w) => w.id.split('/').slice(1).join('/')).join(' ')}`,
      );
    }
    const v = await untilFor(up, MODEL, over);
    expect(v.phase).toBe('succeeded');
    checkTrace(v);
    const ws = await up.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
    expect(ws.map((w) => w.version)).toEqual(['v2', 'v2', 'v2', 'v2']);
    // every simulator process of the model is one the fleet knows: none started twice, none orphaned
    expect(simPids(MODEL)).toEqual(ws.map((w) => w.pid).sort((a, b) => (a ?? 0) - (b ?? 0)));
    const events = await up.ok<{ kind: string }[]>('GET', `/models/${MODEL}/rolling/events`);
    expect(events.filter((e) => e.kind === 'resumed').length).toBeGreaterThanOrEqual(1);
    await up.kill('SIGTERM');
  }, 180_000);
});
