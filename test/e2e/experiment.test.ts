// End-to-end A/B experiment on quality with the simulator judge: two loaded versions whose
// hallucination rates (2 % and 3.2 %) make the judge's mean score differ by ~10 %. Given a 50/50
// experiment with min_detectable_effect = that difference, the always-valid analysis must reach a
// significant decision ("a is better") with about the number of samples the power analysis
// predicted in an early analysis (samples_needed_sequential at 80 % power): over three rounds the
// median ratio n / predicted lies between 0.3x and 3x, each round between 0.2x and 5x.
// `analyze` is polled (the system emits no event per judged sample); each call is one look of the
// always-valid test, so polling often does not inflate the false-positive rate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import type { SimHandle } from '../../src/sim/index.js';
import { LoadGen, canaryConfigYaml, recordAcceptance, startJudge } from '../helpers/e2e-canary.js';
import { cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess, VersionView } from '../helpers/e2e-up.js';
import type { ExperimentAnalysisView } from '../../src/api/types.js';

const MODEL = 'ab';
const HALLUCINATION_A = 0.02;
const HALLUCINATION_B = 0.032;
/** Expected mean judge score difference on 0-1: 60 points per unit of marked share / 9 (src/sim/judge.ts). */
const MDE = (60 * (HALLUCINATION_B - HALLUCINATION_A)) / 9;
const POLL_MS = 100;
const LIMIT_MS = 40_000;

type Analysis = ExperimentAnalysisView;

/** A statistic of an analysed experiment: the API sends null only for one it could not compute. */
function must(x: number | null): number {
  if (x === null) throw new Error('expected a number in an analysed experiment, got null');
  return x;
}

let judge: SimHandle;
let dir = '';
let up: UpProcess;

beforeAll(async () => {
  ensureBuilt();
  judge = await startJudge();
  dir = tempDir('experiment');
  const yaml = canaryConfigYaml({
    dataDir: dir,
    tickMs: 100,
    judge: { url: judge.url, mode: 'pointwise', sampleShare: 1, concurrency: 8 },
    models: [
      {
        name: MODEL,
        versions: [
          { id: 'a', seed: 91, prefillTokensPerS: 1_000, hallucinationRate: HALLUCINATION_A },
          { id: 'b', seed: 92, prefillTokensPerS: 1_000, hallucinationRate: HALLUCINATION_B },
        ],
      },
    ],
  });
  up = await startUp({ configFile: writeConfig(dir, yaml), dataDir: dir });
});

afterAll(async () => {
  await up?.kill('SIGTERM');
  cleanupAll();
  await judge?.close();
  if (dir) removeDir(dir);
});

interface Round {
  early: Analysis['result'];
  first: Analysis['result'];
  pSequence: number[];
  after: Analysis['result'];
  seconds: number;
  requests: number;
}

/** One experiment from create to the first significant analysis (prompts of its own: fresh answers). */
async function round(i: number): Promise<Round> {
  await up.ok('POST', `/models/${MODEL}/experiments`, { a: 'a', b: 'b', split: 0.5, metric: 'quality', min_detectable_effect: MDE, alpha: 0.05, power: 0.8 });
  const t0 = performance.now();
  const load = new LoadGen(up.dataUrl, [MODEL], { concurrency: 8, maxTokens: 12, maxRequests: 50_000, maxMs: LIMIT_MS, promptPrefix: `Round ${i} question` });
  let early: Analysis['result'] | undefined;
  let first: Analysis['result'] | undefined;
  const pSequence: number[] = [];
  try {
    while (performance.now() - t0 < LIMIT_MS) {
      const r = (await up.ok<Analysis>('POST', `/models/${MODEL}/experiments/analyze`)).result;
      if (r.status === 'analyzed') pSequence.push(must(r.p_value_sequential));
      if (!early && r.status === 'analyzed') early = r;
      if (r.significant) {
        first = r;
        break;
      }
      await new Promise((res) => setTimeout(res, POLL_MS));
    }
    // one more look after the decision: an always-valid p-value never goes back up
    const after = (await up.ok<Analysis>('POST', `/models/${MODEL}/experiments/analyze`)).result;
    expect(early, 'the experiment never had 30 scores per version').toBeDefined();
    expect(first, `no significant decision within ${LIMIT_MS} ms`).toBeDefined();
    return { early: early!, first: first!, pSequence, after, seconds: (performance.now() - t0) / 1000, requests: load.stats.get(MODEL)!.ok };
  } finally {
    await load.stop();
  }
}

