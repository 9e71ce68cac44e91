// Adapter canaries end to end (issue 17's acceptance): a real `glidepath up` with two simulated
// workers serving LoRA adapters from the config, the simulator's judge scoring every answer, and a
// closed-loop load on the adapters. A new version of `sql` that hallucinates more (the simulator's
// knob in its lora_path: 14 % against 3 %) is rolled back on quality and unloaded; an equal new
// version of `fr` is promoted: served under its own name from then on (no reload), the old one
// unloaded, answers still named `fr`, and after a restart still the promoted version.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import type { AdapterCanaryView } from '../../src/api/types.js';
import type { AdapterView } from '../../src/control/adapters.js';
import type { SimHandle } from '../../src/sim/index.js';
import { EventStream, LoadGen, notPassed, recordAcceptance, startJudge } from '../helpers/e2e-canary.js';
import { cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess } from '../helpers/e2e-up.js';

const STABLE = 0.03;
const WORSE = 0.14;

let judge: SimHandle;
const dirs: string[] = [];
const results: Record<string, unknown>[] = [];

beforeAll(async () => {
  ensureBuilt();
  judge = await startJudge();
});

afterAll(async () => {
  cleanupAll();
  await judge?.close();
  for (const d of dirs) removeDir(d);
  recordAcceptance('adapter_canary', results);
});

function configYaml(dataDir: string): string {
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 4, memory_gb: 80 }',
    'control: { tick_ms: 100 }',
    'judge:',
    `  url: ${JSON.stringify(judge.url)}`,
    '  model: judge',
    '  mode: pointwise',
    '  sample_share: 1',
    '  concurrency: 8',
    '  timeout_ms: 5000',
    'models:',
    '  - name: chat',
    '    adapters:',
    `      - { name: sql, source: "/adapters/sql?hallucination_rate=${STABLE}", version: "1" }`,
    `      - { name: fr, source: "/adapters/fr?hallucination_rate=${STABLE}", version: "1" }`,
    '    versions:',
    '      - id: v1',
    '        replicas: 2',
    `        provider: { kind: sim, sim: { seed: 7, inter_token_ms: 0, jitter: 0, prefill_tokens_per_s: 1000, max_loras: 4, lora_load_ms: 5, hallucination_rate: ${STABLE} } }`,
    '    route: { weights: { v1: 1 } }',
    // latency is the same workers' on both sides: quality is what these cases are about
    '    canary: { stages: [10, 25, 50, 100], stage_duration_ms: 1500, min_samples: 30, max_p99_increase: 2 }',
    '',
  ].join('\n');
}

/** Waits for the adapter's canary to end (or pause); a pause on throughput alone is resumed, as an operator would. */
async function driveToEnd(up: UpProcess, events: EventStream, adapter: string, timeoutMs: number): Promise<{ view: AdapterCanaryView; resumes: number }> {
  const deadline = performance.now() + timeoutMs;
  const path = `/models/chat/adapters/${adapter}/canary`;
  let after = 0;
  let resumes = 0;
  for (;;) {
    const e = await events.waitFor(
      (x) => x.seq > after && /^adapter_canary_(succeeded|rolled_back|aborted|failed|paused)$/.test(x.kind) && x.message.includes(`: ${adapter}: `),
      Math.max(1, deadline - performance.now()),
      `the end of ${adapter}'s canary`,
    );
    after = e.seq;
    const view = await up.ok<AdapterCanaryView>('GET', path);
    if (view.phase !== 'paused') return { view, resumes };
    const bad = notPassed(view.last);
    if (bad.length !== 1 || bad[0] !== 'throughput') return { view, resumes };
    await up.ok('POST', `${path}/resume`, {});
    resumes++;
  }
}

