// A whole store as plain records, in the order they were written: what `glidepath migrate-store` reads
// from one backend and writes into another. Audit ids and rollout event numbers are kept (the API pages
// and tails by them); transitions and active periods keep their order.
import type { ActivePeriod, Version, VersionTransition } from '../domain/version.js';
import type { AuditEntry, GpuAssignment, RolloutEvent, RolloutRecord, StoredRoute, TokenRecord, WorkerRecord } from './types.js';

export interface StoreDump {
  versions: Version[];
  /** Oldest first. */
  transitions: VersionTransition[];
  /** Oldest first; at most one per model still open. */
  active: ActivePeriod[];
  routes: StoredRoute[];
  rollouts: RolloutRecord[];
  events: RolloutEvent[];
  gpus: GpuAssignment[];
  workers: WorkerRecord[];
  audit: AuditEntry[];
  tokens: TokenRecord[];
  settings: { key: string; value: unknown }[];
}

/** How many records of each kind a dump holds (what migrate-store reports). */
export function dumpCounts(d: StoreDump): Record<keyof StoreDump, number> {
  const out = {} as Record<keyof StoreDump, number>;
  for (const k of Object.keys(d) as (keyof StoreDump)[]) out[k] = d[k].length;
  return out;
}
