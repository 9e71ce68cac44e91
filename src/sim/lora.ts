// LoRA adapters: load/unload with vLLM's request shapes, messages and statuses, and max_loras slots.
import { BadRequestError, NotFoundError } from '../errors.js';

export interface Adapter {
  name: string;
  path: string;
  loadedAt: number;
  /** The simulator's knobs for this adapter's requests, from `lora_path`'s query (docs/simulator.md, "LoRA adapters"). */
  knobs: AdapterKnobs;
}

/**
 * How an adapter's answers differ from its base model's, given in its `lora_path` as a query
 * (`/adapters/sql-v2?hallucination_rate=0.14&latency_multiplier=1.5&error_rate=0.05`): what a
 * worse adapter version looks like, so that an adapter canary has something to catch.
 */
export interface AdapterKnobs {
  hallucinationRate?: number | undefined;
  latencyMultiplier?: number | undefined;
  errorRate?: number | undefined;
}

const KNOBS: Record<string, { key: keyof AdapterKnobs; ok: (v: number) => boolean; what: string }> = {
  hallucination_rate: { key: 'hallucinationRate', ok: (v) => v >= 0 && v <= 1, what: 'a number from 0 to 1' },
  error_rate: { key: 'errorRate', ok: (v) => v >= 0 && v <= 1, what: 'a number from 0 to 1' },
  latency_multiplier: { key: 'latencyMultiplier', ok: (v) => v > 0 && v <= 100, what: 'a number above 0, at most 100' },
};

/** The knobs in a `lora_path`'s query; an unknown knob or a bad value is vLLM's 400 naming it. */
export function adapterKnobs(path: string): AdapterKnobs {
  const q = path.indexOf('?');
  const out: AdapterKnobs = {};
  if (q === -1) return out;
  for (const [k, raw] of new URLSearchParams(path.slice(q + 1))) {
    const knob = KNOBS[k];
    if (knob === undefined)
      throw new BadRequestError('invalid_lora_request', `lora_path: unknown simulator knob ${JSON.stringify(k)} (known: ${Object.keys(KNOBS).join(', ')})`);
    const v = raw.trim() === '' ? NaN : Number(raw);
    if (!Number.isFinite(v) || !knob.ok(v))
      throw new BadRequestError('invalid_lora_request', `lora_path: ${k} must be ${knob.what}, got ${JSON.stringify(raw)}`);
    out[knob.key] = v;
  }
  return out;
}

function field(body: unknown, key: string): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const v = (body as Record<string, unknown>)[key];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

export class LoraRegistry {
  private readonly adapters = new Map<string, Adapter>();
  /** Requests currently running per adapter (for vllm:lora_requests_info). */
  private readonly active = new Map<string, number>();

  constructor(
    private readonly maxLoras: number,
    private readonly reserved: (name: string) => boolean,
  ) {}

  has(name: string): boolean {
    return this.adapters.has(name);
  }

  /** The knobs of a loaded adapter (none: answered like its base model). */
  knobs(name: string): AdapterKnobs | undefined {
    return this.adapters.get(name)?.knobs;
  }

  list(): Adapter[] {
    return [...this.adapters.values()];
  }

  /** `POST /v1/load_lora_adapter {lora_name, lora_path}` → the success text, or throws vLLM's error. */
  load(body: unknown): string {
    const name = field(body, 'lora_name');
    const path = field(body, 'lora_path');
    if (!name || !path) throw new BadRequestError('invalid_lora_request', "Both 'lora_name' and 'lora_path' must be provided.");
    const knobs = adapterKnobs(path);
    if (this.adapters.has(name)) throw new BadRequestError('lora_already_loaded', `The lora adapter '${name}' has already been loaded.`);
    if (this.reserved(name)) throw new BadRequestError('invalid_lora_request', `The name '${name}' is already used by a served model.`);
    if (this.maxLoras === 0) throw new BadRequestError('lora_disabled', 'LoRA is not enabled on this worker (max_loras = 0).');
    if (this.adapters.size >= this.maxLoras) {
      throw new BadRequestError(
        'lora_slots_full',
        `Failed to load LoRA adapter '${name}': all ${this.maxLoras} LoRA slots are in use (max_loras=${this.maxLoras}); unload an adapter first.`,
      );
    }
    this.adapters.set(name, { name, path, loadedAt: Math.floor(Date.now() / 1000), knobs });
    return `Success: LoRA adapter '${name}' added successfully.`;
  }

  /** `POST /v1/unload_lora_adapter {lora_name}`. */
  unload(body: unknown): string {
    const name = field(body, 'lora_name');
    if (!name) throw new BadRequestError('invalid_lora_request', "'lora_name' needs to be provided to unload a LoRA adapter.");
    if (!this.adapters.has(name)) throw new NotFoundError('lora_not_found', `The lora adapter '${name}' cannot be found.`);
    this.adapters.delete(name);
    return `Success: LoRA adapter '${name}' removed successfully.`;
  }

  begin(name: string): void {
    this.active.set(name, (this.active.get(name) ?? 0) + 1);
  }

  end(name: string): void {
    const n = (this.active.get(name) ?? 1) - 1;
    if (n <= 0) this.active.delete(name);
    else this.active.set(name, n);
  }

  running(): string[] {
    return [...this.active.keys()];
  }
}
