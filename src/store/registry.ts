// The version registry: the pure lifecycle rules of src/domain/version.ts applied atomically to the store.
//
// Every change is one store transaction: read, check, write the version, record its transition and
// the model's active-version history. Asynchronous like the store; control plane only, never the
// request path. The functions run inside `tx` only read, check and write through its handle, so a
// store that re-runs a transaction on conflict (etcd) may re-run them. Auditing (who asked) is the
// caller's job (src/api); `actor` here is for history.
import { canonical, cardChecksum } from '../domain/card.js';
import type { GlidepathConfig, VersionConfig } from '../config/types.js';
import type { ActivePeriod, Version, VersionPatch, VersionStatus, VersionTransition } from '../domain/version.js';
import { applyPatch, fromConfig, transition as applyTransition, VersionRuleError, warmupTokens } from '../domain/version.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { Store, StoreOps } from './types.js';

export interface ChangeOptions {
  /** Token name, `controller`, `config`… recorded with the transition and in the active history. */
  actor?: string | undefined;
  reason?: string | undefined;
}

export interface PromoteOptions extends ChangeOptions {
  /** What the previously active version becomes: `standby` (default, stays loaded) or `retired`. */
  demoteTo?: 'standby' | 'retired' | undefined;
}

export interface RollbackOptions extends ChangeOptions {
  /**
   * Block the version rolled back from as a rollback target (default true): rolling "back" to the
   * version that was just judged bad is a mistake; a deliberate `promote` still works.
   */
  blockRolledBack?: boolean | undefined;
}

export interface SwitchResult {
  active: Version;
  /** The version that was active before, in its new state; undefined if none was. */
  previous?: Version | undefined;
}

export interface SeedReport {
  /** Registered now (status `registered`). */
  added: Version[];
  /** Known; operational fields (provider, replicas, spares, warm-up, GPU memory, metadata keys, probe reference) refreshed from the config. */
  updated: Version[];
  /** Known and identical. */
  unchanged: Version[];
  /** Known with another card checksum under the same id: left untouched (versions are immutable). */
  conflicts: { model: string; id: string; stored: string; config: string }[];
}

/** Pure-rule errors → GlidepathErrors with the same code. */
function rethrow(e: unknown): never {
  if (e instanceof VersionRuleError) {
    const details = { from: e.from, to: e.to };
    if (e.code === 'illegal_transition') throw new ConflictError(e.code, e.message, { details, cause: e });
    throw new BadRequestError(e.code, e.message, { cause: e });
  }
  throw e;
}

