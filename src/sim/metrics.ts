// Simulator metrics: vLLM's names and types with a `model_name` label, plus injected-fault counters.
//
// Every worker has its own prom-client Registry. The per-token inter-token-latency histogram is
// array-backed (observing n tokens at once costs one bucket search, not n) and renders through the
// same registry.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ArrayHistogram } from '../telemetry/prom.js';
import type { HistogramChild } from '../telemetry/prom.js';

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

export type FaultKind = 'error' | 'crash' | 'stall' | 'garbage' | 'hang' | 'latency' | 'corrupt' | 'drift' | 'flap' | 'process_exit';
export const FAULT_KINDS: readonly FaultKind[] = ['error', 'crash', 'stall', 'garbage', 'hang', 'latency', 'corrupt', 'drift', 'flap', 'process_exit'];

export interface EngineState {
  running(): number;
  waiting(): number;
  kvUsage(): number;
  loras(): { running: string[]; waiting: string[]; max: number };
  sleepLevel(): number;
}

export class SimMetrics {
  readonly registry = new Registry();
  private readonly l: { model_name: string };
  private readonly ttft: Histogram<'model_name'>;
  private readonly e2e: Histogram<'model_name'>;
  private readonly queue: Histogram<'model_name'>;
  private readonly itl: HistogramChild;
  private readonly promptTokens: Counter<'model_name'>;
  private readonly genTokens: Counter<'model_name'>;
  private readonly success: Counter<'model_name' | 'finished_reason'>;
  private readonly faults: Counter<'model_name' | 'kind'>;
  /** Label objects per finish reason, built once (this runs per request). */
  private readonly reasonLabels = new Map<string, { model_name: string; finished_reason: string }>();

  /**
   * `identity`: which engine this is; the llama.cpp engine (src/engine/) shares these metrics under
   * its own identity gauge and without the fault counters (it injects none).
   */
  constructor(model: string, version: string, seed: number, state: EngineState, identity: 'sim' | 'llama.cpp' = 'sim') {
    const r = this.registry;
    const l = (this.l = { model_name: model });
    const gauge = (name: string, help: string, get: () => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['model_name'],
        registers: [r],
        collect() {
          this.set(l, get());
        },
      });
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', () => state.running());
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', () => state.waiting());
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', () => state.kvUsage());
    new Gauge({
      name: 'vllm:lora_requests_info',
      help: 'Running stats on lora requests.',
      labelNames: ['running_lora_adapters', 'max_lora', 'waiting_lora_adapters'],
      registers: [r],
      collect() {
        const s = state.loras();
        this.reset();
        this.set({ running_lora_adapters: s.running.join(','), max_lora: String(s.max), waiting_lora_adapters: s.waiting.join(',') }, Date.now() / 1000);
      },
    });
    const hist = (name: string, help: string, buckets: number[]) => new Histogram({ name, help, labelNames: ['model_name'], buckets, registers: [r] });
    this.ttft = hist('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', TTFT_BUCKETS);
    this.e2e = hist('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', E2E_BUCKETS);
    this.queue = hist('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', E2E_BUCKETS);
    this.itl = new ArrayHistogram({
      name: 'vllm:inter_token_latency_seconds',
      help: 'Histogram of inter-token latency in seconds.',
      labelNames: ['model_name'],
      buckets: ITL_BUCKETS,
      registers: [r],
    }).labels(model);
    this.promptTokens = new Counter({
      name: 'vllm:prompt_tokens_total',
      help: 'Number of prefill tokens processed.',
      labelNames: ['model_name'],
      registers: [r],
    });
    this.genTokens = new Counter({
      name: 'vllm:generation_tokens_total',
      help: 'Number of generation tokens processed.',
      labelNames: ['model_name'],
      registers: [r],
    });
    this.success = new Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: ['model_name', 'finished_reason'],
      registers: [r],
    });
    this.faults = new Counter({
      name: 'glidepath_sim_faults_injected_total',
      help: 'Faults the simulator injected on purpose, by kind.',
      labelNames: ['model_name', 'kind'],
      registers: identity === 'sim' ? [r] : [],
    });
    for (const kind of FAULT_KINDS) this.faults.inc({ ...l, kind }, 0);
    this.promptTokens.inc(l, 0);
    this.genTokens.inc(l, 0);
    if (identity === 'sim') {
      new Gauge({
        name: 'glidepath_sim_info',
        help: 'Simulator identity (value is always 1).',
        labelNames: ['model_name', 'version', 'seed'],
        registers: [r],
      }).set({ ...l, version, seed: String(seed) }, 1);
      gauge('glidepath_sim_sleep_level', 'Sleep level of the simulated engine (0 = awake).', () => state.sleepLevel());
    } else {
      new Gauge({
        name: 'glidepath_engine_info',
        help: 'Engine identity (value is always 1).',
        labelNames: ['model_name', 'version', 'engine'],
        registers: [r],
      }).set({ ...l, version, engine: identity }, 1);
      gauge('glidepath_engine_sleep_level', 'Sleep level of the engine (0 = awake; asleep, the model is unloaded).', () => state.sleepLevel());
    }
  }

  firstToken(ttftS: number, queueS: number, promptTokens: number): void {
    this.ttft.observe(this.l, ttftS);
    this.queue.observe(this.l, queueS);
    this.promptTokens.inc(this.l, promptTokens);
  }

  /** `n` tokens with inter-token latency `itlS` each. */
  tokens(itlS: number, n: number): void {
    if (n > 0) this.itl.observe(itlS, n);
  }

  /** `n` tokens generated: counted as they are (as vLLM counts every step), so a scrape mid-stream sees the throughput. */
  generated(n: number): void {
    if (n > 0) this.genTokens.inc(this.l, n);
  }

  finished(e2eS: number, reason: string): void {
    this.e2e.observe(this.l, e2eS);
    let labels = this.reasonLabels.get(reason);
    if (!labels) this.reasonLabels.set(reason, (labels = { ...this.l, finished_reason: reason }));
    this.success.inc(labels);
  }

  fault(kind: FaultKind): void {
    this.faults.inc({ ...this.l, kind });
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