describe('adapter canaries, end to end', () => {
  it('a worse new version of an adapter is rolled back on quality; an equal one is promoted, kept across a restart', async () => {
    const dir = tempDir('adapter-canary');
    dirs.push(dir);
    const file = writeConfig(dir, configYaml(dir));
    let up = await startUp({ configFile: file, dataDir: dir });
    const events = await EventStream.open(up);
    const t0 = performance.now();
    const load = new LoadGen(up.dataUrl, ['sql', 'fr'], { concurrency: 6, maxTokens: 12, maxRequests: 30_000, maxMs: 60_000 });
    try {
      const sql = await up.ok<AdapterCanaryView>('POST', '/models/chat/adapters/sql/canary', {
        source: `/adapters/sql-v2?hallucination_rate=${WORSE}`,
        version: '2',
      });
      expect(sql).toMatchObject({ phase: 'progressing', percent: 10, candidate: { served_as: 'sql--2' }, stable: { served_as: 'sql' } });
      await up.ok('POST', '/models/chat/adapters/fr/canary', { source: `/adapters/fr-v2?hallucination_rate=${STABLE}`, version: '2' });
      const ends = await Promise.all(
        ['sql', 'fr'].map(async (a) => {
          const d = await driveToEnd(up, events, a, 50_000);
          load.stopFor(a);
          return { ...d, ms: performance.now() - t0 };
        }),
      );
      const [bad, good] = ends as [(typeof ends)[number], (typeof ends)[number]];
      await load.stop();
      const quality = (v: AdapterCanaryView) => v.last?.metrics.find((m) => m.name === 'quality');
      for (const [name, r] of [
        ['sql', bad],
        ['fr', good],
      ] as const)
        results.push({
          adapter: name,
          phase: r.view.phase,
          ms: Math.round(r.ms),
          percent_at_rollback: r.view.rollback?.percent_at_rollback ?? null,
          candidate_requests: r.view.rollback?.candidate_requests ?? null,
          quality: quality(r.view) ?? null,
          operator_resumes_after_throughput_pause: r.resumes,
          requests: load.stats.get(name),
        });
      console.log(JSON.stringify(results, null, 2));

      // the worse version: rolled back on quality, its share back to 0, unloaded from the workers
      expect(bad.view.phase).toBe('rolled_back');
      expect(bad.view.rollback?.reason).toMatch(/quality/);
      expect(bad.view.rollback?.unload_failed).toEqual([]);
      // the equal one: promoted, served under its own name, the old version unloaded
      expect(good.view.phase).toBe('succeeded');
      const list = await up.ok<AdapterView[]>('GET', '/models/chat/adapters');
      const sqlView = list.find((a) => a.name === 'sql');
      const frView = list.find((a) => a.name === 'fr');
      expect(sqlView).toMatchObject({ served_as: 'sql', version: '1', canary: null });
      expect(sqlView?.workers.map((w) => w.served_as)).not.toContain('sql--2');
      expect(frView).toMatchObject({ served_as: 'fr--2', version: '2', source: `/adapters/fr-v2?hallucination_rate=${STABLE}`, from: 'config', canary: null });
      expect(frView?.workers.map((w) => w.served_as)).not.toContain('fr');
      // no request of either adapter failed through any of it
      expect(load.stats.get('sql')?.failed).toBe(0);
      expect(load.stats.get('fr')?.failed).toBe(0);
      const answer = await fetch(`${up.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fr', messages: [{ role: 'user', content: 'bonjour' }], max_tokens: 3 }),
      });
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { model: string }).model).toBe('fr');
    } finally {
      events.close();
      await load.stop();
    }
    // a restart keeps the promotion of a config-defined adapter (the store overrides the config's entry)
    await up.kill('SIGTERM');
    up = await startUp({ configFile: file, dataDir: dir });
    const after = await up.ok<AdapterView[]>('GET', '/models/chat/adapters');
    expect(after.find((a) => a.name === 'fr')).toMatchObject({ served_as: 'fr--2', version: '2' });
    expect(after.find((a) => a.name === 'sql')).toMatchObject({ served_as: 'sql', version: '1' });
    const history = await up.ok<AdapterCanaryView[]>('GET', '/models/chat/adapters/sql/canary/history');
    expect(history.map((h) => h.phase)).toEqual(['rolled_back']);
    await up.kill('SIGTERM');
  });
});
