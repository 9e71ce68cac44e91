// After a restart of the control plane: the workers a version's records name — adopted when their
// process is alive and answers, stopped when their start was cut short (never warmed) or their
// version's load was, forgotten otherwise — and the GPUs held for workers that have no record at all.
import { readFileSync } from 'node:fs';
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { engineTraitsOf } from '../domain/spec.js';
import type { KvRole } from '../domain/spec.js';
import type { GpuInventory } from '../fleet/inventory.js';
import type { DataPlane } from '../gateway/dataplane.js';
import { parseHealth } from '../health/persisted.js';
import { pidAlive, stopPid } from '../providers/child.js';
import type { Providers, WorkerHandle } from '../providers/index.js';
import type { Store, WorkerRecord } from '../store/types.js';
import type { WorkerHealth } from '../health/machine.js';
import type { WorkerRole } from '../rollout/ports.js';

/** What the manager keeps of a live worker beside its handle: persisted in its record. */
export interface WorkerMeta {
  role: WorkerRole;
  /** undefined: never judged (a worker adopted from before health existed). */
  health: WorkerHealth | undefined;
  startedAt: number;
  /** Disaggregated serving: it prefills or decodes (persisted in its record's info). */
  kvRole: KvRole | undefined;
}

/** What adoption works with: the worker manager's stores and its way of recording a live worker. */
export interface AdoptionHost {
  store: Store;
  inventory: GpuInventory;
  providers: Providers;
  dp: DataPlane;
  /** worker id → sleep level (sleep.ts). */
  sleeping: Map<string, 1 | 2>;
  /** Record a live handle, watch it, make it known (the manager's adoptHandle). */
  record(v: VersionConfig, h: WorkerHandle, meta: WorkerMeta): Promise<void>;
  publish(model: string, version: string): void;
  /** Whether a worker of this id runs in this process. */
  live(id: string): boolean;
}

/** A record's worker is not to be kept: its process stopped (when it is still that worker), its record and GPUs let go; whether a process was stopped. */
async function discard(host: AdoptionHost, r: WorkerRecord): Promise<boolean> {
  const pid = r.pid;
  const running = pid !== undefined && pidAlive(pid) && isOurs(r);
  if (running) await stopPid(pid, DEFAULTS.control.failedStartStopGraceMs);
  await forget(host, r);
  return running;
}

async function forget(host: AdoptionHost, r: WorkerRecord): Promise<void> {
  await host.store.deleteWorker(r.id);
  await host.inventory.releaseWorker(r.model, r.versionId, r.id);
}

/** A version boot will not serve (its load was cut short by the restart): every recorded worker of it discarded; how many records, how many of them still ran. */
export async function discardVersion(host: AdoptionHost, v: VersionConfig): Promise<{ records: number; stopped: number }> {
  const recs = await host.store.listWorkers({ model: v.model, versionId: v.id });
  let stopped = 0;
  for (const r of recs) if (await discard(host, r)) stopped++;
  return { records: recs.length, stopped };
}

/** Adopt the version's recorded workers that are still alive; returns how many. */
export async function adoptVersion(host: AdoptionHost, v: VersionConfig): Promise<number> {
  const recs = await host.store.listWorkers({ model: v.model, versionId: v.id });
  const provider = host.providers.for(v.provider.kind);
  let n = 0;
  host.dp.addVersion(v.model, v.id, v.cardChecksum, engineTraitsOf(v));
  for (const r of recs) {
    if (r.state === 'starting') {
      // its start was cut short by the restart, before its warm-up ended: stop it, never adopt it
      await discard(host, r);
      continue;
    }
    const h =
      r.state === 'exited' || r.state === 'stopped' || !provider.adopt
        ? undefined
        : await provider.adopt({ id: r.id, version: v, url: r.endpoint, pid: r.pid, gpus: r.gpus });
    if (!h) {
      await forget(host, r);
      continue;
    }
    await host.record(v, h, { role: r.role ?? 'serving', health: parseHealth(r.health), startedAt: r.startedAt, kvRole: kvRoleOf(r.info) });
    // record() wrote a fresh ready worker: keep what the old record knew (asleep, sleep level, log
    // file, start time) so a second restart still knows the worker is asleep
    if (r.state === 'sleeping') host.sleeping.set(h.id, (r.info?.sleepLevel as 1 | 2 | undefined) ?? 1);
    const fresh = await host.store.getWorker(h.id);
    if (fresh)
      await host.store.upsertWorker({
        ...fresh,
        state: r.state === 'sleeping' ? 'sleeping' : fresh.state,
        startedAt: r.startedAt,
        info: { ...r.info, ...fresh.info },
      });
    n++;
  }
  if (n > 0) host.publish(v.model, v.id);
  return n;
}

/** GPUs held for a worker that has no record (a start a restart cut short before its process existed) are freed; returns how many. */
export async function releaseOrphanGpus(host: AdoptionHost): Promise<number> {
  let n = 0;
  for (const a of await host.store.listGpuAssignments()) {
    if (a.workerId === undefined || host.live(a.workerId) || (await host.store.getWorker(a.workerId))) continue;
    n += await host.inventory.releaseWorker(a.model, a.versionId, a.workerId);
  }
  return n;
}

/**
 * Whether the process of a record's pid is still that worker, and not another that took its pid
 * after a reboot: its command line names the worker's port. Where that cannot be read, it is not
 * signalled (a worker left running beats a stranger killed).
 */
function isOurs(r: WorkerRecord): boolean {
  const port = r.info?.port;
  if (typeof port !== 'number') return false;
  try {
    return readFileSync(`/proc/${r.pid}/cmdline`, 'utf8').split('\0').includes(String(port));
  } catch {
    return false;
  }
}

/** The kv role a worker record keeps in its info (anything else: none). */
export function kvRoleOf(info: Record<string, unknown> | undefined): KvRole | undefined {
  const r = info?.kvRole;
  return r === 'prefill' || r === 'decode' ? r : undefined;
}
