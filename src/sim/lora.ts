// LoRA adapters: load/unload with vLLM's request shapes, messages and statuses, and max_loras slots.
import { BadRequestError, NotFoundError } from '../errors.js';

export interface Adapter {
  name: string;
  path: string;
  loadedAt: number;
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

  list(): Adapter[] {
    return [...this.adapters.values()];
  }

  /** `POST /v1/load_lora_adapter {lora_name, lora_path}` → the success text, or throws vLLM's error. */
  load(body: unknown): string {
    const name = field(body, 'lora_name');
    const path = field(body, 'lora_path');
    if (!name || !path) throw new BadRequestError('invalid_lora_request', "Both 'lora_name' and 'lora_path' must be provided.");
    if (this.adapters.has(name)) throw new BadRequestError('lora_already_loaded', `The lora adapter '${name}' has already been loaded.`);
    if (this.reserved(name)) throw new BadRequestError('invalid_lora_request', `The name '${name}' is already used by a served model.`);
    if (this.maxLoras === 0) throw new BadRequestError('lora_disabled', 'LoRA is not enabled on this worker (max_loras = 0).');
    if (this.adapters.size >= this.maxLoras) {
      throw new BadRequestError(
        'lora_slots_full',
        `Failed to load LoRA adapter '${name}': all ${this.maxLoras} LoRA slots are in use (max_loras=${this.maxLoras}); unload an adapter first.`,
      );
    }
    this.adapters.set(name, { name, path, loadedAt: Math.floor(Date.now() / 1000) });
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
