// End-to-end rolling update on real llama.cpp workers (docs/engines.md, docs/rolling.md): a real
// `glidepath up` whose two versions run `glidepath engine` on the same tiny seeded GGUF with engine
// configurations whose cards differ (--max-num-seqs 4 and 8, declared as `engine: { max_num_seqs }`),
// rolled v1 → v2 under continuous streaming load: no failed request, none served by a worker of the
// other pool, every step within its budgets, v2 active at the end with only its workers.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { RollingView } from '../../src/api/types.js';
import { itEngine } from '../helpers/engine.js';
import { EngineUps, engineConfigYaml, untilWorkers } from '../helpers/e2e-engine.js';
import { checkTrace, over, untilFor } from '../helpers/e2e-rolling.js';
import { ensureBuilt, loadAgent, streamChat } from '../helpers/e2e-up.js';
import type { StreamResult, UpProcess, WorkerView } from '../helpers/e2e-up.js';

const MODEL = 'chat';
const REPLICAS = 3;
const CLIENTS = 16;
/** Every answer this long (ignore_eos): a worker taken out of the route still has streams to finish, ~0.5 s of them. */
const TOKENS = 128;
const fleets = new EngineUps();
const models = fleets.models;

beforeAll(() => ensureBuilt());
afterAll(() => fleets.close());

async function workers(u: UpProcess): Promise<WorkerView[]> {
  return u.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
}

/** Streams from CLIENTS loops until stopped; `until(n)` resolves once n more streams have ended. */
function streamingLoad(u: UpProcess): { until(n: number): Promise<void>; stop(): Promise<StreamResult[]> } {
  const agent = loadAgent(CLIENTS);
  const got: StreamResult[] = [];
  let running = true;
  let waiter: { length: number; resolve: () => void } | undefined;
  const loops = Array.from({ length: CLIENTS }, async (_, i) => {
    for (let n = 0; running; n++) {
      got.push(
        await streamChat(u.dataUrl, {
          model: MODEL,
          prompt: `client ${i} asks question ${n % 50} of the fleet`,
          maxTokens: TOKENS,
          dispatcher: agent,
          extra: { ignore_eos: true },
        }),
      );
      if (waiter !== undefined && got.length >= waiter.length) waiter.resolve();
    }
  });
  return {
    until: (n) => new Promise<void>((resolve) => (waiter = { length: got.length + n, resolve })),
    async stop() {
      running = false;
      await Promise.all(loops);
      await agent.close();
      return got;
    },
  };
}

interface CardView {
  version: string;
  status: string;
  card_checksum: string;
  weights: string;
}

describe('rolling update on real llama.cpp workers (e2e)', () => {
  itEngine(
    `v1 → v2 (same GGUF, --max-num-seqs 4 → 8: another card) with ${REPLICAS} workers each under ${CLIENTS} streaming clients: none fails, none served across pools, every step within budget`,
    async () => {
      // seed 4: its answers to the default health probes have no near-tie, so a probe set can be
      // recorded, and a new worker (pending) is admitted by its probes; with seed 1 none can be and
      // the update waits at its first step until the step timeout (10 min)
      const weights = models.model(4);
      const u = await fleets.start('rolling', (dataDir) =>
        engineConfigYaml({
          dataDir,
          model: MODEL,
          control: '{ tick_ms: 250 }',
          versions: [
            { id: 'v1', weights, replicas: REPLICAS, maxNumSeqs: 4 },
            { id: 'v2', weights, replicas: REPLICAS, maxNumSeqs: 8 },
          ],
        }),
      );
      await untilWorkers(u, (ws) => ws.length === REPLICAS && ws.every((w) => w.version === 'v1' && w.state === 'ready' && w.routable), 'all v1 serving');
      // one file, two engine configurations: two cards, so two pools
      const cards = await u.ok<CardView[]>('GET', `/models/${MODEL}/versions`);
      const card = (v: string) => cards.find((c) => c.version === v) as CardView;
      expect(card('v1').weights).toBe(card('v2').weights);
      expect(card('v1').card_checksum).not.toBe(card('v2').card_checksum);

      const load = streamingLoad(u);
      let got: StreamResult[] = [];
      let v: RollingView;
      try {
        await load.until(100);
        const started = await u.ok<RollingView>('POST', `/models/${MODEL}/rolling`, { to: 'v2' });
        expect(started).toMatchObject({ from: 'v1', to: 'v2', phase: 'progressing', max_surge: 1, max_unavailable: 0 });
        v = await untilFor(u, MODEL, over);
        await load.until(100);
      } finally {
        got = await load.stop();
      }

      expect(v.phase, v.message ?? undefined).toBe('succeeded');
      expect(v.failures).toEqual([]);
      expect(got.filter((s) => !s.ok).map((s) => `${s.version} by ${s.worker}: ${s.error}`)).toEqual([]);
      // each response came from a worker of the pool its version header names
      const across = got.filter((s) => !s.worker.startsWith(`${MODEL}/${s.version}/`));
      expect(across.map((s) => `${s.version} by ${s.worker}`)).toEqual([]);
      const by = (x: string) => got.filter((s) => s.version === x).length;
      expect(by('v1')).toBeGreaterThan(0);
      expect(by('v2')).toBeGreaterThan(0);
      // the update's last streams are all v2's
      expect(got.slice(-CLIENTS).every((s) => s.version === 'v2')).toBe(true);
      const trace = checkTrace(v);
      // the drains were real: streams running on an old worker when its step took it out of the route finished there
      const leftAt = new Map(v.trace.flatMap((t) => t.stopped.map((id) => [id, t.at] as const)));
      const drained = got.filter((s) => performance.timeOrigin + s.endedAt > (leftAt.get(s.worker) ?? Infinity)).length;
      expect(drained).toBeGreaterThan(0);

      const ws = await workers(u);
      expect(ws.map((w) => w.version)).toEqual(Array.from({ length: REPLICAS }, () => 'v2'));
      const status = await u.ok<{ models: { active: string | null }[] }>('GET', '/status');
      expect(status.models[0]?.active).toBe('v2');
      const route = await u.ok<{ weights: Record<string, number> }>('GET', `/models/${MODEL}/route`);
      expect(route.weights).toEqual({ v2: 1 });
      console.log(
        `engine rolling e2e: v1 → v2 (cards ${card('v1').card_checksum} → ${card('v2').card_checksum}) in ${v.step} steps, ${Math.round(v.elapsed_ms)} ms, ${got.length} streams (${by('v1')} v1, ${by('v2')} v2), 0 failed, 0 across pools, ${drained} finished on old workers draining; trace:\n${trace.join('\n')}`,
      );
    },
    120_000,
  );
});
