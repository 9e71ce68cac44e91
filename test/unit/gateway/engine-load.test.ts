// Reading an engine's vLLM metrics, and the capacity learned from them.
import { describe, expect, it } from 'vitest';
import { EngineLoad, parseEngineMetrics } from '../../../src/gateway/engine-load.js';
import { SimMetrics } from '../../../src/sim/metrics.js';

describe('parseEngineMetrics', () => {
  it('sums the series over label sets, keeps the fullest KV cache, and skips comments, other series and odd label values', () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="llama"} 3',
      'vllm:num_requests_running{engine="1",model_name="llama"} 2.0',
      'vllm:num_requests_waiting{model_name="a \\"quoted} name\\" {x}"} 4 1732500000000',
      'vllm:num_requests_waiting_by_reason{reason="capacity"} 99',
      'vllm:generation_tokens_total{model_name="llama"} 1.2e3',
      'vllm:generation_tokens_total{model_name="llama",lora="sql"} 34',
      'vllm:kv_cache_usage_perc{engine="0"} 0.5',
      'vllm:kv_cache_usage_perc{engine="1"} 0.75',
      'vllm:gpu_cache_usage_perc 0.1',
      'vllm:num_requests_running{model_name="x"} NaN',
      'vllm:num_requests_running{model_name="x"} not-a-number',
      'vllm:time_to_first_token_seconds_bucket{le="0.1"} 5',
      '',
    ].join('\n');
    expect(parseEngineMetrics(text)).toEqual({ running: 5, waiting: 4, generationTokens: 1234, kvUsage: 0.75 });
  });

  it("reads vLLM's older KV name when the newer is absent, and nothing from text that is not an exposition", () => {
    expect(parseEngineMetrics('vllm:gpu_cache_usage_perc{model_name="m"} 0.3\r\nvllm:num_requests_waiting 0\r\n')).toEqual({ kvUsage: 0.3, waiting: 0 });
    expect(parseEngineMetrics('<html>vllm</html>\n{"vllm:num_requests_running": 3}')).toEqual({});
  });

  it("reads the simulator's own exposition", async () => {
    const m = new SimMetrics('sim-model', 'v1', 1, {
      running: () => 2,
      waiting: () => 1,
      kvUsage: () => 0.25,
      loras: () => ({ running: [], waiting: [], max: 0 }),
      sleepLevel: () => 0,
    });
    m.generated(42);
    expect(parseEngineMetrics(await m.text())).toEqual({ running: 2, waiting: 1, kvUsage: 0.25, generationTokens: 42 });
  });
});

describe('EngineLoad', () => {
  const at = (tokens: number, o: { running?: number; waiting?: number; kvUsage?: number } = {}) => ({
    generationTokens: tokens,
    running: 1,
    waiting: 0,
    kvUsage: 0.1,
    ...o,
  });

  it('starts at the configured worth; an engine with room proves at least its throughput, never less', () => {
    const l = new EngineLoad(100);
    l.observe(at(0), 0, 8);
    expect(l.tokensPerS).toBeNaN();
    l.observe(at(50), 1000, 8);
    expect([l.tokensPerS, l.saturated, l.capacity]).toEqual([50, false, 100]);
    l.observe(at(250), 2000, 8);
    expect([l.tokensPerS, l.capacity]).toEqual([200, 200]);
  });

  it('saturated (sequences waiting, KV cache full, or max_num_seqs running), its throughput is its capacity: first as measured, then moved by an EMA', () => {
    const l = new EngineLoad(1000);
    l.observe(at(0), 0, 4);
    l.observe(at(300, { waiting: 2 }), 1000, 4);
    expect([l.saturated, l.capacity]).toEqual([true, 300]);
    l.observe(at(500, { running: 4 }), 2000, 4);
    expect(l.capacity).toBeCloseTo(300 + 0.3 * (200 - 300), 10);
    l.observe(at(900, { kvUsage: 0.97 }), 3000, undefined);
    expect(l.capacity).toBeCloseTo(270 + 0.3 * (400 - 270), 10);
    // requests waiting in the gateway for the worker's slots: full as well
    l.observe(at(1100, { running: 2 }), 3500, 4, true);
    expect(l.saturated).toBe(true);
    // an idle saturated reading (nothing generated: a stalled engine) says nothing of its capacity
    const before = l.capacity;
    l.observe(at(1100, { waiting: 3 }), 4000, 4);
    expect(l.capacity).toBe(before);
  });

  it('a restarted engine (its counter back to 0) gives no rate for that interval; a failed read keeps the capacity and says why', () => {
    const l = new EngineLoad(100);
    l.observe(at(1000), 0, 8);
    l.observe(at(10), 1000, 8);
    expect(l.tokensPerS).toBeNaN();
    l.failed(2000, 'GET http://w/metrics answered 404');
    expect([l.capacity, l.error, l.at]).toEqual([100, 'GET http://w/metrics answered 404', 2000]);
    l.observe(at(110), 3000, 8);
    expect(l.error).toBeUndefined();
    expect(l.tokensPerS).toBe(50);
  });
});
