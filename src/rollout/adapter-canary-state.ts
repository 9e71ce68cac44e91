// An adapter canary's persisted state (docs/multi-model.md, "Adapter canaries"): a new version of a
// LoRA adapter beside the registered one on the same base-model workers, given a share of that
// adapter's requests stage by stage; the stages, looks and verdicts are the version canary's.
import type { StagedFields } from './canary-state.js';

/** One side of an adapter canary: where the engine loads it from, and the name it is loaded under. */
export interface AdapterSide {
  source: string;
  version: string | null;
  /** The engine-side name (vLLM's `lora_name`); the client always names the adapter itself. */
  servedAs: string;
}

/** How an adapter canary was rolled back: the share to 0 at once, then the candidate unloaded where its requests ended. */
export interface AdapterRollbackRecord {
  reason: string;
  at: number;
  timing: {
    traffic_shift_ms: number;
    /** Waiting for the candidate's requests in flight, then unloading it from every worker that has it. */
    unload_ms: number;
    total_ms: number;
  };
  /** Workers it was unloaded from, those whose engine refused the unload, and those still serving it when the wait ended (each unloads it after its last request). */
  unloaded: number;
  unloadFailed: string[];
  unloadPending: string[];
  candidateRequests: number;
  percentAtRollback: number;
}

export interface AdapterCanaryState extends StagedFields {
  kind: 'adapter_canary';
  /** The base model whose workers serve both sides. */
  model: string;
  /** The adapter's name: the rollouts' scope (one unfinished canary per adapter, beside the model's own rollouts). */
  adapter: string;
  stable: AdapterSide;
  candidate: AdapterSide & { version: string };
  /** Percent of the adapter's requests per stage, ascending; 100 means promote. `phase` never is `loading`: an adapter loads on demand. */
  stages: number[];
  rollback?: AdapterRollbackRecord | undefined;
}

/** The name the candidate is loaded under beside the registered adapter: `<name>--<version>`. */
export function candidateName(adapter: string, version: string): string {
  return `${adapter}--${version}`;
}
