// Reading an engine's vLLM metrics, and the capacity learned from them.
import { describe, expect, it } from 'vitest';
import { EngineLoad, parseEngineMetrics } from '../../../src/gateway/engine-load.js';
import { SimMetrics } from '../../../src/sim/metrics.js';

describe('parseEngineMetrics', () => {
  it('sums the series over label sets, keeps the fullest KV cache, reads tab-separated samples, and skips comments, other series, odd label values and samples without a value', () => {
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
      'vllm:num_requests_running{model_name="y"}',
      'vllm:num_requests_waiting\t1\t1732500000000',
      'vllm:time_to_first_token_seconds_bucket{le="0.1"} 5',
      '',
    ].join('\n');
    expect(parseEngineMetrics(text)).toEqual({ running: 5, waiting: 5, generationTokens: 1234, kvUsage: 0.75 });
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
  const full = { waiting: 2 };

  it('starts at the configured worth; an engine with room proves at least its throughput', () => {
    const l = new EngineLoad(100);
    l.observe(at(0), 0, 8);
    expect(l.tokensPerS).toBeNaN();
    l.observe(at(50), 1000, 8);
    expect([l.tokensPerS, l.saturated, l.capacity]).toEqual([50, false, 100]);
    l.observe(at(250), 2000, 8);
    expect([l.tokensPerS, l.capacity]).toEqual([200, 200]);
  });

  it('saturated at both ends of an interval (sequences waiting, KV cache full, max_num_seqs running, every gateway slot busy), its throughput is its capacity: first as measured, then moved by an EMA', () => {
    const l = new EngineLoad(1000);
    l.observe(at(0), 0, 4);
    // full only at the end of the interval: mostly idle time, it says nothing
    l.observe(at(100, full), 1000, 4);
    expect([l.saturated, l.capacity]).toEqual([true, 1000]);
    l.observe(at(400, { running: 4 }), 2000, 4);
    expect(l.capacity).toBe(300);
    l.observe(at(600, { kvUsage: 0.97 }), 3000, undefined);
    expect(l.capacity).toBeCloseTo(300 + 0.3 * (200 - 300), 10);
    l.observe(at(1000), 4000, 4, true);
    expect(l.saturated).toBe(true);
    expect(l.capacity).toBeCloseTo(270 + 0.3 * (400 - 270), 10);
    // a full engine that generated nothing (stalled: health's business) says nothing of its capacity
    const before = l.capacity;
    l.observe(at(1000, full), 5000, 4);
    expect(l.capacity).toBe(before);
  });

  it('a learned capacity below the configured worth drifts back to it while the engine has room (an idle model earns its way back)', () => {
    const l = new EngineLoad(1000);
    l.observe(at(0, full), 0, 4);
    l.observe(at(100, full), 1000, 4);
    expect(l.capacity).toBe(100);
    let t = 1000;
    const seen: number[] = [];
    for (let i = 0; i < 30; i++) {
      t += 1000;
      l.observe(at(100), t, 4); // nothing generated: idle, with room
      seen.push(l.capacity);
    }
    expect(seen[0]).toBeCloseTo(100 + 0.1 * 900, 10);
    expect(seen.every((c, i) => i === 0 || c > (seen[i - 1] as number))).toBe(true);
    expect(seen.at(-1)).toBeGreaterThan(950);
    expect(seen.at(-1)).toBeLessThanOrEqual(1000);
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
