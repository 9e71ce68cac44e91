// The llama.cpp engine's settings: what `glidepath engine` takes on its command line, with defaults.
import path from 'node:path';
import { availableParallelism } from 'node:os';
import { DEFAULTS } from '../defaults.js';

export interface EngineOptions {
  /** The GGUF file. */
  modelPath: string;
  /** The name requests use (vLLM's --served-model-name); default: the file's name without .gguf. */
  model: string;
  /** Extra names it answers to. */
  servedModelNames: string[];
  /** The version label of its metrics (/version and glidepath_engine_info). */
  version: string;
  host: string;
  port: number;
  /** Sequences generated at once (vLLM's --max-num-seqs): each has its own context of `contextSize`. */
  maxNumSeqs: number;
  /** Requests waiting for a sequence at most; past it: 503 queue_full. */
  maxWaitingRequests: number;
  /** Tokens per sequence (prompt + completion; vLLM's --max-model-len); 0: the model's own, at most 4096. */
  contextSize: number;
  /**
   * CPU threads llama.cpp uses. Default: one fewer than the cores (at least one), leaving a core to
   * the event loop: llama.cpp's threads spin while they wait for each other, and with as many as
   * the cores (its own default) they fight Node's threads; measured on a 2-core machine with the
   * tiny test model, 20 tokens took 8 ms on 1 thread, 277 ms on 2 and 5 s on 4 (docs/engines.md).
   */
  threads: number;
  /**
   * Every sequence evaluated on its own (a llama.cpp context each) instead of batched with the
   * others: llama.cpp's results for a sequence change in their last bits with how many rows share
   * its evaluation, enough to flip a greedy choice now and then, so only a batch-invariant engine
   * gives a stream resumed on another worker exactly the text it would have had (vLLM's
   * VLLM_BATCH_INVARIANT is the same trade). Costs throughput when many sequences run at once.
   */
  batchInvariant: boolean;
  /** LoRA adapters loaded at once (vLLM's --max-loras); 0: none (`lora_disabled`). Each has contexts of its own, as much KV memory as the base model's. */
  maxLoras: number;
  maxLogprobs: number;
  maxBodyBytes: number;
  /** max_tokens of a completion that names none (OpenAI's and vLLM's 16). */
  defaultCompletionTokens: number;
}

export type EngineStartOptions = Partial<EngineOptions> & { modelPath: string };

const D = DEFAULTS.engine;

export function engineOptions(o: EngineStartOptions): EngineOptions {
  return {
    modelPath: o.modelPath,
    model: o.model ?? path.basename(o.modelPath).replace(/\.gguf$/i, ''),
    servedModelNames: o.servedModelNames ?? [],
    version: o.version ?? 'v1',
    host: o.host ?? '127.0.0.1',
    port: o.port ?? 0,
    maxNumSeqs: o.maxNumSeqs ?? D.maxNumSeqs,
    maxWaitingRequests: o.maxWaitingRequests ?? D.maxWaitingRequests,
    contextSize: o.contextSize ?? 0,
    threads: o.threads ?? Math.max(1, availableParallelism() - 1),
    batchInvariant: o.batchInvariant ?? false,
    maxLoras: o.maxLoras ?? 0,
    maxLogprobs: o.maxLogprobs ?? D.maxLogprobs,
    maxBodyBytes: o.maxBodyBytes ?? DEFAULTS.sim.maxBodyBytes,
    defaultCompletionTokens: o.defaultCompletionTokens ?? D.defaultCompletionTokens,
  };
}
