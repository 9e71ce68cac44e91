// The GPU inventory: which GPUs exist (config), which are held (store), and TP-sized placement.
import type { GpuConfig } from '../config/types.js';
import { ConflictError } from '../errors.js';
import type { Store } from '../store/types.js';

export interface GpuView {
  id: string;
  memoryGb: number;
  holder?: { model: string; versionId: string; workerId?: string | undefined } | undefined;
}

export class GpuInventory {
  constructor(
    private readonly gpus: readonly GpuConfig[],
    private readonly store: Store,
  ) {}

  list(): GpuView[] {
    const held = new Map(this.store.listGpuAssignments().map((a) => [a.gpuId, a]));
    return this.gpus.map((g) => {
      const a = held.get(g.id);
      return { id: g.id, memoryGb: g.memoryGb, holder: a ? { model: a.model, versionId: a.versionId, workerId: a.workerId } : undefined };
    });
  }

  free(): GpuView[] {
    return this.list().filter((g) => g.holder === undefined);
  }

  /**
   * Choose `groups` groups of `tp` free GPUs each, with enough memory per GPU, without taking them.
   * Contiguous ids are preferred (TP groups want NVLink neighbours). Throws naming need vs free.
   */
  plan(groups: number, tp: number, memoryGbPerGpu: number, what: string): string[][] {
    const need = groups * tp;
    const free = this.free().filter((g) => g.memoryGb >= memoryGbPerGpu);
    if (free.length < need) {
      const allFree = this.free().length;
      throw new ConflictError(
        'insufficient_gpus',
        `${what} needs ${need} GPU(s) (${groups} worker(s) × TP ${tp}${memoryGbPerGpu > 0 ? `, ≥${memoryGbPerGpu} GB each` : ''}) but only ${free.length} suitable of ${allFree} free (${this.gpus.length} total)`,
        { details: { needed: need, free: free.length, total: this.gpus.length } },
      );
    }
    const out: string[][] = [];
    for (let i = 0; i < groups; i++) out.push(free.slice(i * tp, (i + 1) * tp).map((g) => g.id));
    return out;
  }

  assign(gpuIds: readonly string[], holder: { model: string; versionId: string; workerId?: string }, now: number): void {
    this.store.assignGpus(gpuIds, holder, now);
  }

  releaseWorker(model: string, versionId: string, workerId: string): number {
    return this.store.releaseGpusOf(model, versionId, workerId);
  }

  releaseVersion(model: string, versionId: string): number {
    return this.store.releaseGpusOf(model, versionId);
  }

  get total(): number {
    return this.gpus.length;
  }
}
