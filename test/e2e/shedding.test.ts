// End-to-end graceful degradation (docs/resilience.md): a real `glidepath up`, four simulated workers
// with four sequences each, three tiers of streaming clients by API key. Half the workers killed:
// the model drops to level 2, best-effort is shed with 429 + Retry-After, premium keeps its TTFT
// SLO, no accepted request fails (broken streams are resumed); the killed workers are replaced, the
// level returns to 0 and best-effort is served again.
import { describe, expect, it } from 'vitest';
import { collectEvents, loadAgent, streamChat } from '../helpers/e2e-up.js';
import { upForFile } from '../helpers/e2e-file.js';
import type { StreamResult } from '../helpers/e2e-up.js';
import { quantileSorted } from '../../src/domain/quantile.js';

const MODEL = 'chat';
const TTFT_SLO_MS = 300;
/** One stream's length (20 tokens at 20 ms) and some: the backlog of streams in flight at the failure is through by then. */
const BACKLOG_MS = 800;
// premium's demand fits the slots level 2 holds back for it (one per worker left): its SLO is then
// a promise the gateway can keep, whatever the phase of the other streams. With more premium
// clients than those slots, a premium request may wait for any stream to end (up to one stream's
// length, 400 ms: past the SLO); that once failed CI at 323 ms. Standard asks for more than the
// three slots per worker it may fill, so it queues behind premium.
const CLIENTS = { premium: 2, standard: 8, best_effort: 8 } as const;
type Tier = keyof typeof CLIENTS;
const KEYS: Record<Tier, string> = { premium: 'sk-premium', standard: 'sk-standard', best_effort: 'sk-free' };

function yaml(dataDir: string): string {
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 16, memory_gb: 80 }',
    'models:',
    `  - name: ${MODEL}`,
    `    slo: { ttft_p99_ms: ${TTFT_SLO_MS} }`,
    '    health: { interval_ms: 1000, jitter: 0.2, timeout_ms: 1000, recovery_timeout_ms: 2000, dead_after_failed_recoveries: 1 }',
    '    tiers:',
    '      keys:',
    ...(Object.keys(KEYS) as Tier[]).map((t) => `        - { key: ${KEYS[t]}, tier: ${t} }`),
    // four workers of 100 tokens/s each for a model that must serve 400; capacity by health alone (the
    // engines' measured throughput is test/integration/gateway/capacity.test.ts's business)
    '    degradation: { required_tokens_per_s: 400, worker_tokens_per_s: 100, recover_after_ms: 1000, measure_interval_ms: 0 }',
    '    versions:',
    '      - id: v1',
    '        replicas: 4',
    '        provider: { kind: sim, sim: { seed: 3, inter_token_ms: 20, jitter: 0, max_num_seqs: 4 } }',
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

interface Served {
  tier: Tier;
  r: StreamResult;
  /** Epoch ms the request was sent and its answer ended (the control events' clock). */
  sentAt: number;
  at: number;
}

const file = upForFile('shedding', yaml);

type W = { id: string; pid: number | null; state: string; weight?: number };
const workers = () => file.current().ok<W[]>('GET', '/workers');