export class Registry {
  constructor(
    readonly store: Store,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Register a new version (status `registered`). ConflictError `version_exists`. */
  async register(cfg: VersionConfig): Promise<Version> {
    const withCard: VersionConfig = cfg.cardChecksum ? cfg : { ...cfg, cardChecksum: cardChecksum(cfg) };
    const v = fromConfig(withCard, this.clock());
    await this.store.insertVersion(v);
    return v;
  }

  find(model: string, id: string): Promise<Version | undefined> {
    return this.store.getVersion(model, id);
  }

  /** NotFoundError `version_not_found`. `s`: a transaction's handle when called inside one. */
  async get(model: string, id: string, s: StoreOps = this.store): Promise<Version> {
    const v = await s.getVersion(model, id);
    if (!v) {
      const known = (await s.listVersions({ model })).map((x) => x.id);
      throw new NotFoundError('version_not_found', `no version ${id} of model ${model}` + (known.length ? ` (known: ${known.join(', ')})` : ''), {
        details: { model, version: id },
      });
    }
    return v;
  }

  list(model?: string, status?: readonly VersionStatus[]): Promise<Version[]> {
    return this.store.listVersions({ model, status });
  }

  /**
   * Move a version to `to` atomically (read, check the transition table, write, record history).
   * ConflictError `illegal_transition` naming both states; `active_exists` when another version of
   * the model is active (use `promote`); NotFoundError `version_not_found`.
   */
  transition(model: string, id: string, to: VersionStatus, patch: VersionPatch = {}, opts: ChangeOptions = {}): Promise<Version> {
    return this.store.tx(async (t) => this.transitionInTx(t, await this.get(model, id, t), to, patch, opts, this.clock()));
  }

  /** `now` is shared by every step of one switch, so the active history has no gaps or overlaps. */
  private async transitionInTx(t: StoreOps, cur: Version, to: VersionStatus, patch: VersionPatch, opts: ChangeOptions, now: number): Promise<Version> {
    let next: Version;
    try {
      next = applyTransition(cur, to, now, patch);
    } catch (e) {
      rethrow(e);
    }
    if (cur.status === 'active') await t.recordDeactivation(cur.model, cur.id, now);
    await t.updateVersion(next);
    await t.appendVersionTransition({
      model: cur.model,
      versionId: cur.id,
      from: cur.status,
      to,
      at: now,
      actor: opts.actor,
      reason: opts.reason,
    });
    if (to === 'active') {
      await t.recordActivation({ model: cur.model, versionId: cur.id, at: now, actor: opts.actor, reason: opts.reason });
    }
    return next;
  }

  /** Change fields without a status change (health, GPUs, load time, metadata, rollback block). */
  update(model: string, id: string, patch: VersionPatch): Promise<Version> {
    return this.store.tx(async (t) => {
      const cur = await this.get(model, id, t);
      let next: Version;
      try {
        next = applyPatch(cur, patch, this.clock());
      } catch (e) {
        rethrow(e);
      }
      await t.updateVersion(next);
      return next;
    });
  }

  async active(model: string, s: StoreOps = this.store): Promise<Version | undefined> {
    return (await s.listVersions({ model, status: ['active'] }))[0];
  }

  /** Every standby version of the model, most recently active first. */
  async standbys(model: string, s: StoreOps = this.store): Promise<Version[]> {
    return (await s.listVersions({ model, status: ['standby'] })).sort(
      (a, b) => (b.deactivatedAt ?? -1) - (a.deactivatedAt ?? -1) || b.updatedAt - a.updatedAt,
    );
  }

  /** The rollback target: the rollback-eligible standby that was active most recently; undefined if none. */
  async standby(model: string, s: StoreOps = this.store): Promise<Version | undefined> {
    return (await this.standbys(model, s)).find((v) => v.rollbackEligible);
  }

  /** Who was active when, newest first. */
  history(model: string, limit?: number): Promise<ActivePeriod[]> {
    return this.store.activeHistory(model, limit);
  }

  /** Every status change of one version, oldest first. */
  transitions(model: string, id: string): Promise<VersionTransition[]> {
    return this.store.versionTransitions(model, id);
  }

  /**
   * Make `id` the active version in one transaction: the current active one becomes standby (or
   * retired), then `id` (ready or standby) becomes active. Idempotent: promoting the active version
   * changes nothing. Errors as `transition`.
   */
  promote(model: string, id: string, opts: PromoteOptions = {}): Promise<SwitchResult> {
    return this.store.tx(async (t) => {
      const target = await this.get(model, id, t);
      const cur = await this.active(model, t);
      if (cur && cur.id === target.id) return { active: cur };
      if (target.status !== 'ready' && target.status !== 'standby') {
        rethrow(
          new VersionRuleError(
            'illegal_transition',
            `version ${model}/${id}: illegal transition ${target.status} → active (only a ready or standby version can be promoted)`,
            target.status,
            'active',
          ),
        );
      }
      const now = this.clock();
      let previous: Version | undefined;
      if (cur) {
        previous = await this.transitionInTx(t, cur, 'standby', {}, { ...opts, reason: opts.reason ?? `replaced by ${id}` }, now);
        if (opts.demoteTo === 'retired') previous = await this.transitionInTx(t, previous, 'retired', {}, opts, now);
      }
      const active = await this.transitionInTx(t, target, 'active', {}, opts, now);
      return { active, previous };
    });
  }

  /**
   * Instant rollback bookkeeping: the rollback target (`standby(model)`) becomes active, the active
   * version becomes standby and, by default, blocked as a rollback target. The route switch itself
   * is the gateway's; call this right after it. ConflictError `no_standby` when there is no target.
   */
  rollback(model: string, opts: RollbackOptions = {}): Promise<SwitchResult> {
    return this.store.tx(async (t) => {
      const target = await this.standby(model, t);
      if (!target) {
        const standbys = await this.standbys(model, t);
        throw new ConflictError(
          'no_standby',
          `model ${model} has no rollback-eligible standby version` +
            (standbys.length
              ? ` (standby but not eligible: ${standbys.map((v) => `${v.id}${v.rollbackBlockedReason ? ` — ${v.rollbackBlockedReason}` : ''}`).join(', ')})`
              : ''),
          { details: { model } },
        );
      }
      const cur = await this.active(model, t);
      const now = this.clock();
      let previous: Version | undefined;
      if (cur) {
        const block = opts.blockRolledBack ?? true;
        previous = await this.transitionInTx(
          t,
          cur,
          'standby',
          block ? { rollbackBlockedReason: `rolled back to ${target.id} at ${new Date(now).toISOString()}` } : {},
          { ...opts, reason: opts.reason ?? `rolled back to ${target.id}` },
          now,
        );
      }
      const active = await this.transitionInTx(t, target, 'active', {}, { ...opts, reason: opts.reason ?? 'rollback' }, now);
      return { active, previous };
    });
  }

  /**
   * Make the store know every version in the config. New ones are registered; known ones keep their
   * persisted status and lifecycle (a restart must not forget what is active) and only get their
   * operational fields refreshed; a known id whose card checksum changed is reported, not touched.
   */
  async seedFromConfig(cfg: Pick<GlidepathConfig, 'models'>): Promise<SeedReport> {
    const report: SeedReport = { added: [], updated: [], unchanged: [], conflicts: [] };
    // one transaction per model: a fleet of 100 models fits etcd's limit on the writes of one (each
    // model is seeded whole or not at all, and seeding is idempotent, so a crash between two is harmless)
    for (const m of cfg.models) {
      const part = await this.seedModel(m.versions);
      report.added.push(...part.added);
      report.updated.push(...part.updated);
      report.unchanged.push(...part.unchanged);
      report.conflicts.push(...part.conflicts);
    }
    return report;
  }

  private seedModel(versions: readonly VersionConfig[]): Promise<SeedReport> {
    return this.store.tx(async (t) => {
      // built inside: a re-run transaction starts its report afresh
      const report: SeedReport = { added: [], updated: [], unchanged: [], conflicts: [] };
      const now = this.clock();
      for (const vc of versions) {
        const cur = await t.getVersion(vc.model, vc.id);
        if (!cur) {
          const v = fromConfig(vc, now);
          await t.insertVersion(v);
          report.added.push(v);
          continue;
        }
        if (cur.cardChecksum !== vc.cardChecksum) {
          report.conflicts.push({ model: vc.model, id: vc.id, stored: cur.cardChecksum, config: vc.cardChecksum });
          continue;
        }
        // metadata is merged (config keys win) so keys set at runtime through patches survive a restart
        const metadata = { ...cur.metadata, ...structuredClone<Record<string, unknown>>(vc.metadata) };
        const op = (x: Pick<VersionConfig, 'provider' | 'replicas' | 'roles' | 'warmup' | 'metadata' | 'gpuMemoryGb' | 'spares' | 'probeReference'>) =>
          canonical([x.provider, x.replicas, x.roles ?? null, x.warmup, x.metadata, x.gpuMemoryGb, x.spares ?? 0, x.probeReference ?? null]);
        if (op(cur) === op({ ...vc, metadata })) {
          report.unchanged.push(cur);
          continue;
        }
        const fresh = structuredClone<VersionConfig>(vc);
        const next: Version = {
          ...cur,
          provider: fresh.provider,
          replicas: fresh.replicas,
          roles: fresh.roles,
          warmup: fresh.warmup,
          metadata,
          gpuMemoryGb: fresh.gpuMemoryGb,
          spares: fresh.spares,
          probeReference: fresh.probeReference,
          warmupTokens: warmupTokens(fresh),
          updatedAt: now,
        };
        await t.updateVersion(next);
        report.updated.push(next);
      }
      return report;
    });
  }
}
