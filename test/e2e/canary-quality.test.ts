// End-to-end quality gate with the LLM judge, tested for real against the simulator's judge model
// (seed 001's incident: a checkpoint with 14 % hallucinations against a 3 % baseline).
//   pointwise: the gateway taps client responses, the judge scores each 1-10 → 0-1; the canary
//              `halluc` (14 %) must be rolled back at <= 10 % on the quality metric, and an equal
//              canary `sameq` (3 %, another seed) is promoted with quality passing.
//   pairwise:  a second `glidepath up` judges stable answers against shadow copies sent to the
//              canary (both orders); the 14 % canary must be rolled back at <= 10 % again.
// The judge is a simulator serving the built-in `judge` model in this process (loopback port 0).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanaryView, JudgeView } from '../../src/api/types.js';
import { performance } from 'node:perf_hooks';
import type { SimHandle } from '../../src/sim/index.js';
import { EventStream, LoadGen, canaryConfigYaml, driveToEnd, recordAcceptance, startJudge, summarize } from '../helpers/e2e-canary.js';
import type { CanaryModelSpec } from '../helpers/e2e-canary.js';
import { cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess, VersionView } from '../helpers/e2e-up.js';

const STAGES = [2, 5, 10, 25, 50, 100];
const canary = { stages: STAGES, stageDurationMs: 1_500, minSamples: 30 };
const P = 1_000;
const STABLE_HALLUCINATION = 0.03;
const BAD_HALLUCINATION = 0.14;

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
  recordAcceptance('quality', results);
});

async function run(
  mode: 'pointwise' | 'pairwise',
  models: CanaryModelSpec[],
  resume: string[],
): Promise<{ up: UpProcess; views: Map<string, CanaryView>; judged: JudgeView }> {
  const dir = tempDir(`canary-${mode}`);
  dirs.push(dir);
  const file = writeConfig(
    dir,
    canaryConfigYaml({ dataDir: dir, models, tickMs: 100, judge: { url: judge.url, mode, sampleShare: mode === 'pointwise' ? 1 : 0, concurrency: 8 } }),
  );
  const up = await startUp({ configFile: file, dataDir: dir });
  const events = await EventStream.open(up);
  try {
    const t0 = performance.now();
    const load = new LoadGen(
      up.dataUrl,
      models.map((m) => m.name),
      { concurrency: 6, maxTokens: 12, maxRequests: 20_000, maxMs: 40_000 },
    );
    for (const m of models) await up.ok('POST', `/models/${m.name}/canary`, { version: 'v2' });
    const ends = await Promise.all(
      models.map(async (m) => {
        const d = await driveToEnd(up, events, m.name, 40_000, { resumeThroughputPauses: resume.includes(m.name) });
        load.stopFor(m.name);
        return { model: m.name, ...d, ms: performance.now() - t0 };
      }),
    );
    await load.stop();
    const judged = await up.ok<JudgeView>('GET', '/judge');
    const views = new Map<string, CanaryView>();
    for (const e of ends) {
      views.set(e.model, e.view);
      const q = e.view.verdicts.at(-1)?.metrics.find((x) => x.name === 'quality');
      results.push(
        summarize(e.view, load.stats.get(e.model), e.ms, {
          judge_mode: mode,
          quality: q ? { outcome: q.outcome, reason: q.reason, stable: q.stable, canary: q.canary } : null,
          operator_resumes_after_throughput_pause: e.resumes,
          judge: judged,
        }),
      );
    }
    console.log(JSON.stringify(results.slice(-models.length), null, 2));
    return { up, views, judged };
  } finally {
    events.close();
  }
}

