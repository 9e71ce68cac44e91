// A follower's share of an adapter canary (cluster mode, docs/cluster.md): the leader persists every
// step of an adapter canary; a follower gives the candidate the same share of the adapter's requests
// (same sticky cohort), takes it away when the leader rolls back, and unloads the version the canary
// retired from the workers this replica loaded it on, once its own requests on it have ended.
import { parseRolloutState } from '../rollout/rollout-record.js';
import { currentPercent } from '../rollout/canary-state.js';
import type { AdapterCanaryState } from '../rollout/adapter-canary-state.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { RolloutRecord } from '../store/types.js';

/** Phases in which the candidate takes no new request on the leader. */
const NO_SHARE = new Set(['rolling_back', 'rolled_back', 'aborted', 'failed', 'succeeded']);

export class AdapterCanaryMirror {
  /** Per rollout id: the record revision applied last (a sync may read an older one than the watch brought), and when (`seq`). */
  private readonly applied = new Map<string, { revision: number; seq: number }>();
  /** Counts applications: a sync's read older than an application must not undo it (`mark`). */
  private seq = 0;
  /** Rollouts whose retired version this replica has unloaded (once each). */
  private readonly retired = new Set<string>();

  constructor(
    private readonly dp: DataPlane,
    private readonly drainTimeoutMs: number,
    /** Re-read the registered adapters (a promotion is registered before its canary is recorded as succeeded). */
    private readonly syncAdapters: () => Promise<void>,
    private readonly onError: (message: string) => void,
  ) {}

  /** A rollout record changed (or was read by a sync): an adapter canary's share applied, others ignored. */
  apply(rec: RolloutRecord): void {
    const kind = (rec.state as { kind?: unknown } | null)?.kind;
    if (kind !== 'adapter_canary') return;
    if ((this.applied.get(rec.id)?.revision ?? -1) >= rec.revision) return;
    let s: AdapterCanaryState;
    try {
      s = parseRolloutState(rec.state, rec) as AdapterCanaryState;
    } catch (err) {
      this.onError(`could not mirror adapter canary ${rec.id}: ${(err as Error).message}`);
      return;
    }
    this.applied.set(rec.id, { revision: rec.revision, seq: ++this.seq });
    if (this.applied.size > 10_000) this.applied.delete(this.applied.keys().next().value as string);
    if (!NO_SHARE.has(s.phase)) {
      this.share(s);
      return;
    }
    if (this.dp.adapters.candidate(s.adapter)?.salt === s.id) this.dp.adapters.setCandidate(s.adapter, undefined);
    // promoted: the registration (written before this record) names the candidate; re-read, the old
    // version is unloaded there (Mirror.syncAdapters) — this replica may have heard this record first
    if (s.phase === 'succeeded') void this.syncAdapters();
    else if (rec.terminal) void this.retire(s, s.candidate.servedAs);
  }

  /** Before a sync reads the rollouts: what the watch applies from now on, the sync's older read leaves alone. */
  mark(): number {
    return this.seq;
  }

  /**
   * After a sync read every rollout in progress (`mark()` taken before the read): a candidate whose canary
   * is no longer among them (it ended while this replica was away from etcd) is taken away, and its
   * version unloaded here — unless the watch applied that canary after the read began (it started since).
   */
  reconcile(active: readonly RolloutRecord[], mark: number): void {
    for (const r of active) this.apply(r);
    const running = new Set(active.map((r) => r.id));
    for (const a of this.dp.adapters.list()) {
      const c = this.dp.adapters.candidate(a.name);
      if (c === undefined || running.has(c.salt) || (this.applied.get(c.salt)?.seq ?? 0) > mark) continue;
      this.dp.adapters.setCandidate(a.name, undefined);
      // promoted meanwhile: the registry serves the candidate's name now, and nothing is unloaded
      if (a.servedAs !== c.spec.servedAs) void this.unload(a.model, c.spec.servedAs, `adapter canary ${c.salt}`);
    }
  }

  private share(s: AdapterCanaryState): void {
    // the promotion's registration came first (another watch): the candidate is the adapter already
    if (this.dp.adapters.get(s.adapter)?.servedAs === s.candidate.servedAs) return;
    try {
      this.dp.adapters.setCandidate(s.adapter, {
        spec: { name: s.adapter, model: s.model, source: s.candidate.source, version: s.candidate.version, servedAs: s.candidate.servedAs },
        share: currentPercent(s) / 100,
        salt: s.id,
      });
    } catch (err) {
      // the adapter's registration has not reached this replica yet: the next sync applies the share
      this.applied.delete(s.id);
      this.onError(`adapter canary ${s.id} of ${s.adapter}: its share waits for the adapter to be known here (${(err as Error).message})`);
    }
  }

  private async retire(s: AdapterCanaryState, servedAs: string): Promise<void> {
    if (this.retired.has(s.id)) return;
    this.retired.add(s.id);
    if (this.retired.size > 10_000) this.retired.delete(this.retired.values().next().value as string);
    // never the name the registry serves the adapter as (nothing of it is retired then)
    if (this.dp.adapters.get(s.adapter)?.servedAs === servedAs) return;
    await this.unload(s.model, servedAs, `adapter canary ${s.id} of ${s.adapter}`);
  }

  /** Unload `servedAs` from the workers this replica loaded it on, once its own requests on it ended. */
  async unload(model: string, servedAs: string, what: string): Promise<void> {
    try {
      const r = await this.dp.retireAdapter(model, servedAs, this.drainTimeoutMs);
      if (r.failed.length > 0) this.onError(`${what}: ${servedAs} could not be unloaded from ${r.failed.join(', ')}`);
    } catch (err) {
      this.onError(`${what}: unloading ${servedAs} failed: ${(err as Error).message}`);
    }
  }
}
