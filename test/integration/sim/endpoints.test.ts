import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { FakeClock } from '../../../src/sim/timing.js';
import { OPTIONAL_TOOLS, findTool, itWithTool } from '../../helpers/tools.js';
import { call, chat, get, post } from './helpers.js';

// skipped where promtool is missing (a failure under CI, which installs it: test/helpers/tools.ts)
const itWithPromtool = itWithTool('promtool', OPTIONAL_TOOLS.promtool);

let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ port: 0, model: 'base', servedModelNames: ['alias'], version: 'v9', seed: 9 });
});
afterAll(() => sim.close());

/** promtool's lint objects to ':' in names, which is vLLM's naming; every other problem fails. */
function promtoolProblems(text: string): string[] {
  const r = spawnSync(findTool('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) throw r.error;
  const lines = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim() !== '');
  if (r.status !== 0 && r.status !== 3) return [`promtool exited ${r.status}: ${lines.join(' | ')}`];
  return lines.filter((l) => !/^vllm:\S+ metric names should not contain ':'$/.test(l.trim()));
}

describe('/metrics', () => {
  /** Traffic on both names first, so every family has samples; then /metrics. */
  async function metricsAfterTraffic() {
    await post(sim.url, '/v1/chat/completions', chat('metrics', { model: 'base', max_tokens: 5, ignore_eos: true }));
    await post(sim.url, '/v1/completions', { model: 'alias', prompt: 'x', max_tokens: 3, stream: true });
    return get(sim.url, '/metrics');
  }

  it('has vLLM names and model_name after traffic', async () => {
    const r = await metricsAfterTraffic();
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    const m = r.text;
    for (const [name, type] of [
      ['vllm:num_requests_running', 'gauge'],
      ['vllm:num_requests_waiting', 'gauge'],
      ['vllm:kv_cache_usage_perc', 'gauge'],
      ['vllm:time_to_first_token_seconds', 'histogram'],
      ['vllm:inter_token_latency_seconds', 'histogram'],
      ['vllm:e2e_request_latency_seconds', 'histogram'],
      ['vllm:prompt_tokens_total', 'counter'],
      ['vllm:generation_tokens_total', 'counter'],
      ['glidepath_sim_faults_injected_total', 'counter'],
    ]) {
      expect(m).toContain(`# TYPE ${name} ${type}`);
    }
    expect(m).toContain('vllm:generation_tokens_total{model_name="base"} 8');
    expect(m).toContain('vllm:inter_token_latency_seconds_count{model_name="base"} 6');
    expect(m).toContain('glidepath_sim_faults_injected_total{model_name="base",kind="crash"} 0');
    expect(m).toContain('glidepath_sim_info{model_name="base",version="v9",seed="9"} 1');
  });

  itWithPromtool('passes promtool check metrics after traffic', async () => {
    expect(promtoolProblems((await metricsAfterTraffic()).text)).toEqual([]);
  });

  itWithPromtool('the promtool check itself catches broken exposition', () => {
    expect(promtoolProblems('# TYPE x counter\nx{a="1" 1\n')).not.toEqual([]);
    expect(promtoolProblems('# HELP foo_count x\n# TYPE foo_count counter\nfoo_count 1\n')).not.toEqual([]);
  });
});

describe('service endpoints', () => {
  it('/health is 200 when loaded; /version; /v1/models lists names and aliases', async () => {
    expect((await get(sim.url, '/health')).status).toBe(200);
    expect((await get(sim.url, '/version')).json).toEqual({ version: 'v9' });
    const m = await get(sim.url, '/v1/models');
    expect(m.json.object).toBe('list');
    expect((m.json.data as { id: string }[]).map((d) => d.id)).toEqual(['base', 'alias', 'judge']);
    expect(m.json.data[0]).toMatchObject({ object: 'model', owned_by: 'vllm', root: 'base', parent: null, max_model_len: 8192 });
  });

  it('aliases generate the same text as the model name and echo the requested name', async () => {
    const a = await post(sim.url, '/v1/chat/completions', chat('alias', { model: 'base', max_tokens: 8 }));
    const b = await post(sim.url, '/v1/chat/completions', chat('alias', { model: 'alias', max_tokens: 8 }));
    expect(b.json.choices[0].message.content).toBe(a.json.choices[0].message.content);
    expect(b.json.model).toBe('alias');
  });

  it('unknown paths are 404 and wrong methods 405, with OpenAI error bodies', async () => {
    const r = await get(sim.url, '/v2/nothing');
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ type: 'not_found_error', code: 'not_found' });
    const m = await call(sim.url, 'GET', '/v1/chat/completions');
    expect(m.status).toBe(405);
    expect(m.headers.get('allow')).toBe('POST');
  });

  it('/health is 503 while loading, then 200; inference is 503 meanwhile; wake_up waits for the load', async () => {
    const clock = new FakeClock();
    const loading = await startSim({ port: 0, loadTimeMs: 60_000, clock });
    try {
      const h = await get(loading.url, '/health');
      expect(h.status).toBe(503);
      expect(h.json.error.code).toBe('model_loading');
      const r = await post(loading.url, '/v1/chat/completions', chat('early'));
      expect(r.status).toBe(503);
      let woke = false;
      const wake = post(loading.url, '/wake_up', {}).then((x) => {
        woke = true;
        return x;
      });
      await get(loading.url, '/health'); // the wake_up request has reached the server by now or soon; it must not resolve early
      expect(woke).toBe(false);
      clock.advance(60_000);
      expect((await wake).status).toBe(200);
      expect((await get(loading.url, '/health')).status).toBe(200);
    } finally {
      await loading.close();
    }
  });
});
