// A set of llama.cpp sequences that requests take turns on: the base model's, or one LoRA adapter's (its own contexts, the adapter applied to them), with its queue and a wait for its last request.
import type { LlamaContext, LlamaModel, LlamaSequence } from './binding.js';
import { Slots } from './slots.js';

export interface PoolShape {
  /** Sequences generated at once. */
  sequences: number;
  /** Tokens per sequence. */
  contextSize: number;
  threads: number;
  /** A context per sequence (see EngineOptions.batchInvariant). */
  batchInvariant: boolean;
  maxWaiting: number;
}

export class Pool {
  readonly slots: Slots<LlamaSequence>;
  /** Tokens per sequence, as llama.cpp gave them. */
  readonly contextSize: number;
  private idle: (() => void) | undefined;
  private closing = false;
  private closed: Promise<void> | undefined;

  private constructor(
    private readonly contexts: LlamaContext[],
    shape: PoolShape,
  ) {
    this.slots = new Slots(shape.maxWaiting);
    const first = contexts[0] as LlamaContext;
    // node-llama-cpp's contextSize is per sequence (each gets its own cells)
    this.contextSize = first.contextSize;
    this.slots.fill(Array.from({ length: shape.sequences }, (_, i) => (contexts[i] ?? first).getSequence()));
  }

  /** The contexts and sequences of `model`, with the LoRA adapter at `adapter` applied to them. */
  static async create(model: LlamaModel, shape: PoolShape, adapter?: string): Promise<Pool> {
    const n = shape.sequences;
    const lora = adapter === undefined ? {} : { lora: { adapters: [{ filePath: adapter }] } };
    const make = (contextSize: number, sequences: number) => model.createContext({ contextSize, sequences, threads: shape.threads, ...lora });
    const contexts: LlamaContext[] = [];
    try {
      // batch-invariant: a context per sequence, so that every evaluation holds one sequence's tokens only
      if (shape.batchInvariant) for (let i = 0; i < n; i++) contexts.push(await make(shape.contextSize, 1));
      else contexts.push(await make(shape.contextSize, n));
      return new Pool(contexts, shape);
    } catch (e) {
      for (const c of contexts) await c.dispose();
      throw e;
    }
  }

  /** A request ended on `seq` (its history cleared): the sequence goes back, or once the pool is closing is let go. */
  finished(seq: LlamaSequence): void {
    if (this.closing) {
      seq.dispose();
      this.slots.running--;
    } else this.slots.release(seq);
    if (this.slots.running === 0) {
      this.idle?.();
      this.idle = undefined;
    }
  }

  /** Refuse the waiting requests with `err`, wait for the running ones, then free the contexts; closing twice waits for the one closing. */
  close(err: Error): Promise<void> {
    this.closed ??= (async () => {
      this.closing = true;
      this.slots.refuseWaiting(err);
      if (this.slots.running > 0) await new Promise<void>((r) => (this.idle = r));
      for (const s of this.slots.drain()) s.dispose();
      for (const c of this.contexts) await c.dispose();
    })();
    return this.closed;
  }
}
