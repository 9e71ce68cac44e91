// The GPU inventory: which GPUs exist (config), which are held (store), and TP-sized placement.
import type { GpuConfig } from '../config/types.js';
import { ConflictError } from '../errors.js';
import type { Store, StoreOps } from '../store/types.js';

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

  async list(s: StoreOps = this.store): Promise<GpuView[]> {
    const held = new Map((await s.listGpuAssignments()).map((a) => [a.gpuId, a]));
    return this.gpus.map((g) => {
      const a = held.get(g.id);
      return { id: g.id, memoryGb: g.memoryGb, holder: a ? { model: a.model, versionId: a.versionId, workerId: a.workerId } : undefined };
    });
  }

  async free(s: StoreOps = this.store): Promise<GpuView[]> {
    return (await this.list(s)).filter((g) => g.holder === undefined);
  }

  /**
   * Choose `groups` groups of `tp` free GPUs each, with enough memory per GPU, and take them for
   * `holder(i)` in one store transaction (so two deploys never race for them). Contiguous ids are
   * preferred (TP groups want NVLink neighbours). ConflictError `insufficient_gpus` naming need vs free.
   */
  take(groups: number, tp: number, memoryGbPerGpu: number, what: string, holder: (group: number) => GpuHolder, now: number): Promise<string[][]> {
    return this.store.tx(async (t) => {
      const free = await this.free(t);
      const out = place(free, groups, tp, memoryGbPerGpu);
      if (!out) {
        const need = groups * tp;
        const suitable = free.filter((g) => g.memoryGb >= memoryGbPerGpu).length;
        throw new ConflictError(
          'insufficient_gpus',
          `${what} needs ${need} GPU(s) (${groups} worker(s) × TP ${tp}${memoryGbPerGpu > 0 ? `, ≥${memoryGbPerGpu} GB each` : ''}) but only ${suitable} suitable of ${free.length} free (${this.gpus.length} total)`,
          { details: { needed: need, free: suitable, total: this.gpus.length } },
        );
      }
      for (const [i, g] of out.entries()) await t.assignGpus(g, holder(i), now);
      return out;
    });
  }

  releaseWorker(model: string, versionId: string, workerId: string): Promise<number> {
    return this.store.releaseGpusOf(model, versionId, workerId);
  }

  releaseVersion(model: string, versionId: string): Promise<number> {
    return this.store.releaseGpusOf(model, versionId);
  }

  get total(): number {
    return this.gpus.length;
  }
}

export interface GpuHolder {
  model: string;
  versionId: string;
  workerId?: string;
}

/** `groups` groups of `tp` suitable GPUs from `free`, in id order; undefined when there are not enough. */
function place(free: readonly GpuView[], groups: number, tp: number, memoryGbPerGpu: number): string[][] | undefined {
  const suitable = free.filter((g) => g.memoryGb >= memoryGbPerGpu);
  if (suitable.length < groups * tp) return undefined;
  const out: string[][] = [];
  for (let i = 0; i < groups; i++) out.push(suitable.slice(i * tp, (i + 1) * tp).map((g) => g.id));
  return out;
}