async function until(pred: (ws: W[]) => boolean, what: string, ms = 30_000): Promise<W[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ws = await workers();
    if (pred(ws)) return ws;
    if (Date.now() > deadline) throw new Error(`never ${what}: ${JSON.stringify(ws.map((w) => [w.id, w.state, w.weight]))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('priority shedding when capacity falls', () => {
  it('half the workers killed: level 2, best-effort shed with Retry-After, premium within its TTFT SLO, nothing accepted fails; back to level 0 when replaced', async () => {
    const up = file.current();
    await until((ws) => ws.filter((w) => w.state === 'ready' && w.weight === 1).length === 4, 'four serving');
    const log = collectEvents(up);
    const served: Served[] = [];
    let running = true;
    const agent = loadAgent(32);
    const loops = (Object.keys(CLIENTS) as Tier[]).flatMap((tier) =>
      Array.from({ length: CLIENTS[tier] }, async (_, i) => {
        while (running) {
          const sentAt = Date.now();
          const r = await streamChat(up.dataUrl, {
            model: MODEL,
            prompt: `${tier} client ${i} asks`,
            maxTokens: 20,
            dispatcher: agent,
            headers: { authorization: `Bearer ${KEYS[tier]}` },
            extra: { ignore_eos: true },
          });
          served.push({ tier, r, sentAt, at: Date.now() });
          // shed: the client backs off a little (a raw request below checks Retry-After itself)
          if (r.status === 429) await new Promise((res) => setTimeout(res, 50));
        }
      }),
    );
    try {
      const ws = await until((x) => x.filter((w) => w.state === 'ready').length === 4, 'ready');
      const victims = ws.slice(0, 2);
      const killedAt = Date.now();
      for (const v of victims) process.kill(v.pid as number, 'SIGKILL');
      const down = await log.waitFor((e) => e.kind === 'degradation' && (e.data as { to: number }).to === 2, 'level 2', 15_000);
      // shed while degraded: a raw request shows the status, code and Retry-After
      const shedRes = await fetch(`${up.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.best_effort}` },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      });
      expect(shedRes.status).toBe(429);
      expect(shedRes.headers.get('retry-after')).toBe('5');
      expect(((await shedRes.json()) as { error: { code: string } }).error.code).toBe('tier_shed');
      // the admin API's view: still degraded (level 2, or 1 once a replacement counts), and the two
      // workers left share three of their four slots (max_num_seqs) below premium
      const cap = await up.ok<{ level: number; workers: { slots: { limit: number; shared: number } }[] }>('GET', `/models/${MODEL}/capacity`);
      expect([1, 2]).toContain(cap.level);
      expect(cap.workers.map((w) => [w.slots.limit, w.slots.shared])).toEqual([
        [4, 3],
        [4, 3],
      ]);
      const back = await log.waitFor((e) => e.kind === 'degradation' && (e.data as { to: number }).to === 0 && e.at > down.at, 'level 0', 30_000);
      // a while at level 0: best-effort is served again
      await new Promise((r) => setTimeout(r, 1_500));
      running = false;
      await Promise.all(loops);

      // sent while at level 2 (until the next change: a replacement may first bring level 1, which sheds nothing);
      // accepted streams of any tier may end in that window: they are never dropped
      const next = log.events.find((e) => e.kind === 'degradation' && e.at > down.at) ?? back;
      const during = served.filter((s) => s.sentAt > down.at + 50 && s.at < next.at);
      const after = served.filter((s) => s.sentAt > back.at + 50);
      // nothing accepted failed, whenever it ran
      expect(served.filter((s) => s.r.status === 200 && !s.r.ok).map((s) => `${s.tier}: ${s.r.error ?? ''}`)).toEqual([]);
      // only best-effort was refused, and only while degraded
      expect(new Set(served.filter((s) => s.r.status !== 200).map((s) => `${s.tier} ${s.r.status}`))).toEqual(new Set(['best_effort 429']));
      expect(during.filter((s) => s.tier === 'best_effort' && s.r.status === 200)).toEqual([]);
      expect(after.filter((s) => s.tier === 'best_effort' && s.r.status === 200).length).toBeGreaterThan(0);
      // premium kept its SLO while half the fleet was gone, once the backlog of the failure is
      // through: the ~8 streams in flight on the killed workers are resumed on the two left, first in
      // their queues (accepted requests go first), and a premium request arriving in that first
      // stream-length may wait behind them (up to ~290 ms seen); after it, premium waits before every
      // other tier and finds a slot held back from them
      const ttft = (tier: Tier, from: number) => during.filter((s) => s.tier === tier && s.r.ok && s.sentAt > from).map((s) => s.r.headersAt - s.r.startedAt);
      const settled = down.at + BACKLOG_MS;
      const premium = ttft('premium', settled).sort((a, b) => a - b);
      expect(premium.length).toBeGreaterThan(5);
      const p99 = quantileSorted(premium, 0.99);
      expect(p99).toBeLessThan(TTFT_SLO_MS);
      const all = ttft('premium', 0).sort((a, b) => a - b);
      const standard = ttft('standard', settled).sort((a, b) => a - b);
      console.log(
        `shedding e2e: level 2 after ${down.at - killedAt} ms, back to 0 after ${back.at - down.at} ms; TTFT p99 at level 2: premium ${p99.toFixed(1)} ms over ${premium.length} requests ` +
          `(${quantileSorted(all, 0.99).toFixed(1)} ms counting the ${all.length - premium.length} sent behind the backlog), standard ${quantileSorted(standard, 0.99).toFixed(1)} ms over ${standard.length}; ` +
          `${served.filter((s) => s.r.status === 429).length} best-effort requests shed`,
      );
    } finally {
      running = false;
      await Promise.all(loops);
      await agent.close();
      log.stop();
    }
  }, 90_000);
});
