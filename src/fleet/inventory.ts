// The GPU inventory: which GPUs exist (config), which are held (store), TP-sized placement, and the
// slots of time-shared models (held by their group, `@<group>`, on which all their versions run).
import type { GpuConfig, TimeShareConfig, VersionConfig } from '../config/types.js';
import { ConflictError } from '../errors.js';
import type { Store, StoreOps } from '../store/types.js';

export interface GpuView {
  id: string;
  memoryGb: number;
  holder?: { model: string; versionId: string; workerId?: string | undefined } | undefined;
}

export class GpuInventory {
  /** model → its time-share group. */
  private readonly shared = new Map<string, TimeShareConfig>();

  constructor(
    private readonly gpus: readonly GpuConfig[],
    private readonly store: Store,
    groups: readonly TimeShareConfig[] = [],
  ) {
    for (const g of groups) for (const m of g.models) this.shared.set(m, g);
  }

  /** The time-share group a model belongs to, if any. */
  groupOf(model: string): TimeShareConfig | undefined {
    return this.shared.get(model);
  }

  /**
   * Hold each group's slots (`slots` groups of `tp` GPUs), taking what a group does not hold yet
   * (after a restart it holds them already), and let go of slots no longer wanted (a group gone or
   * renamed, a slot beyond its count or of another TP) unless a worker still runs there. Returns one
   * line per change.
   */
  async reserveSlots(now: number): Promise<string[]> {
    const said: string[] = [];
    const groups = [...new Set(this.shared.values())];
    const byHolder = new Map(groups.map((g) => [slotHolder(g), g]));
    const occupied = new Set((await this.store.listWorkers()).filter((w) => w.state !== 'exited').flatMap((w) => w.gpus));
    const held = new Map<string, { holder: string; slot: string; ids: string[] }>();
    for (const a of await this.store.listGpuAssignments()) {
      if (!a.model.startsWith('@')) continue;
      const k = `${a.model}\0${a.versionId}`;
      const h = held.get(k) ?? { holder: a.model, slot: a.versionId, ids: [] };
      h.ids.push(a.gpuId);
      held.set(k, h);
    }
    for (const { holder, slot, ids } of held.values()) {
      if (wanted(byHolder.get(holder), slot, ids)) continue;
      if (ids.some((id) => occupied.has(id))) {
        said.push(`${holder} ${slot}: GPU(s) ${ids.join('+')} no longer configured, kept while a worker runs there`);
        continue;
      }
      await this.store.releaseGpusOf(holder, slot);
      said.push(`${holder} ${slot}: GPU(s) ${ids.join('+')} no longer configured, released`);
    }
    for (const g of groups) {
      const have = new Set((await this.slotsByIndex(g)).keys());
      const missing = Array.from({ length: g.slots }, (_, i) => i).filter((i) => !have.has(i));
      if (missing.length === 0) continue;
      const taken = await this.take(
        missing.length,
        g.tp,
        g.memoryGbPerGpu,
        `time-share slots of ${g.name}`,
        (i) => ({ model: slotHolder(g), versionId: `slot-${missing[i] as number}` }),
        now,
      );
      said.push(`${slotHolder(g)}: holds GPU(s) ${taken.map((s) => s.join('+')).join(', ')} for ${g.models.join(', ')}`);
    }
    return said;
  }

  /** A group's slots, in slot order: the GPU ids of each (a slot no longer configured is not one). */
  async slots(g: TimeShareConfig, s: StoreOps = this.store): Promise<string[][]> {
    return [...(await this.slotsByIndex(g, s)).entries()].sort(([a], [b]) => a - b).map(([, ids]) => ids);
  }

  private async slotsByIndex(g: TimeShareConfig, s: StoreOps = this.store): Promise<Map<number, string[]>> {
    const ids = new Map<string, string[]>();
    for (const a of await s.listGpuAssignments()) if (a.model === slotHolder(g)) ids.set(a.versionId, [...(ids.get(a.versionId) ?? []), a.gpuId]);
    const out = new Map<number, string[]>();
    for (const [slot, gpus] of ids) if (wanted(g, slot, gpus)) out.set(slotIndex(slot), gpus.sort());
    return out;
  }

  /**
   * GPUs for `n` new workers of a version: on a time-shared model, the group's slots the version has
   * no worker on yet (`occupied`: its workers' GPUs), not taken (the group holds them); otherwise
   * `take`n from the free ones.
   */
  async place(v: VersionConfig, n: number, what: string, holder: (group: number) => GpuHolder, occupied: readonly string[], now: number): Promise<string[][]> {
    const g = this.groupOf(v.model);
    if (g === undefined) return this.take(n, v.tp, v.gpuMemoryGb / v.tp, what, holder, now);
    // a version registered through the API is not checked against the group as the config's are
    const misfit =
      v.provider.kind === 'static'
        ? 'is static'
        : v.tp !== g.tp
          ? `has TP ${v.tp}, the slots ${g.tp}`
          : (v.spares ?? 0) > 0
            ? 'has hot spares'
            : v.roles !== undefined
              ? 'has prefill/decode roles'
              : undefined;
    if (misfit !== undefined)
      throw new ConflictError('time_share_mismatch', `${what} ${misfit}: the versions of ${v.model} take turns on the slots of ${slotHolder(g)}`);
    const busy = new Set(occupied);
    const open = (await this.slots(g)).filter((ids) => !ids.some((id) => busy.has(id)));
    if (open.length < n)
      throw new ConflictError(
        'insufficient_gpus',
        `${what} needs ${n} slot(s) of time-share group ${g.name} but ${open.length} of its ${g.slots} have no worker of ${v.model}/${v.id}`,
        { details: { needed: n, free: open.length, total: g.slots } },
      );
    return open.slice(0, n);
  }

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

/** The holder a group's slots are assigned to (model names cannot start with `@`). */
export function slotHolder(g: Pick<TimeShareConfig, 'name'>): string {
  return `@${g.name}`;
}

function slotIndex(versionId: string): number {
  return /^slot-\d+$/.test(versionId) ? Number(versionId.slice('slot-'.length)) : Number.NaN;
}

/** A held slot its group still wants: one of its `slots`, of its TP. */
function wanted(g: TimeShareConfig | undefined, slot: string, ids: readonly string[]): boolean {
  const i = slotIndex(slot);
  return g !== undefined && i >= 0 && i < g.slots && ids.length === g.tp;
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
