// End-to-end stream resumption (docs/resilience.md): a real `glidepath up` over four simulated
// workers; streams at temperature 0 keep going while workers are killed with SIGKILL (and replaced),
// hang mid-stream, or start sending garbage. Every stream must equal its unbroken reference, text
// and usage, with no error a client can see.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess } from '../helpers/e2e-up.js';
import { compare, killEvery, migrationMetrics, resilienceYaml, setFault, wave, workers } from '../helpers/e2e-resume.js';
import type { Streamed } from '../helpers/e2e-resume.js';

const STREAMS = 40;
const TOKENS = 80;
const ITL_MS = 20;
const PROMPTS = Array.from({ length: STREAMS }, (_, i) => `explain resumable stream number ${i}`);

let dir: string;
let up: UpProcess;
const ref = new Map<string, Streamed>();

async function allServing(n: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ws = await workers(up);
    if (ws.filter((w) => w.state === 'ready' && (w.weight ?? 0) === 1).length >= n) return;
    if (Date.now() > deadline) throw new Error(`never ${n} serving workers: ${JSON.stringify(ws.map((w) => [w.id, w.state, w.weight]))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir('resume');
  writeConfig(dir, resilienceYaml(`${dir}/state`, { replicas: 4, interTokenMs: ITL_MS, idleTimeoutMs: 1500 }));
  up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
  await allServing(4);
  // the references: straight from one worker, unbroken
  const w = (await workers(up))[0] as { endpoint: string };
  for (const r of await wave(w.endpoint, PROMPTS, TOKENS)) ref.set(r.prompt, r);
  expect([...ref.values()].every((r) => r.ok && r.usage?.completion_tokens === TOKENS)).toBe(true);
}, 60_000);

afterAll(async () => {
  await up?.kill('SIGTERM');
  cleanupAll();
  removeDir(dir);
});

describe('streams survive their workers', () => {
  it('kill -9 of a worker every 700 ms under 40 concurrent streams: no client sees a failure; text and usage equal the unbroken references', async () => {
    const before = await migrationMetrics(up);
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const kills = killEvery(up, 700, done);
    const got = [...(await wave(up.dataUrl, PROMPTS, TOKENS)), ...(await wave(up.dataUrl, PROMPTS, TOKENS))];
    finish();
    const killed = await kills;
    const c = compare(got, ref);
    expect(c.failed).toEqual([]);
    expect(c.textDiffers).toBe(0);
    expect(c.usageDiffers).toBe(0);
    expect(killed.length).toBeGreaterThanOrEqual(2);
    const after = await migrationMetrics(up);
    expect((after.outcomes.resumed ?? 0) - (before.outcomes.resumed ?? 0)).toBeGreaterThan(0);
    console.log(
      `resume e2e kill: ${killed.length} kills, ${(after.outcomes.resumed ?? 0) - (before.outcomes.resumed ?? 0)} streams resumed, ` +
        `mean stall ${(((after.stallSumS - before.stallSumS) / Math.max(1, after.stallCount - before.stallCount)) * 1000).toFixed(1)} ms`,
    );
    await allServing(4);
  }, 90_000);

  for (const [fault, body] of [
    ['hangs mid-stream (idle timeout)', { stall_after_tokens: 10 }],
    ['starts sending invalid SSE', { garbage_after_tokens: 10 }],
  ] as const) {
    it(`a worker that ${fault}: every stream on it continues elsewhere, equal to its reference`, async () => {
      const ws = await workers(up);
      const bad = ws.find((w) => w.state === 'ready' && (w.weight ?? 0) === 1) as { endpoint: string; id: string };
      await setFault(bad.endpoint, body);
      const before = await migrationMetrics(up);
      try {
        const got = await wave(up.dataUrl, PROMPTS, TOKENS);
        const c = compare(got, ref);
        expect(c.failed).toEqual([]);
        expect(c.textDiffers).toBe(0);
        expect(c.usageDiffers).toBe(0);
      } finally {
        await setFault(bad.endpoint, {}).catch(() => undefined);
      }
      const after = await migrationMetrics(up);
      expect((after.outcomes.resumed ?? 0) - (before.outcomes.resumed ?? 0)).toBeGreaterThan(0);
      await allServing(4);
    }, 90_000);
  }
});
