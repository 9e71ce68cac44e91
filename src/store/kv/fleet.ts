// The cluster store's fleet over key-value: GPU assignments (all-or-nothing) and the workers started or adopted.
import { ConflictError, NotFoundError } from '../../errors.js';
import type { GpuAssignment, WorkerFilter, WorkerRecord } from '../types.js';
import { prefixRange } from './backend.js';
import { deleteIfThere, getJson, K, putJson, values } from './keys.js';
import type { KvIo } from './layer.js';
import { KvRollouts } from './rollouts.js';
import { cmp } from './versions.js';

export abstract class KvFleet extends KvRollouts {
  assignGpus(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string | undefined }, at: number): Promise<GpuAssignment[]> {
    return this.call(async (io) => {
      // a time-shared group (`@<group>`) holds its slots for the versions of its models; anything else is a version
      if (!holder.model.startsWith('@') && (await io.get(K.version(holder.model, holder.versionId))) === undefined)
        throw new NotFoundError('version_not_found', `no version ${holder.model}/${holder.versionId}`);
      const out: GpuAssignment[] = [];
      for (const gpuId of gpuIds) {
        const cur = await getJson<GpuAssignment>(io, K.gpu(gpuId));
        if (cur && (cur.model !== holder.model || cur.versionId !== holder.versionId || cur.workerId !== holder.workerId)) {
          throw new ConflictError('gpu_in_use', `GPU ${gpuId} is held by ${cur.model}/${cur.versionId}${cur.workerId ? ` (worker ${cur.workerId})` : ''}`, {
            details: { gpu: gpuId, model: cur.model, version: cur.versionId, worker: cur.workerId ?? null },
          });
        }
        const a = cur ?? { gpuId, model: holder.model, versionId: holder.versionId, workerId: holder.workerId, assignedAt: at };
        if (!cur) putJson(io, K.gpu(gpuId), a);
        out.push(a);
      }
      return out;
    });
  }

  releaseGpus(gpuIds: readonly string[]): Promise<number> {
    return this.call(async (io) => {
      let n = 0;
      for (const id of new Set(gpuIds))
        if ((await io.get(K.gpu(id))) !== undefined) {
          io.del(K.gpu(id));
          n++;
        }
      return n;
    });
  }

  releaseGpusOf(model: string, versionId: string, workerId?: string): Promise<number> {
    return this.call(async (io) => {
      const held = (await gpus(io)).filter((g) => g.model === model && g.versionId === versionId && (workerId === undefined || g.workerId === workerId));
      for (const g of held) io.del(K.gpu(g.gpuId));
      return held.length;
    });
  }

  listGpuAssignments(): Promise<GpuAssignment[]> {
    return this.call(async (io) => (await gpus(io)).sort((a, b) => cmp(a.gpuId, b.gpuId)));
  }

  upsertWorker(w: WorkerRecord): Promise<void> {
    return this.call(async (io) => {
      if ((await io.get(K.version(w.model, w.versionId))) === undefined)
        throw new NotFoundError('version_not_found', `worker ${w.id}: no version ${w.model}/${w.versionId}`);
      putJson(io, K.worker(w.id), w);
    });
  }

  getWorker(id: string): Promise<WorkerRecord | undefined> {
    return this.call((io) => getJson<WorkerRecord>(io, K.worker(id)));
  }

  listWorkers(filter: WorkerFilter = {}): Promise<WorkerRecord[]> {
    return this.call(async (io) =>
      values<WorkerRecord>(await io.range(prefixRange(K.workers)))
        .filter(
          (w) =>
            (filter.model === undefined || w.model === filter.model) &&
            (filter.versionId === undefined || w.versionId === filter.versionId) &&
            (filter.state === undefined || w.state === filter.state),
        )
        .sort((a, b) => cmp(a.model, b.model) || cmp(a.versionId, b.versionId) || cmp(a.id, b.id)),
    );
  }

  deleteWorker(id: string): Promise<boolean> {
    return this.call((io) => deleteIfThere(io, K.worker(id)));
  }
}

async function gpus(io: KvIo): Promise<GpuAssignment[]> {
  return values<GpuAssignment>(await io.range(prefixRange(K.gpus)));
}
