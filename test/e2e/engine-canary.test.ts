// End-to-end canaries on real llama.cpp workers (docs/engines.md): a version four times as wide is
// rolled back by the latency gate (the judge's defaults) at half the traffic at the latest; another
// seed of the same shape that is not slower walks every stage (a p99 tolerance of 50 %: below). In the test run's "alone" group
// (vitest.config.ts): beside the suite's other files on two cores, the lightly loaded canary engine
// waits longer for a core than stable's busy one, and an equal version's tail read up to twice
// stable's (docs/engines.md).
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import type { CanaryView, WorkerView } from '../../src/api/types.js';
import { itEngine } from '../helpers/engine.js';
import { EngineUps, engineConfigYaml } from '../helpers/e2e-engine.js';
import { ensureBuilt, streamChat } from '../helpers/e2e-up.js';
import type { UpProcess } from '../helpers/e2e-up.js';
import { driveToEnd, EventStream, LoadGen } from '../helpers/e2e-canary.js';

const MODEL = 'chat';
const fleets = new EngineUps();
const models = fleets.models;

beforeAll(() => ensureBuilt());
afterAll(() => fleets.close());
// each run's fleet stopped before the next starts: its idle engines and control loop would share the CPU (a retry included)
afterEach(() => fleets.stopAll());

describe('canaries on real llama.cpp workers (e2e)', () => {
  /** `canary`: extra settings of the model's `canary:` (a flow mapping's entries). */
  const canaryRun = async (name: string, v2: string, canary = ''): Promise<{ up: UpProcess; view: CanaryView; ok: number; failed: number }> => {
    const up = await fleets.start(`canary-${name}`, (dataDir) =>
      engineConfigYaml({
        dataDir,
        model: MODEL,
        control: '{ tick_ms: 100 }',
        // no shadow traffic: copies of stable's requests load the canary's engine beyond its share, and on
        // a CPU a busier engine is slower (with shadow 30 %, an equal canary's tail at 50 % was judged slower)
        canary: `{ stages: [5, 25, 50, 100], stage_duration_ms: 2000, min_samples: 60${canary} }`,
        // warmed up alike: a fresh worker's cold JIT code makes its tail slower than a busy one's
        versions: [
          { id: 'v1', weights: models.model(1), warmup: 100 },
          { id: 'v2', weights: v2, warmup: 100 },
        ],
      }),
    );
    const events = await EventStream.open(up);
    // ignore_eos: every answer has 12 tokens, whatever the seed
    const load = new LoadGen(up.dataUrl, [MODEL], { concurrency: 16, maxTokens: 12, maxRequests: 50_000, maxMs: 90_000, extra: { ignore_eos: true } });
    try {
      await up.ok('POST', `/models/${MODEL}/canary`, { version: 'v2' });
      const { view } = await driveToEnd(up, events, MODEL, 80_000, name === 'slow' ? { waitThroughPauses: true } : { resumeThroughputPauses: true });
      await load.stop();
      const stats = load.stats.get(MODEL);
      console.log(
        `engine canary e2e (${name}): ${view.phase} at ${view.rollback?.percent_at_rollback ?? 100} %, ${stats?.ok ?? 0} requests ok, ${stats?.failed ?? 0} failed; ${view.rollback?.reason ?? view.message ?? ''}`,
      );
      // the latency metric at each decisive look: how far from its tolerance the canary was judged
      for (const v of view.verdicts.filter((x) => x.decisive)) {
        const lat = v.metrics.find((m) => m.name === 'latency');
        console.log(`  at ${v.percent} %: ${v.action}; latency ${lat?.outcome ?? '-'}: ${lat?.reason ?? ''}`);
      }
      return { up, view, ok: stats?.ok ?? 0, failed: stats?.failed ?? 0 };
    } finally {
      await load.stop();
      events.close();
    }
  };

  itEngine(
    'a canary of a slower engine version (four times as wide) is rolled back by the latency gate, at half the traffic at the latest',
    async () => {
      const { up, view, failed } = await canaryRun('slow', models.model(2, { name: 'wide', shape: { embedding: 256, heads: 8, feedForward: 1024 } }));
      expect(view.phase, view.message ?? undefined).toBe('rolled_back');
      // at 25 % in every run here; in .ci/run once at 50 %: its lightly loaded engine, on a slower machine, was not
      // slower at 25 % (1.3 % of its requests above the pooled p95 against 5.4 %), then was at 50 % (14 %, p99 +137 %)
      expect(view.rollback?.percent_at_rollback).toBeLessThanOrEqual(50);
      expect(view.rollback?.reason).toMatch(/latency|ttft|tpot/);
      expect((await up.ok<{ weights: Record<string, number> }>('GET', `/models/${MODEL}/route`)).weights.v2 ?? 0).toBe(0);
      expect(failed).toBe(0);
    },
    120_000,
  );

  itEngine(
    "a canary of another seed that is not slower is promoted through every stage, its answers differing from stable's",
    async () => {
      // Seeds of the same shape are not equally fast on this CPU: through the gateway at 50/50, seed 2
      // was ~10 % slower at p50 than seed 1 in either slot (its canary rightly rolled back), seed 6 ~12 %
      // faster (docs/engines.md). Seed 6 is a version the statistics should promote. Its p99 tolerance is
      // 50 %, not the default 20 %: both engines share two cores, and a look's samples are all of the
      // canary's so far, so at 50 % the canary's come mostly from the most contended seconds (both engines
      // busy) and stable's partly from the stages before. In .ci/run that read as a slower tail at 50 % in
      // three runs of four (p99 +24 %, +28 %, +0.1 %; docs/engines.md). The wider version is rolled back
      // with the default tolerance, and its p99 read +56 … +1,100 % where it was.
      const { up, view, failed, ok } = await canaryRun('equal', models.model(6), ', max_p99_increase: 0.5');
      expect(view.phase, view.message ?? undefined).toBe('succeeded');
      const versions = await up.ok<{ version: string; status: string }[]>('GET', `/models/${MODEL}/versions`);
      expect(versions.find((x) => x.version === 'v2')?.status).toBe('active');
      // another version indeed: the same prompts asked of a worker of each directly get other answers
      const ws = await up.ok<WorkerView[]>('GET', '/workers');
      const prompts = ['what is a canary', 'name three rivers', 'count to five'];
      const answers = async (v: string) => {
        const w = ws.find((x) => x.version === v && x.state === 'ready');
        if (w === undefined) throw new Error(`no ready worker of ${v}: ${JSON.stringify(ws.map((x) => [x.id, x.version, x.state]))}`);
        return Promise.all(
          prompts.map(async (p) => {
            const r = await streamChat(w.endpoint, { model: MODEL, prompt: p, maxTokens: 12 });
            if (!r.ok) throw new Error(`${v} at ${w.endpoint}: ${r.error ?? r.status}`);
            return r.text;
          }),
        );
      };
      const [a1, a2] = [await answers('v1'), await answers('v2')];
      expect(a2.filter((t, i) => t === a1[i])).toEqual([]);
      expect(failed).toBe(0);
      expect(ok).toBeGreaterThan(0);
    },
    // One retry: on this shared 2-CPU machine an equal version's tail at 50 % is now and then judged
    // slower, significantly so (once in .ci/run: 10.8 % of its requests above the pooled p95 against
    // 4.1 % of stable's, p99 +24 %), though seed 6 is the faster model (docs/engines.md). The judge is
    // right about what it measured; the machine is the noise. A judge that rolled back equal versions
    // as a rule fails both runs.
    { timeout: 120_000, retry: 1 },
  );
});
