// Each live worker's role and health as this process knows them (worker id → meta), persisted beside
// its store record, and who is told of every saved health change (the canary, rolling updates and
// blue-green listen; the health controller saves).
import type { WorkerHealth } from '../health/machine.js';
import type { WorkerInfo, WorkerRole } from '../rollout/ports.js';
import type { Store } from '../store/types.js';
import type { WorkerMeta } from './adoption.js';

export type HealthListener = (w: WorkerInfo, h: WorkerHealth) => void;

export class WorkerMetas extends Map<string, WorkerMeta> {
  private listeners: HealthListener[] = [];

  constructor(private readonly store: Store) {
    super();
  }

  /** Change a worker's role (a spare taking a dead worker's place) and persist it. */
  async setRole(id: string, role: WorkerRole): Promise<void> {
    const m = this.get(id);
    if (!m) return;
    m.role = role;
    await this.persist(id);
  }

  /**
   * Persist a worker's health (the health controller calls this on every change) and tell the
   * listeners; a worker that exited and is not yet stopped too (its turn to dead is what the canary
   * must hear).
   */
  async saveHealth(w: WorkerInfo, health: WorkerHealth): Promise<void> {
    const m = this.get(w.id);
    if (!m) return;
    m.health = health;
    for (const l of this.listeners) l({ ...w, health }, health);
    await this.persist(w.id);
  }

  /** Told of every saved change of a worker's health; returns the unsubscribe function. */
  onHealth(l: HealthListener): () => void {
    this.listeners.push(l);
    return () => {
      this.listeners = this.listeners.filter((x) => x !== l);
    };
  }

  private async persist(id: string): Promise<void> {
    const m = this.get(id);
    const rec = await this.store.getWorker(id);
    if (!m || !rec) return;
    await this.store.upsertWorker({ ...rec, role: m.role, health: m.health, updatedAt: Date.now() });
  }
}
