// Defaults of the engine simulator.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

import { MiB } from './units.js';

export const SIM = {
  sim: {
    /** Accept queue of the listener: uvicorn's default, what vLLM and SGLang listen with (Node's own is 511). */
    listenBacklog: 2048,
    /** Time until /health turns 200 after start (ms). Real 70B loads take 45–120 s; tests want fast. */
    loadTimeMs: 0,
    /** Prompt tokens per second during prefill (ms of TTFT = prompt tokens / rate). */
    prefillTokensPerS: 20_000,
    /** Base time between two generated tokens at one running sequence (ms). */
    interTokenMs: 0,
    /** Fractional ITL growth per additional running sequence (batching slows each decode step). */
    itlGrowthPerSeq: 0.01,
    /** Relative standard deviation of seeded timing jitter (0 = exact). */
    jitter: 0.1,
    /** KV capacity in tokens; requests beyond it wait in the queue. */
    kvCapacityTokens: 262_144,
    /** Most sequences running at once (vLLM's max_num_seqs). */
    maxNumSeqs: 256,
    /** Tokens generated when the request gives no max_tokens. */
    defaultMaxTokens: 64,
    /** Context window (prompt + completion tokens). */
    maxModelLen: 8_192,
    /** Share of generated words replaced by a marked ("hallucinated") word. */
    hallucinationRate: 0.03,
    /** LoRA slots (vLLM's --max-loras). */
    maxLoras: 4,
    /** A LoRA adapter's load: a rank-16 adapter of a 7B model (~50 MB) from local NVMe, read and copied to the GPU. */
    loraLoadMs: 50,
    /** Largest accepted request body. */
    maxBodyBytes: 4 * MiB,
    /** Model name served when none is given. */
    model: 'sim-model',
    /** Version id reported when none is given. */
    version: 'v1',
    /** Disaggregated serving: how long a prefill worker keeps a prompt's KV blocks for a decode worker to pull (vLLM's abort timeout). */
    kvHoldMs: 30_000,
    /** …and how many transfers it holds at most (then 503 kv_transfer_full). */
    kvMaxHeld: 4_096,
    /** A decode worker's pull of the blocks gives up after this long. */
    kvPullTimeoutMs: 5_000,
    /** Prompt tokens of KV a decode worker receives per second (charged instead of a prefill; RDMA-class). */
    kvTransferTokensPerS: 200_000,
    /** Name of the built-in judge model every simulator also serves. */
    judgeModel: 'judge',
    /** Chance per generated token that the sequence ends (EOS); mean answer ~100 tokens. */
    eosRate: 0.01,
    /** Requests waiting for a KV/sequence slot before new ones get 503 (bounded queue). */
    maxWaitingRequests: 4_096,
    /** Most top logprobs a request may ask for (vLLM's --max-logprobs default). */
    maxLogprobs: 20,
    /** HTTP status of injected errors when the fault names none. */
    faultErrorStatus: 500,
    /**
     * Wake from sleep level 1 (weights kept in CPU memory) and level 2 (discarded, read again), for a
     * simulator started by hand. A configured version's follow its size instead (config/load.ts).
     */
    wakeMs: 0,
    reloadMs: 0,
    /**
     * Requests a `glidepath sim` process serves itself before it listens (src/sim/warmup.ts), 16 at a
     * time with no delays: a fresh Node process runs its code unoptimised, and a simulator that met a
     * burst first answered it ~2× slower (bench:resilience: a kill's continuations sent to the
     * replacement admitted a moment before). vLLM likewise runs its model before it listens.
     */
    warmupRequests: 64,
    /** …and at most this many (~1.5 s here): a start's deadline (its load time + 15 s) does not count the warm-up. */
    maxWarmupRequests: 5_000,
    /** The warm-up's prefill rate: no delay worth a timer (its tokens come at 0 ms too). */
    warmupPrefillTokensPerS: 1e9,
    /** Number of candidate tokens the sampler draws from when temperature > 0. */
    sampleCandidates: 5,
    /** Healthy top-1 logprob lies in [-maxTopLogprobDepth - 0.01, -0.01]; health probes check this range. */
    maxTopLogprobDepth: 0.6,
    /** Silent corruption shifts every logprob down by this much (outside the healthy range). */
    corruptLogprobShift: 3,
    /** `glidepath sim` listen port when none is given (vLLM's default). */
    port: 8000,
    /**
     * Idle keep-alive connections are closed after this long: longer than any client's own idle
     * limit (the gateway closes its idle upstream connections after 4 s), so the simulator never
     * closes a connection under a request that is just being sent.
     */
    keepAliveTimeoutMs: 65_000,
    /** Encoded token literals kept for reuse; the vocabulary is a few hundred words, so this is only a bound. */
    jsonCacheMax: 4_096,
  },
  /** The llama.cpp engine on the CPU (`glidepath engine`, src/engine/). */
  engine: {
    /** Sequences generated at once: llama.cpp batches them; on a few CPU cores more only slows each. */
    maxNumSeqs: 4,
    /** Requests waiting for a sequence; past it 503 queue_full (a gateway in front queues itself). */
    maxWaitingRequests: 256,
    /** The most alternatives per token (vLLM's --max-logprobs default). */
    maxLogprobs: 20,
    /** max_tokens of a completion that names none: OpenAI's and vLLM's 16. */
    defaultCompletionTokens: 16,
    /** The context per sequence when the model's own is larger (memory: a CPU machine is not a GPU). */
    maxContextSize: 4096,
  },
} as const;
