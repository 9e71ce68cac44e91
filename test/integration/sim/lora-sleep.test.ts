import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { FakeClock } from '../../../src/sim/timing.js';
import { chat, get, post } from './helpers.js';

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ port: 0, maxLoras: 2 });
});
afterAll(() => sim.close());

const load = (name: string, path = `/adapters/${name}`) => post(sim.url, '/v1/load_lora_adapter', { lora_name: name, lora_path: path });
const unload = (name: string) => post(sim.url, '/v1/unload_lora_adapter', { lora_name: name });

describe('LoRA adapters', () => {
  it('loads, serves, lists and unloads adapters like vLLM', async () => {
    const r = await load('sql');
    expect(r.status).toBe(200);
    expect(r.text).toBe("Success: LoRA adapter 'sql' added successfully.");
    const models = await get(sim.url, '/v1/models');
    expect((models.json.data as { id: string }[]).find((m) => m.id === 'sql')).toMatchObject({ parent: 'sim-model', root: '/adapters/sql' });

    const base = await post(sim.url, '/v1/chat/completions', chat('adapter text', { max_tokens: 20, ignore_eos: true }));
    const viaLora = await post(sim.url, '/v1/chat/completions', chat('adapter text', { model: 'sql', max_tokens: 20, ignore_eos: true }));
    expect(viaLora.status).toBe(200);
    expect(viaLora.json.model).toBe('sql');
    expect(viaLora.json.choices[0].message.content).not.toBe(base.json.choices[0].message.content);

    const again = await load('sql');
    expect(again.status).toBe(400);
    expect(again.json.error.message).toBe("The lora adapter 'sql' has already been loaded.");

    const u = await unload('sql');
    expect(u.status).toBe(200);
    expect(u.text).toBe("Success: LoRA adapter 'sql' removed successfully.");
    const gone = await post(sim.url, '/v1/chat/completions', chat('x', { model: 'sql' }));
    expect(gone.status).toBe(404);
    const u2 = await unload('sql');
    expect(u2.status).toBe(404);
    expect(u2.json.error.message).toBe("The lora adapter 'sql' cannot be found.");
  });

  it('refuses to load past max_loras and after an unload succeeds', async () => {
    expect((await load('a')).status).toBe(200);
    expect((await load('b')).status).toBe(200);
    const full = await load('c');
    expect(full.status).toBe(400);
    expect(full.json.error.message).toMatch(/all 2 LoRA slots are in use/);
    await unload('a');
    expect((await load('c')).status).toBe(200);
    expect(sim.stats().adapters.sort()).toEqual(['b', 'c']);
    await unload('b');
    await unload('c');
  });

  it('rejects bad load/unload requests', async () => {
    const missing = await post(sim.url, '/v1/load_lora_adapter', { lora_name: 'x' });
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toBe("Both 'lora_name' and 'lora_path' must be provided.");
    const noName = await post(sim.url, '/v1/unload_lora_adapter', {});
    expect(noName.status).toBe(400);
    expect((await load('sim-model')).status).toBe(400);
    expect((await post(sim.url, '/v1/load_lora_adapter', 'nope', { 'content-type': 'application/json' })).status).toBe(400);
  });
});

describe('sleep mode', () => {
  it('level 1: sleeping rejects inference, wake_up restores it', async () => {
    expect((await get(sim.url, '/is_sleeping')).json).toEqual({ is_sleeping: false });
    expect((await post(sim.url, '/sleep?level=1', {})).status).toBe(200);
    expect((await get(sim.url, '/is_sleeping')).json).toEqual({ is_sleeping: true });
    expect(sim.stats().sleepLevel).toBe(1);
    const r = await post(sim.url, '/v1/chat/completions', chat('zzz'));
    expect(r.status).toBe(503);
    expect(r.json.error.code).toBe('engine_sleeping');
    expect((await get(sim.url, '/health')).status).toBe(200);
    expect((await post(sim.url, '/wake_up', {})).status).toBe(200);
    expect((await get(sim.url, '/is_sleeping')).json).toEqual({ is_sleeping: false });
    expect((await post(sim.url, '/v1/chat/completions', chat('awake', { max_tokens: 2 }))).status).toBe(200);
  });

  it('level 1: waking takes the wake time; level 2: the reload time (fake clock)', async () => {
    const clock = new FakeClock();
    const slow = await startSim({ port: 0, loadTimeMs: 80, wakeMs: 30, reloadMs: 80, clock });
    try {
      clock.advance(80); // initial load
      expect((await post(slow.url, '/sleep?level=1', {})).status).toBe(200);
      const woke = post(slow.url, '/wake_up', {});
      await once(slow.events, 'phase');
      clock.advance(29);
      expect(slow.stats().phase).toBe('waking');
      clock.advance(1);
      expect((await woke).status).toBe(200);
      expect((await post(slow.url, '/sleep?level=2', {})).status).toBe(200);
      expect(slow.stats().sleepLevel).toBe(2);
      const waking = once(slow.events, 'phase');
      const wake = post(slow.url, '/wake_up', {});
      expect(await waking).toEqual(['waking']);
      expect((await get(slow.url, '/is_sleeping')).json.is_sleeping).toBe(true);
      expect((await post(slow.url, '/v1/chat/completions', chat('not yet'))).status).toBe(503);
      clock.advance(79);
      expect(slow.stats().phase).toBe('waking');
      clock.advance(1);
      expect((await wake).status).toBe(200);
      expect((await get(slow.url, '/is_sleeping')).json.is_sleeping).toBe(false);
      expect(slow.stats().sleepLevel).toBe(0);
    } finally {
      await slow.close();
    }
  });

  it('rejects a bad level', async () => {
    const r = await post(sim.url, '/sleep?level=3', {});
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/level must be 1 or 2/);
  });
});
