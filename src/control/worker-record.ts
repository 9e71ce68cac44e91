// A worker as the store keeps it: its id (`<model>/<version>/<index>`, never reused for a replacement:
// worker-manager.ts's nextWorkerId) and its record, `starting` from its spawn, `ready` once warm and adopted.
import type { VersionConfig } from '../config/types.js';
import type { WorkerHandle } from '../providers/index.js';
import type { WorkerRecord } from '../store/types.js';
import type { WorkerMeta } from './adoption.js';

export function workerId(v: { model: string; id: string }, i: number): string {
  return `${v.model}/${v.id}/${i}`;
}

/** A worker's record as the store keeps it: `starting` from its spawn, `ready` once warm and adopted. */
export function workerRecord(
  v: VersionConfig,
  w: Pick<WorkerHandle, 'id' | 'url' | 'provider' | 'pid' | 'gpus' | 'info'>,
  meta: WorkerMeta,
  state: 'starting' | 'ready',
): WorkerRecord {
  const info = meta.kvRole === undefined ? w.info : { ...w.info, kvRole: meta.kvRole };
  const { role, health, startedAt } = meta;
  return {
    id: w.id,
    model: v.model,
    versionId: v.id,
    endpoint: w.url,
    provider: w.provider,
    pid: w.pid,
    state,
    gpus: [...w.gpus],
    startedAt,
    updatedAt: Date.now(),
    info,
    role,
    health,
  };
}