describe('quality gate with the simulator judge, end to end', () => {
  it('pointwise: rolls back the 14 % hallucination canary before 10 % and promotes an equal one', async () => {
    // Given a stable version at 3 % hallucinations, a judge scoring every response
    const models: CanaryModelSpec[] = [
      {
        name: 'halluc',
        versions: [
          { id: 'v1', seed: 51, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION },
          { id: 'v2', seed: 52, prefillTokensPerS: P, hallucinationRate: BAD_HALLUCINATION },
        ],
        canary,
      },
      {
        name: 'sameq',
        versions: [
          { id: 'v1', seed: 61, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION },
          { id: 'v2', seed: 62, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION, warmupRequests: 100 },
        ],
        // a lightly loaded canary worker on a busy 2-core machine is slower at p99 (docs/canary.md,
        // finding 3: a run beside other tests saw +25.8 %, p=2e-7), and a failing latency no longer
        // waits for quality's data; quality is what this case checks, so latency gets a wide tolerance
        canary: { ...canary, maxP99Increase: 2 },
      },
      // the same with shadow traffic: in pointwise mode a shadow answer is scored on its own
      // (regression: shadow pairs were judged pairwise and their 1/0.5/0 mixed into the 0-1 scores).
      // The shadow copies (30 % of stable's traffic) all land on the canary's one worker process, so
      // on a loaded 2-core CI machine its latency tail is genuinely longer than stable's (a CI run saw
      // p99 +21.7 %, p=0.001, and the latency gate rightly rolled it back). Quality is what this case
      // checks, so its latency tolerance is wide; the latency gate has its own end-to-end tests.
      {
        name: 'sameqs',
        versions: [
          { id: 'v1', seed: 63, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION },
          { id: 'v2', seed: 64, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION, warmupRequests: 100 },
        ],
        canary: { ...canary, shadowShare: 0.3, maxP99Increase: 2 },
      },
    ];
    // When canaries start
    const { up, views, judged } = await run('pointwise', models, ['sameq', 'sameqs']);
    try {
      expect(judged.judged).toBeGreaterThan(60);
      // Then the hallucinating canary is rolled back on quality at <= 10 %
      const bad = views.get('halluc')!;
      expect(bad.phase, bad.message ?? undefined).toBe('rolled_back');
      expect(bad.rollback!.percent_at_rollback).toBeLessThanOrEqual(10);
      expect(bad.rollback!.reason).toMatch(/quality/);
      // And the equal one walks every stage, quality passing, and becomes active
      for (const name of ['sameq', 'sameqs']) {
        const ok = views.get(name)!;
        expect(ok.phase, `${name}: ${ok.message}`).toBe('succeeded');
        expect(ok.verdicts.at(-1)!.metrics.find((x) => x.name === 'quality')!.outcome).toBe('pass');
        const versions = await up.ok<VersionView[]>('GET', `/models/${name}/versions`);
        expect(versions.find((x) => x.version === 'v2')!.status).toBe('active');
        expect(versions.find((x) => x.version === 'v1')!.status).toBe('standby');
      }
      // both versions of sameqs score like sameq's pointwise stable (~0.72): no pairwise 0.5s mixed in
      const mean = (name: string, which: 'stable' | 'canary') =>
        (
          views
            .get(name)!
            .verdicts.at(-1)!
            .metrics.find((x) => x.name === 'quality')![which] as { mean: number }
        ).mean;
      const reference = mean('sameq', 'stable');
      expect(Math.abs(mean('sameqs', 'stable') - reference)).toBeLessThan(0.04);
      expect(Math.abs(mean('sameqs', 'canary') - reference)).toBeLessThan(0.06);
    } finally {
      await up.kill('SIGTERM');
    }
  });

  it('pairwise with shadow traffic: rolls back the 14 % hallucination canary before 10 %', async () => {
    // Given 30 % of stable requests mirrored to the canary and judged against stable in both orders
    const models: CanaryModelSpec[] = [
      {
        name: 'hallucpw',
        versions: [
          { id: 'v1', seed: 71, prefillTokensPerS: P, hallucinationRate: STABLE_HALLUCINATION },
          { id: 'v2', seed: 72, prefillTokensPerS: P, hallucinationRate: BAD_HALLUCINATION },
        ],
        canary: { ...canary, shadowShare: 0.3 },
      },
    ];
    const { up, views, judged } = await run('pairwise', models, []);
    try {
      expect(judged.judged).toBeGreaterThanOrEqual(30);
      // Then it is rolled back on quality (its answers lose the pairwise comparisons) at <= 10 %
      const bad = views.get('hallucpw')!;
      expect(bad.phase, bad.message ?? undefined).toBe('rolled_back');
      expect(bad.rollback!.percent_at_rollback).toBeLessThanOrEqual(10);
      expect(bad.rollback!.reason).toMatch(/quality/);
    } finally {
      await up.kill('SIGTERM');
    }
  });
});
