// Temporal sharing on a real `glidepath up` (issue 17's acceptance): two models on one simulated GPU,
// one awake at a time, traffic that alternates between them and then asks for both at once. Every
// request is served (a request for the sleeping model waits in the gateway's queue while the GPU
// switches), each switch's wake is measured and reported, and both models' workers run on the one
// GPU the group holds. The timeline is printed.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadAgent, streamChat } from '../helpers/e2e-up.js';
import { upForFile } from '../helpers/e2e-file.js';
import type { StreamResult, UpProcess } from '../helpers/e2e-up.js';
import type { SchedulerView } from '../../src/api/routes/scheduler.js';

const WAKE_MS = 400;

function yaml(dataDir: string): string {
  const model = (name: string, seed: number) => [
    `  - name: ${name}`,
    '    priority: standard',
    `    versions: [{ id: v1, replicas: 1, provider: { kind: sim, sim: { seed: ${seed}, inter_token_ms: 5, jitter: 0, wake_ms: ${WAKE_MS} } } }]`,
  ];
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 1, memory_gb: 80 }',
    'control: { tick_ms: 250 }',
    'time_sharing:',
    '  - { name: shift, models: [day, night], min_active_ms: 1500, idle_ms: 300, max_wait_ms: 15000 }',
    'models:',
    ...model('day', 1),
    ...model('night', 2),
    '',
  ].join('\n');
}

const file = upForFile('e2e-time-share', yaml);
let up: UpProcess;
beforeAll(() => {
  up = file.current();
});

interface Tagged extends StreamResult {
  model: string;
}

/** `clients` streams looping on `model` for `ms`. */
async function traffic(model: string, clients: number, ms: number, into: Tagged[]): Promise<void> {
  const agent = loadAgent(clients);
  const end = performance.now() + ms;
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      while (performance.now() < end)
        into.push({ ...(await streamChat(up.dataUrl, { model, prompt: `${model} ${i}`, maxTokens: 16, dispatcher: agent })), model });
    }),
  );
  await agent.close();
}

const group = async () => {
  const v = await up.ok<SchedulerView>('GET', '/scheduler');
  const g = v.time_sharing[0];
  if (g === undefined) throw new Error('no time-share group in GET /scheduler');
  return g;
};

describe('two models time-sharing one GPU', () => {
  it('starts with one awake and the other asleep, both on the group’s GPU', async () => {
    const g = await group();
    expect(g.awake).toBe('day');
    expect(g.cost.gpus_saved).toBe(1);
    const gpus = await up.ok<{ id: string; holder: { model: string } | null }[]>('GET', '/gpus');
    expect(gpus.map((x) => x.holder?.model)).toEqual(['@shift']);
    const workers = await up.ok<{ model: string; gpus: string[]; state: string }[]>('GET', '/workers');
    expect(workers.map((w) => [w.model, w.gpus, w.state]).sort()).toEqual([
      ['day', ['0'], 'ready'],
      ['night', ['0'], 'sleeping'],
    ]);
  });

  it('serves alternating traffic and both at once, every request, each wake measured', async () => {
    const results: Tagged[] = [];
    const t0 = performance.now();
    const timeline: string[] = [];
    const note = (s: string) => timeline.push(`${((performance.now() - t0) / 1000).toFixed(1).padStart(5)} s  ${s}`);
    for (const [model, ms] of [
      ['day', 1_500],
      ['night', 2_500],
      ['day', 2_500],
    ] as const) {
      note(`${model}: 4 clients for ${ms} ms`);
      await traffic(model, 4, ms, results);
      note(`awake: ${(await group()).awake ?? '-'}`);
    }
    note('both: 2 clients each for 5000 ms');
    await Promise.all([traffic('day', 2, 5_000, results), traffic('night', 2, 5_000, results)]);
    const g = await group();
    for (const s of g.history)
      note(
        `  switch at ${s.at.slice(11, 23)}: ${s.from ?? '-'} → ${s.to} (${s.why}); drain ${s.drain_ms} ms, sleep ${s.sleep_ms} ms, wake ${s.wake_ms} ms, total ${s.total_ms} ms, ${s.released} released; ${s.outcome}`,
      );
    const waits = (m: string) =>
      results
        .filter((r) => r.model === m)
        .map((r) => r.headersAt - r.startedAt)
        .sort((a, b) => a - b);
    for (const m of ['day', 'night']) {
      const w = waits(m);
      note(`${m}: ${w.length} requests, time to headers p50 ${Math.round(w[Math.floor(w.length / 2)] ?? 0)} ms, max ${Math.round(w.at(-1) ?? 0)} ms`);
    }
    console.log(`time-share timeline:\n${timeline.join('\n')}`);
    expect(results.filter((r) => !r.ok).map((r) => `${r.model}: ${r.error}`)).toEqual([]);
    const done = g.history.filter((s) => s.outcome === 'done');
    // day → night, night → day, and at least one more while both ask
    expect(done.length).toBeGreaterThanOrEqual(3);
    expect(done.slice(0, 2).map((s) => s.to)).toEqual(['night', 'day']);
    for (const s of done) expect(s.wake_ms).toBeGreaterThanOrEqual(WAKE_MS);
    const metrics = await (await fetch(`${up.dataUrl}/metrics`)).text();
    expect(metrics).toMatch(/glidepath_timeshare_switches_total\{group="shift",to="night",outcome="done"\} [1-9]/);
    const wakes = /glidepath_timeshare_switch_seconds_count\{group="shift",phase="wake"\} (\d+)/.exec(metrics);
    expect(Number(wakes?.[1])).toBe(done.length);
  }, 60_000);
});
