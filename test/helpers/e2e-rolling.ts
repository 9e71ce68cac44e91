// What the rolling-update end-to-end tests share: the fleet's config (v2 on another card, v3 that
// cannot start), polling the update, and the trace checked against the budgets.
import { expect } from 'vitest';
import type { RollingView } from '../../src/api/types.js';
import type { UpProcess } from './e2e-up.js';

export function rollingYaml(dataDir: string, opts: { model: string; gpus?: number; v2LoadMs?: number; roles?: { prefill: number; decode: number } }): string {
  const size = opts.roles ? `        roles: { prefill: ${opts.roles.prefill}, decode: ${opts.roles.decode} }` : '        replicas: 4';
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    `gpus: { count: ${opts.gpus ?? 10}, memory_gb: 80 }`,
    'control: { tick_ms: 250 }',
    'models:',
    `  - name: ${opts.model}`,
    '    versions:',
    '      - id: v1',
    size,
    // no simulator warm-up: glidepath plan's rolling estimate is 4 × the version's load measured at
    // boot, its 4 workers started at once; on 2 CPUs four simulators warming up together stretched that
    // load ~0.3 s more than a rolling step's one start, and the estimate past 2 × the measured update
    // (rolling.test.ts checks it against the plan, not CPU contention)
    '        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 4, jitter: 0, warmup_requests: 0 } }',
    '      - id: v2',
    size,
    // another block size: another card, a pool of its own
    '        architecture: { block_size: 32 }',
    `        provider: { kind: sim, sim: { seed: 2, inter_token_ms: 4, jitter: 0, warmup_requests: 0${opts.v2LoadMs ? `, load_time_ms: ${opts.v2LoadMs}` : ''} } }`,
    '      - id: v3',
    size,
    // a command that exits at once: its workers crash on start
    '        provider: { kind: process, command: "false", health_path: /health, grace_period_ms: 200 }',
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

/** Poll the update until `done` says so (or the limit passes). */
export async function untilFor(up: UpProcess, model: string, done: (v: RollingView) => boolean, limitMs = 90_000): Promise<RollingView> {
  const t0 = Date.now();
  for (;;) {
    const v = await up.ok<RollingView>('GET', `/models/${model}/rolling`);
    if (done(v)) return v;
    if (Date.now() - t0 > limitMs) throw new Error(`the rolling update did not get there within ${limitMs} ms: ${JSON.stringify(v).slice(0, 2_000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const over = (v: RollingView) => ['succeeded', 'aborted', 'rolled_back', 'failed'].includes(v.phase);

/** Every step of the trace within the budgets: serving ≥ desired − unavailable, all workers ≤ desired + surge. */
export function checkTrace(v: RollingView): string[] {
  const lines: string[] = [];
  for (const t of v.trace) {
    for (const [role, c] of Object.entries(t.roles)) {
      const r = v.roles[role];
      if (!r) throw new Error(`trace names role ${role} the update does not have`);
      expect(c.old + c.ready, `step ${t.step}: ${role} serving`).toBeGreaterThanOrEqual(r.desired - r.max_unavailable);
      expect(c.old + c.ready + c.starting, `step ${t.step}: ${role} workers`).toBeLessThanOrEqual(r.desired + r.max_surge);
      lines.push(
        `  step ${t.step} ${t.direction}: ${role} old ${c.old}, new ready ${c.ready}, starting ${c.starting}; new share ${(t.share * 100).toFixed(0)} %`,
      );
    }
  }
  return lines;
}
