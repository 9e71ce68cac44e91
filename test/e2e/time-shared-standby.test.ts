// Blue-green with the standby time-shared on the active version's GPUs (issue 17, seed 000's
// "blue-green (time-shared)") on a real `glidepath up`: one simulated GPU, v1 serving. Under steady
// streaming traffic: deploy green (v2 loads on v1's GPU and sleeps), swap (v1 sleeps, v2 wakes),
// roll back (the reverse). Every request is served; both versions run on the one GPU the model
// holds; each switch reports the wake it waited for.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadAgent, streamChat } from '../helpers/e2e-up.js';
import { upForFile } from '../helpers/e2e-file.js';
import type { StreamResult, UpProcess } from '../helpers/e2e-up.js';

const WAKE_MS = 300;

function yaml(dataDir: string): string {
  const v = (id: string, seed: number) =>
    `{ id: ${id}, replicas: 1, provider: { kind: sim, sim: { seed: ${seed}, inter_token_ms: 5, jitter: 0, wake_ms: ${WAKE_MS} } } }`;
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 1, memory_gb: 80 }',
    'models:',
    '  - name: m',
    '    time_shared_standby: true',
    `    versions: [${v('v1', 1)}, ${v('v2', 2)}]`,
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

const file = upForFile('e2e-time-shared-standby', yaml);
let up: UpProcess;
beforeAll(() => {
  up = file.current();
});

describe('a time-shared standby', () => {
  it('deploy, swap and rollback on one GPU under traffic: every request served, each switch a wake', async () => {
    const results: StreamResult[] = [];
    let stop = false;
    const agent = loadAgent(4);
    const clients = Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        while (!stop) results.push(await streamChat(up.dataUrl, { model: 'm', prompt: `client ${i}`, maxTokens: 16, dispatcher: agent }));
      }),
    );
    try {
      const deployed = await up.ok<{ version: string; status: string }>('POST', '/models/m/deploy', { version: 'v2' });
      expect(deployed).toMatchObject({ version: 'v2', status: 'ready' });
      const workers = await up.ok<{ version: string; gpus: string[]; state: string }[]>('GET', '/workers?model=m');
      expect(workers.map((w) => [w.version, w.gpus, w.state]).sort()).toEqual([
        ['v1', ['0'], 'ready'],
        ['v2', ['0'], 'sleeping'],
      ]);
      const swap = await up.ok<{ to: string; wake_ms: number; held_ms: number }>('POST', '/models/m/swap', {});
      expect(swap.to).toBe('v2');
      expect(swap.wake_ms).toBeGreaterThanOrEqual(WAKE_MS);
      const back = await up.ok<{ rolled_back_to: string; wake_ms: number; method: string }>('POST', '/models/m/rollback', { reason: 'test' });
      expect(back).toMatchObject({ rolled_back_to: 'v1', method: 'sleep_wake_route_switch' });
      expect(back.wake_ms).toBeGreaterThanOrEqual(WAKE_MS);
      const gpus = await up.ok<{ holder: { model: string } | null }[]>('GET', '/gpus');
      expect(gpus.map((g) => g.holder?.model)).toEqual(['@m']);
      console.log(
        `time-shared standby: swap held requests ${Math.round(swap.held_ms)} ms (wake ${Math.round(swap.wake_ms)} ms); rollback wake ${Math.round(back.wake_ms)} ms`,
      );
    } finally {
      stop = true;
      await clients;
      await agent.close();
    }
    expect(results.filter((r) => !r.ok).map((r) => r.error)).toEqual([]);
    expect(new Set(results.map((r) => r.version))).toEqual(new Set(['v1', 'v2']));
  }, 60_000);

  it('refuses a canary, and a route by hand to the sleeping version or a split: two versions cannot be awake on its GPUs', async () => {
    const r = await up.admin('POST', '/models/m/canary', { version: 'v2' });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ error: { code: 'time_shared_standby' } });
    for (const weights of [
      { v1: 0, v2: 1 },
      { v1: 90, v2: 10 },
    ]) {
      const put = await up.admin('PUT', '/models/m/route', { weights });
      expect(put.status).toBe(409);
      expect(put.body).toMatchObject({ error: { code: 'time_shared_standby' } });
    }
  });
});
