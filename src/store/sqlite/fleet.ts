// The Store's fleet: GPU assignments and the workers started or adopted.
import { ConflictError, NotFoundError } from '../../errors.js';
import { rowToGpu, rowToWorker, workerToRow } from '../rows.js';
import type { GpuRow, WorkerRow } from '../rows.js';
import type { GpuAssignment, WorkerFilter, WorkerRecord } from '../types.js';
import { RolloutTables } from './rollouts.js';

export class FleetTables extends RolloutTables {
  // ---- GPU assignments ------------------------------------------------------------------------------------

  assignGpus(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string | undefined }, at: number): GpuAssignment[] {
    return this.tx(() => {
      // a time-shared group (`@<group>`) holds its slots for the versions of its models; anything else is a version
      if (!holder.model.startsWith('@') && !this.getVersion(holder.model, holder.versionId)) {
        throw new NotFoundError('version_not_found', `no version ${holder.model}/${holder.versionId}`);
      }
      const out: GpuAssignment[] = [];
      for (const gpuId of gpuIds) {
        const cur = this.stmt('SELECT * FROM gpu_assignments WHERE gpu_id = ?').get(gpuId) as GpuRow | undefined;
        if (cur && (cur.model !== holder.model || cur.version_id !== holder.versionId || (cur.worker_id ?? undefined) !== holder.workerId)) {
          throw new ConflictError('gpu_in_use', `GPU ${gpuId} is held by ${cur.model}/${cur.version_id}${cur.worker_id ? ` (worker ${cur.worker_id})` : ''}`, {
            details: { gpu: gpuId, model: cur.model, version: cur.version_id, worker: cur.worker_id },
          });
        }
        this.stmt(
          `INSERT INTO gpu_assignments (gpu_id, model, version_id, worker_id, assigned_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (gpu_id) DO NOTHING`,
        ).run(gpuId, holder.model, holder.versionId, holder.workerId ?? null, at);
        out.push(rowToGpu(this.stmt('SELECT * FROM gpu_assignments WHERE gpu_id = ?').get(gpuId) as GpuRow));
      }
      return out;
    });
  }

  releaseGpus(gpuIds: readonly string[]): number {
    return this.tx(() => {
      let n = 0;
      for (const id of gpuIds) n += this.stmt('DELETE FROM gpu_assignments WHERE gpu_id = ?').run(id).changes;
      return n;
    });
  }

  releaseGpusOf(model: string, versionId: string, workerId?: string): number {
    return this.tx(() =>
      workerId === undefined
        ? this.stmt('DELETE FROM gpu_assignments WHERE model = ? AND version_id = ?').run(model, versionId).changes
        : this.stmt('DELETE FROM gpu_assignments WHERE model = ? AND version_id = ? AND worker_id = ?').run(model, versionId, workerId).changes,
    );
  }

  listGpuAssignments(): GpuAssignment[] {
    return (this.stmt('SELECT * FROM gpu_assignments ORDER BY gpu_id').all() as GpuRow[]).map(rowToGpu);
  }

  // ---- workers -----------------------------------------------------------------------------------------------

  upsertWorker(w: WorkerRecord): void {
    this.tx(() => {
      if (!this.getVersion(w.model, w.versionId)) {
        throw new NotFoundError('version_not_found', `worker ${w.id}: no version ${w.model}/${w.versionId}`);
      }
      this.stmt(
        `INSERT INTO workers (id, model, version_id, endpoint, provider, pid, state, gpus, started_at, updated_at, info, role, health)
         VALUES (@id, @model, @version_id, @endpoint, @provider, @pid, @state, @gpus, @started_at, @updated_at, @info, @role, @health)
         ON CONFLICT (id) DO UPDATE SET model = excluded.model, version_id = excluded.version_id, endpoint = excluded.endpoint,
           provider = excluded.provider, pid = excluded.pid, state = excluded.state, gpus = excluded.gpus,
           started_at = excluded.started_at, updated_at = excluded.updated_at, info = excluded.info, role = excluded.role, health = excluded.health`,
      ).run(workerToRow(w));
    });
  }

  getWorker(id: string): WorkerRecord | undefined {
    const r = this.stmt('SELECT * FROM workers WHERE id = ?').get(id) as WorkerRow | undefined;
    return r ? rowToWorker(r) : undefined;
  }

  listWorkers(filter: WorkerFilter = {}): WorkerRecord[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.model !== undefined) {
      where.push('model = ?');
      args.push(filter.model);
    }
    if (filter.versionId !== undefined) {
      where.push('version_id = ?');
      args.push(filter.versionId);
    }
    if (filter.state !== undefined) {
      where.push('state = ?');
      args.push(filter.state);
    }
    const sql = `SELECT * FROM workers ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY model, version_id, id`;
    return (this.stmt(sql).all(...args) as WorkerRow[]).map(rowToWorker);
  }

  deleteWorker(id: string): boolean {
    return this.tx(() => this.stmt('DELETE FROM workers WHERE id = ?').run(id).changes > 0);
  }
}