describe('A/B experiment with the LLM judge, end to end', () => {
  it('a ~10 % quality difference is significant at about the sample size the power analysis predicted (3 rounds)', async () => {
    // Given both versions loaded
    const deployed = await up.ok<VersionView>('POST', `/models/${MODEL}/deploy`, { version: 'b' });
    expect(deployed.status).toBe('ready');
    const rounds: Record<string, unknown>[] = [];
    for (let i = 0; i < 3; i++) {
      // When a 50/50 experiment on quality is analysed again and again as judge scores come in
      const r = await round(i);
      const predicted = must(r.early.samples_needed_sequential);
      const n = Math.min(r.first.n_a, r.first.n_b);
      rounds.push({
        early: {
          n: Math.min(r.early.n_a, r.early.n_b),
          mean_a: r.early.mean_a,
          mean_b: r.early.mean_b,
          std_a: r.early.std_a,
          std_b: r.early.std_b,
          samples_needed_for_power: r.early.samples_needed_for_power,
          samples_needed_sequential: predicted,
        },
        decision: {
          n_a: r.first.n_a,
          n_b: r.first.n_b,
          mean_a: r.first.mean_a,
          mean_b: r.first.mean_b,
          relative_difference: (must(r.first.mean_a) - must(r.first.mean_b)) / must(r.first.mean_a),
          p_value: r.first.p_value,
          p_value_sequential: r.first.p_value_sequential,
          decision: r.first.decision,
          effect_size: r.first.effect_size,
          win_rate: r.first.win_rate,
        },
        n_over_predicted: n / predicted,
        looks: r.pSequence.length,
        seconds: r.seconds,
        client_requests: r.requests,
      });
      // Then A (fewer hallucinations) is significantly better, at about the predicted sample size
      expect(r.first.decision).toBe('a_better');
      expect(r.first.mean_a).toBeGreaterThan(must(r.first.mean_b));
      // one stopping time has a long right tail (at 80 % power, 1 run in 5 needs more than predicted)
      expect(n / predicted).toBeGreaterThanOrEqual(0.2);
      expect(n / predicted).toBeLessThanOrEqual(5);
      // And the always-valid p-value is a running minimum: later looks never undo the decision
      // (regression: analyze did not carry the previous p-value, so `significant` could flip back)
      for (let k = 1; k < r.pSequence.length; k++) expect(r.pSequence[k]!).toBeLessThanOrEqual(r.pSequence[k - 1]!);
      expect(r.after.p_value_sequential).toBeLessThanOrEqual(must(r.first.p_value_sequential));
      expect(r.after.significant).toBe(true);
      // stopping without a winner restores the route for the next round; the last round promotes A
      const last = i === 2;
      const stopped = await up.ok<{ phase: string }>('POST', `/models/${MODEL}/experiments/stop`, last ? { promote: 'a' } : {});
      expect(stopped.phase).toBe('stopped');
    }
    // the median of the three rounds within 0.3x-3x of the prediction
    const ratios = rounds.map((r) => r.n_over_predicted as number).sort((x, y) => x - y);
    const median = ratios[1]!;
    const report = { hallucination: { a: HALLUCINATION_A, b: HALLUCINATION_B }, designed_difference: MDE, median_n_over_predicted: median, rounds };
    console.log(JSON.stringify(report, null, 2));
    recordAcceptance('experiment', report);
    expect(median).toBeGreaterThanOrEqual(0.3);
    expect(median).toBeLessThanOrEqual(3);
    const route = await up.ok<{ weights: Record<string, number>; stable: string }>('GET', `/models/${MODEL}/route`);
    expect(route.stable).toBe('a');
    expect(route.weights.a).toBe(1);
  });
});
