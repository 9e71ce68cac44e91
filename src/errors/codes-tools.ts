// Error codes of the tools beside the gateway: the engine simulator's API and the CLI.
// One part of the error catalogue (src/errors/catalogue.ts joins the parts in this order).
import type { Row } from './row.js';

export const TOOL_CODES = {
  // -- the simulator (its OpenAI- and vLLM-compatible API) --
  context_length_exceeded: [400, "Simulator: prompt plus max_tokens exceed the model's context.", 'Send less.'],
  kv_capacity_exceeded: [400, 'Simulator: the request needs more KV cache than the worker has.', 'Send less, or raise the simulated KV capacity.'],
  queue_full: [503, 'Simulator: its waiting queue is full.', 'Retry; add workers.'],
  model_loading: [503, 'Simulator: the model is still loading (requests, sleep).', 'Retry after the delay.'],
  engine_sleeping: [503, 'Simulator: the engine sleeps.', 'POST /wake_up first.'],
  invalid_sleep_level: [400, 'Simulator: a sleep level other than 1 or 2.', 'Pass 1 or 2.'],
  invalid_faults: [400, 'Simulator: a fault set that fails its schema.', 'Fix the fields named.'],
  injected_fault: [500, 'Simulator: an error injected by its fault set (the status the fault names).', 'Nothing; a test asked for it.'],
  kv_role_mismatch: [
    400,
    'Simulator (disaggregated serving): a prefill leg sent to a decode worker, or a decode leg to a prefill worker.',
    'Send each leg to a worker of its role.',
  ],
  kv_layout_mismatch: [
    500,
    'Simulator (disaggregated serving): a decode worker was given KV blocks of another layout (another card: block size, TP, tokenizer) — a prefill and a decode worker of different pools.',
    'Pair workers of the same pool only.',
  ],
  kv_blocks_not_found: [
    404,
    'Simulator: a pull of KV blocks this prefill worker does not hold (never prefilled here, pulled already, or expired).',
    'Pull each transfer once, within its hold time.',
  ],
  kv_transfer_failed: [
    503,
    'Simulator: a decode worker could not pull the KV blocks from the prefill worker named in `kv_transfer_params`.',
    'Retry the pair; check the prefill worker.',
  ],
  kv_transfer_full: [
    503,
    'Simulator: a prefill worker holds as many transfers as it may; decode workers have not pulled them.',
    'Retry after the delay; send the decode legs.',
  ],
  invalid_url: [400, 'Simulator: a malformed request URL.', 'Fix the client.'],
  invalid_lora_request: [400, 'Simulator: a LoRA load without both `lora_name` and `lora_path`.', 'Send both.'],
  lora_disabled: [400, 'Simulator: LoRA requests to a worker with `max_loras = 0`.', 'Enable LoRA on the worker.'],
  lora_already_loaded: [400, 'Simulator: loading an adapter twice.', 'Nothing to do.'],
  lora_not_found: [404, 'Simulator: an unknown adapter.', 'Load it first.'],
  lora_slots_full: [400, 'Simulator: every LoRA slot is taken.', 'Unload an adapter, or raise `max_loras`.'],
  judge_format: [400, "Simulator: a judge request that is not in the judge's prompt format.", 'Use the format of src/analysis/llmjudge.ts.'],

  // -- the CLI --
  api_unreachable: [503, 'CLI: the admin API cannot be reached.', 'Start `glidepath up`, or set GLIDEPATH_URL / --url.'],
  stream_broken: [
    503,
    'CLI: the progress stream of a long operation (deploy, canary start) broke.',
    'Look at `glidepath status`; the operation may have gone on.',
  ],
  invalid_response: [
    502,
    'CLI: the admin API answered with a body that is not JSON, or an error without an error body (a proxy in between?).',
    "Check GLIDEPATH_URL points at `glidepath up`'s admin listener.",
  ],
  stream_incomplete: [503, 'CLI: the progress stream ended without a result (the server stopped?).', "Look at `glidepath status` and the server's log."],
} as const satisfies Record<string, Row>;
