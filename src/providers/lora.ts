// Loading LoRA adapters onto a worker's engine through vLLM's runtime endpoints
// (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`): the gateway asks, the engine loads from `lora_path`.
// The simulator and `glidepath engine` serve the same endpoints and messages.
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
import type { AdapterLoader } from '../gateway/adapters.js';

const TIMEOUT_MS = DEFAULTS.providers.adapterLoadTimeoutMs;

async function call(url: string, path: string, body: object): Promise<{ status: number; text: string }> {
  const res = await request(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
  });
  return { status: res.statusCode, text: (await res.body.text()).slice(0, 500) };
}

/** The engine's refusal, in its own words (vLLM answers `{"message": …}` or an OpenAI error body). */
function reason(text: string): string {
  try {
    const j = JSON.parse(text) as { message?: unknown; error?: { message?: unknown } };
    const m = j.error?.message ?? j.message;
    if (typeof m === 'string') return m;
  } catch {
    // not JSON: the text itself
  }
  return text;
}

async function unload(url: string, name: string): Promise<void> {
  const r = await call(url, '/v1/unload_lora_adapter', { lora_name: name });
  if (r.status !== 200 && r.status !== 404) throw new Error(`${r.status}: ${reason(r.text)}`);
}

export const httpAdapterLoader: AdapterLoader = {
  async load(url, name, source) {
    let r = await call(url, '/v1/load_lora_adapter', { lora_name: name, lora_path: source });
    if (r.status === 400 && /already been loaded/.test(r.text)) {
      // loaded there before (an earlier gateway run, an operator), perhaps from another source: loaded again from this one
      await unload(url, name);
      r = await call(url, '/v1/load_lora_adapter', { lora_name: name, lora_path: source });
    }
    if (r.status !== 200) throw new Error(`${r.status}: ${reason(r.text)}`);
  },
  unload,
};
