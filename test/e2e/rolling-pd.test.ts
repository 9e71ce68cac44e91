// End-to-end rolling update of a disaggregated model (issue 16's acceptance run): 4 prefill + 2
// decode simulated workers at v1, rolled to v2 whose card differs (block size) under 100 concurrent
// streams. No request fails; every answer was prefilled and decoded by workers of its own version's
// pool (a mixed pair could not even exchange KV: the decode worker refuses another card's blocks);
// each role stays within its budgets and each pool within one worker of the 4:2 ratio at every step.
import { describe, expect, it } from 'vitest';
import type { UpProcess, WorkerView } from '../helpers/e2e-up.js';
import { upForFile } from '../helpers/e2e-file.js';
import { checkTrace, over, rollingYaml, untilFor } from '../helpers/e2e-rolling.js';
import { loadFor } from '../helpers/e2e-up.js';
import type { RollingView } from '../../src/api/types.js';
import { ratioKept } from '../../src/rollout/rolling-plan.js';

const MODEL = 'pd';
const ROLES = { prefill: 4, decode: 2 };
const file = upForFile('rolling-pd', (d) => rollingYaml(d, { model: MODEL, roles: ROLES, gpus: 10 }));

describe('rolling update of prefill and decode workers (e2e)', () => {
  it('4 prefill + 2 decode, v1 → v2 (another card) under 100 streams: none fails, no mixed pair, the P/D ratio kept at every step', async () => {
    const up: UpProcess = file.current();
    let stop!: (x: unknown) => void;
    const traffic = loadFor(() => up, MODEL, 100, new Promise((r) => (stop = r)));
    await new Promise((r) => setTimeout(r, 300));
    await up.ok<RollingView>('POST', `/models/${MODEL}/rolling`, { to: 'v2' });
    const v = await untilFor(up, MODEL, over);
    await new Promise((r) => setTimeout(r, 300));
    stop(undefined);
    const got = await traffic;
    expect(v.phase).toBe('succeeded');
    expect(got.filter((s) => !s.ok).map((s) => s.error)).toEqual([]);
    // every answer's two workers are of its own version's pool, a prefill and a decode worker
    const byId = new Map<string, string>();
    for (const w of await up.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`)) byId.set(w.id, w.version);
    const mixed = got.filter((s) => !s.prefillWorker.startsWith(`${MODEL}/${s.version}/`) || !s.worker.startsWith(`${MODEL}/${s.version}/`));
    expect(mixed.map((s) => `${s.version}: prefill ${s.prefillWorker}, decode ${s.worker}`)).toEqual([]);
    expect(new Set(got.map((s) => s.version))).toEqual(new Set(['v1', 'v2']));
    const lines = checkTrace(v);
    for (const t of v.trace) {
      const old = { prefill: t.roles.prefill?.old ?? 0, decode: t.roles.decode?.old ?? 0 };
      const neu = {
        prefill: (t.roles.prefill?.ready ?? 0) + (t.roles.prefill?.starting ?? 0),
        decode: (t.roles.decode?.ready ?? 0) + (t.roles.decode?.starting ?? 0),
      };
      expect(ratioKept(old, ROLES), `step ${t.step}: old pool ${JSON.stringify(old)}`).toBe(true);
      expect(ratioKept(neu, ROLES), `step ${t.step}: new pool ${JSON.stringify(neu)}`).toBe(true);
      // a pool with traffic has both roles
      if (t.share < 1) expect(Math.min(old.prefill, old.decode), `step ${t.step}: old pool serves`).toBeGreaterThan(0);
      if (t.share > 0) expect(Math.min(t.roles.prefill?.ready ?? 0, t.roles.decode?.ready ?? 0), `step ${t.step}: new pool serves`).toBeGreaterThan(0);
    }
    console.log(
      `rolling P/D e2e: v1 → v2 in ${v.step} steps, ${Math.round(v.elapsed_ms)} ms, ${got.length} streams, 0 failed, 0 mixed pairs; trace:\n${lines.join('\n')}`,
    );
    const ws = await up.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
    expect(ws.map((w) => w.version)).toEqual(Array.from({ length: 6 }, () => 'v2'));
  }, 180_000);
});
