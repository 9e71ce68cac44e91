// The LLM judge on every replica's traffic (cluster mode, docs/cluster.md): a follower's data plane taps
// the answers it serves at the judge's sample share and ships them to the leader, which judges them with
// its own; a shadow pair's ids from two followers never meet. A real `glidepath up` in this process leads
// (a simulated worker, the simulator's judge model); the follower's data plane mirrors the leader's store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { App } from '../../../src/control/app.js';
import { buildDataPlane } from '../../../src/control/app.js';
import { Mirror } from '../../../src/control/mirror.js';
import { QualityFeed } from '../../../src/control/quality-judge.js';
import { SampleShipper } from '../../../src/control/shipper.js';
import type { ShippedSample } from '../../../src/control/shipper.js';
import type { JudgeSamplesView } from '../../../src/api/types.js';
import { createDataServer, startListening } from '../../../src/gateway/server.js';
import type { ListeningServer } from '../../../src/gateway/server.js';
import type { SimHandle } from '../../../src/sim/index.js';
import { startJudge } from '../../helpers/e2e-canary.js';
import { simVersion, startWatched, stopWatched } from '../../helpers/watched-sims.js';

const TOKEN = 'judge-samples-token-0123456789abcdef';
let judge: SimHandle;
let leader: App;

beforeAll(async () => {
  judge = await startJudge();
  ({ app: leader } = await startWatched({
    auth: { tokens: [{ name: 'ops', role: 'operator', token: TOKEN }] },
    judge: { url: judge.url, model: 'judge', mode: 'pointwise', sample_share: 1, concurrency: 4, timeout_ms: 5_000 },
    gpus: { count: 1, memory_gb: 80 },
    models: [{ name: 'm', versions: [simVersion('v1', 1)], route: { weights: { v1: 1 } } }],
  }));
});

afterAll(async () => {
  await stopWatched();
  await judge?.close();
});

async function judged(): Promise<number> {
  const res = await request(`${leader.adminUrl}/admin/v1/judge`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return ((await res.body.json()) as { judged: number }).judged;
}

describe('judge samples shipped by a follower', () => {
  it("the follower's answers are judged by the leader's judge", async () => {
    const { dp } = buildDataPlane(leader.cfg);
    const errors: string[] = [];
    const shipper = new SampleShipper(
      dp,
      { mode: 'pointwise', sampleShare: 1 },
      {
        replica: 'f1',
        leader: () => leader.adminUrl,
        token: () => Promise.resolve(TOKEN),
        tokenRefused: () => undefined,
        onError: (m) => errors.push(m),
      },
    );
    shipper.start(); // before the follower knows a model: the mirror taps it when it arrives
    const mirror = new Mirror(
      leader.cfg,
      leader.store,
      dp,
      (m) => errors.push(m),
      (model) => shipper.tap(model),
    );
    await mirror.syncAll();
    let front: ListeningServer | undefined;
    try {
      front = await startListening(createDataServer(dp), '127.0.0.1', 0);
      const before = await judged();
      for (let i = 0; i < 6; i++) {
        const res = await request(`${front.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 8, stream: i % 2 === 0 }),
        });
        expect(res.statusCode).toBe(200);
        await res.body.text();
      }
      await expect.poll(() => shipper.flush().then(() => shipper.shipped)).toBe(6);
      await expect.poll(judged, { timeout: 10_000 }).toBe(before + 6);
      // the judge's last decisions, for operators: scores and versions, no text (capture_prompts is off)
      const res = await request(`${leader.adminUrl}/admin/v1/judge/samples?model=m`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const view = (await res.body.json()) as JudgeSamplesView;
      expect(view.capture_prompts).toBe(false);
      expect(view.samples.length).toBeGreaterThanOrEqual(6);
      expect(view.samples.every((x) => x.model === 'm' && x.version === 'v1' && x.kind === 'pointwise' && x.prompt === null && x.answer === null)).toBe(true);
      const unknown = await request(`${leader.adminUrl}/admin/v1/judge/samples?model=nope`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(unknown.statusCode).toBe(404);
      await unknown.body.text();
      expect(errors).toEqual([]);
      expect(shipper.dropped).toBe(0);
    } finally {
      await shipper.stop({ flush: false });
      await mirror.stop();
      await front?.close();
      await dp.close();
    }
  });

  it("a pair is the follower's own: two followers' halves never meet, two halves of one side are refused, one follower's pair is judged", async () => {
    const scores: { version: string; score: number }[] = [];
    const feed = new QualityFeed({ ...leader.cfg.judge!, mode: 'pairwise', capturePrompts: true }, ['m'], leader.cp.dp, [
      { quality: (_m, version, score) => scores.push({ version, score }) },
    ]);
    const sample = (pair: string, shadow: boolean): ShippedSample => ({
      model: 'm',
      version: shadow ? 'v2' : 'v1',
      pair,
      shadow,
      prompt: 'hi',
      answer: shadow ? 'hi there' : 'hello',
    });
    expect(feed.ingest('f1', sample('a:7', false))).toBe(true);
    expect(feed.ingest('f2', sample('a:7', true))).toBe(true); // another follower's pair: not f1's
    expect(feed.ingest('f1', sample('a:7', false))).toBe(false); // two client answers are no pair
    await new Promise((r) => setTimeout(r, 200));
    expect(feed.stats().judged).toBe(0);
    expect(feed.ingest('f1', sample('a:7', true))).toBe(true);
    await expect.poll(() => feed.stats().judged, { timeout: 10_000 }).toBe(1);
    // one pairwise comparison: a score for each side, summing to 1
    expect(scores.map((x) => x.version).sort()).toEqual(['v1', 'v2']);
    expect(scores.reduce((a, x) => a + x.score, 0)).toBe(1);
    // kept for operators with capture_prompts: the prompt and both answers
    expect(feed.samples('m')).toMatchObject([
      { kind: 'pairwise', version: 'v1', against: 'v2', prompt: expect.stringContaining('hi'), answer: 'hello', answerAgainst: 'hi there' },
    ]);
  });
});
