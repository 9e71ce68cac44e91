// The simulator's fault names: camelCase in code, snake_case in glidepath.yaml and on the
// simulator's /admin/faults. One table for both directions, so a new fault is named once.
import type { SimFaults } from '../domain/spec.js';

/** The faults a simulator takes: the config's, plus `processExit` (exit on the next inference request), which only its admin API and CLI set. */
export interface SimFaultSpec extends SimFaults {
  processExit?: boolean;
}

/** The same in snake_case, as written in glidepath.yaml (no process_exit there) and sent to /admin/faults. */
export interface SnakeFaults {
  error_rate?: number | undefined;
  error_status?: number | undefined;
  crash_after_tokens?: number | undefined;
  stall_after_tokens?: number | undefined;
  garbage_after_tokens?: number | undefined;
  hang?: boolean | undefined;
  latency_multiplier?: number | undefined;
  corrupt?: boolean | undefined;
  logprob_drift?: number | undefined;
  flap_ms?: number | undefined;
  process_exit?: boolean | undefined;
}

const FAULT_NAMES: readonly (readonly [keyof SimFaultSpec, keyof SnakeFaults])[] = [
  ['errorRate', 'error_rate'],
  ['errorStatus', 'error_status'],
  ['crashAfterTokens', 'crash_after_tokens'],
  ['stallAfterTokens', 'stall_after_tokens'],
  ['garbageAfterTokens', 'garbage_after_tokens'],
  ['hang', 'hang'],
  ['latencyMultiplier', 'latency_multiplier'],
  ['corrupt', 'corrupt'],
  ['logprobDrift', 'logprob_drift'],
  ['flapMs', 'flap_ms'],
  ['processExit', 'process_exit'],
];

function renameFaults(from: Record<string, unknown>, dir: 0 | 1): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const names of FAULT_NAMES) {
    const v = from[names[dir]];
    if (v !== undefined) out[names[1 - dir] as string] = v;
  }
  return out;
}

export function fromSnakeFaults(f: SnakeFaults): SimFaultSpec {
  return renameFaults(f as Record<string, unknown>, 1);
}

export function toSnakeFaults(f: SimFaultSpec): SnakeFaults {
  return renameFaults(f as Record<string, unknown>, 0);
}
