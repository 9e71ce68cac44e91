// Recovery: keeps each loaded version at its replicas and hot spares. A ready spare steps in at once
// for a serving worker that takes no traffic (unhealthy or dead) and steps back when that worker
// recovers; a dead worker is stopped (its GPUs freed) and a new one started through the provider,
// which takes traffic only after its admission probes pass; a failed start, or a replacement that
// fails admission, backs off. Declarative (what is missing is recomputed from the live fleet every
// tick), so a control plane killed halfway through a replacement finishes it after the restart.
import { DEFAULTS } from '../defaults.js';
import { LOADED_STATUSES, isLoaded } from '../domain/version.js';
import type { Version } from '../domain/version.js';
import type { KvRole } from '../domain/spec.js';
import { toGlidepathError } from '../errors.js';
import type { ControllerPorts, WorkerRole } from '../rollout/ports.js';
import type { WorkerHealthState } from './machine.js';
import { newHealth } from './machine.js';
import type { HealthHost, Tracked } from './tracked.js';

const ACTOR = { name: 'health' };

/** Per version: a start in flight, and the back-off after failed starts or failed admissions. */
interface Starts {
  inFlight: boolean;
  failures: number;
  nextAt: number;
}

const alive = (t: Tracked) => t.health.state !== 'draining' && t.health.state !== 'dead';

export class Recovery {
  private readonly starts = new Map<string, Starts>();
  /** Dead workers being stopped, per version: nothing is started until their GPUs are free. */
  private readonly stopping = new Map<string, number>();
  /** Workers being stopped (dead, or surplus spares), so none is stopped twice. */
  private readonly stoppingIds = new Set<string>();
  /** Serving replicas each version wants (from its registry record; refreshed by reconcileVersion). */
  private readonly replicas = new Map<string, number>();

  constructor(
    private readonly ports: ControllerPorts,
    private readonly hc: HealthHost,
  ) {}

  /**
   * A worker died: a spare steps in at once, the dead one is stopped (unless it is a fixed endpoint,
   * held out), and what is missing is started. A replacement that died in admission backs off.
   */
  dead(t: Tracked, from: WorkerHealthState): void {
    const w = t.info;
    const cfg = this.hc.config(w.model);
    const key = `${w.model}/${w.version}`;
    const replace = w.replaceable && (cfg?.replace ?? false) && !this.ports.workers.isAsleep(w.model, w.version);
    if (from === 'pending') this.backOff(this.startsOf(key));
    this.ports.emit({
      kind: 'worker_dead',
      model: w.model,
      version: w.version,
      message: `worker ${w.id} is dead${t.health.lastFailure ? ` (${t.health.lastFailure.reason}: ${t.health.lastFailure.detail})` : ''}; ${replace ? 'replacing it' : w.replaceable ? 'held out (replacement is off, or the version is asleep)' : 'a fixed endpoint: held out, not replaced'}`,
    });
    this.promoteSpares(w.model, w.version);
    if (!replace || this.stoppingIds.has(w.id)) return;
    // counted as stopping from now: nothing refills the version while the replacement waits its turn
    this.stopping.set(key, (this.stopping.get(key) ?? 0) + 1);
    this.hc.later(`replacing ${w.id}`, DEFAULTS.health.replaceDelayMs, () =>
      this.stop(w.id, () => this.ports.workers.stop(w))
        .finally(() => this.stopping.set(key, (this.stopping.get(key) ?? 1) - 1))
        .then(() => this.reconcileVersion(w.model, w.version)),
    );
  }

  /** Stop a worker once (whoever asks again meanwhile is a no-op), then forget it. */
  private async stop(id: string, fn: () => Promise<void>): Promise<void> {
    if (this.stoppingIds.has(id)) return;
    this.stoppingIds.add(id);
    try {
      await fn();
    } finally {
      this.stoppingIds.delete(id);
      this.hc.sync();
    }
  }

  /**
   * Every tracked version: its replicas and spares. One read of the registry per tick (the loaded
   * versions of every model) and one pass over the tracked workers: at 100 models × 2 versions × 5
   * workers, a read and a scan of all 1,000 workers per version cost the process ~50 ms of CPU every
   * second, and a read per model still ~11 ms (bench/results/scale.md): charged to every request.
   */
  async reconcile(): Promise<void> {
    const byModel = new Map<string, Map<string, Tracked[]>>();
    for (const t of this.hc.tracked.values()) {
      let vs = byModel.get(t.info.model);
      if (vs === undefined) byModel.set(t.info.model, (vs = new Map<string, Tracked[]>()));
      let ts = vs.get(t.info.version);
      if (ts === undefined) vs.set(t.info.version, (ts = []));
      ts.push(t);
    }
    // only loaded versions are reconciled (reconcileLoaded): the others are not read at all
    const listed = byModel.size === 0 ? [] : await this.ports.versions.list(undefined, LOADED_STATUSES).catch(() => [] as Version[]);
    const byKey = new Map(listed.map((v) => [`${v.model}/${v.id}`, v]));
    const versions = new Set<string>();
    for (const [model, tracked] of byModel) {
      for (const [id, ts] of tracked) {
        const key = `${model}/${id}`;
        versions.add(key);
        this.reconcileLoaded(model, id, byKey.get(key), ts);
      }
    }
    for (const k of this.starts.keys()) if (!versions.has(k)) this.starts.delete(k);
    for (const k of this.replicas.keys()) if (!versions.has(k)) this.replicas.delete(k);
  }

  private workers(model: string, version: string, role: WorkerRole, among?: readonly Tracked[]): Tracked[] {
    return (among ?? [...this.hc.tracked.values()]).filter((t) => t.info.model === model && t.info.version === version && t.info.role === role && alive(t));
  }

  private setRole(s: Tracked, role: WorkerRole, why: string): void {
    const { model, version } = s.info;
    s.info = { ...s.info, role };
    this.hc.applyWeight(s);
    this.ports.telemetry.health.worker(s.info, s.health.state, s.health.breaker);
    this.ports.emit({ kind: role === 'serving' ? 'spare_promoted' : 'spare_demoted', model, version, message: why });
    this.hc.spawn(
      `${role === 'serving' ? 'promoting' : 'demoting'} ${s.info.id}`,
      this.ports.audited(ACTOR, role === 'serving' ? 'worker.promote_spare' : 'worker.demote_to_spare', s.info.id, { model, version }, () =>
        this.ports.workers.setRole(s.info, role),
      ),
    );
  }

  /**
   * Ready spares take the place of serving workers that take no traffic, at once (no start, no lock:
   * weights and a role); when more serving workers take traffic than wanted (one recovered), the
   * one that came back last steps back to spare.
   */
  private promoteSpares(model: string, version: string, among?: readonly Tracked[]): void {
    const want = this.replicas.get(`${model}/${version}`);
    if (want === undefined) return;
    const up = this.workers(model, version, 'serving', among).filter((t) => t.weight > 0);
    let deficit = want - up.length;
    for (const s of this.workers(model, version, 'spare', among)) {
      if (deficit <= 0) break;
      if (s.health.state !== 'healthy') continue;
      deficit--;
      this.ports.telemetry.health.replacement(model, version, 'spare');
      this.setRole(s, 'serving', `spare ${s.info.id} took the place of a serving worker of ${model}/${version} that takes no traffic`);
    }
    const surplus = [...up].sort((a, b) => b.health.since - a.health.since).slice(0, Math.max(0, -deficit));
    for (const s of surplus)
      this.setRole(s, 'spare', `${s.info.id} of ${model}/${version} is healthy again; ${want} serving worker(s) take traffic without it: back to spare`);
  }

  async reconcileVersion(model: string, version: string): Promise<void> {
    if (!this.hc.config(model)) return;
    const v = await this.ports.versions.get(model, version).catch(() => undefined);
    this.reconcileLoaded(model, version, v, undefined);
  }

  /** One version as read from the registry (undefined: unknown), `among` its tracked workers when the caller grouped them. */
  private reconcileLoaded(model: string, version: string, v: Version | undefined, among: readonly Tracked[] | undefined): void {
    const cfg = this.hc.config(model);
    if (!cfg) return;
    const key = `${model}/${version}`;
    if (v === undefined || !isLoaded(v) || this.ports.workers.isAsleep(model, version)) return;
    // a rolling update owns the version's worker count while it replaces them: nothing refilled or trimmed
    if (this.ports.workers.claimedBy(model, version) !== undefined) return;
    const wantSpares = v.spares ?? 0;
    // the scheduler's count where it set one (docs/multi-model.md), else the configured
    const replicas = this.ports.workers.target(model, version) ?? v.replicas;
    this.replicas.set(key, v.provider.kind === 'static' ? v.provider.endpoints.length - wantSpares : replicas);
    this.promoteSpares(model, version, among);
    const spares = this.workers(model, version, 'spare', among);
    this.ports.telemetry.health.spares(model, version, spares.filter((s) => s.health.state === 'healthy').length, wantSpares);
    if (v.provider.kind === 'static' || !cfg.replace) return;
    // spares beyond the wanted (after a serving worker stepped back): the newest go, drained first (a
    // worker demoted a moment ago may still finish requests; at weight 0 it gets no new ones)
    const surplus = [...spares].sort((a, b) => a.info.startedAt - b.info.startedAt).slice(wantSpares);
    for (const s of surplus) {
      const drainThenStop = async () => {
        await this.ports.workers.drainOne(s.info, DEFAULTS.gateway.drainTimeoutMs);
        await this.ports.workers.stop(s.info);
      };
      this.hc.spawn(`stopping the surplus spare ${s.info.id}`, this.stop(s.info.id, drainThenStop));
    }
    const st = this.startsOf(key);
    if (st.inFlight || (this.stopping.get(key) ?? 0) > 0 || this.ports.clock.now() < st.nextAt) return;
    const serving = this.workers(model, version, 'serving', among);
    const role: WorkerRole | undefined = serving.length < replicas ? 'serving' : spares.length < wantSpares ? 'spare' : undefined;
    if (role === undefined) return;
    // a version of prefill and decode workers gets one of the role it is short of
    const prefills = serving.filter((t) => t.info.kvRole === 'prefill').length;
    const kvRole = v.roles === undefined || role === 'spare' ? undefined : prefills < v.roles.prefill ? 'prefill' : 'decode';
    st.inFlight = true;
    this.hc.spawn(`starting a ${kvRole ?? role} worker of ${key}`, this.start(model, version, role, st, kvRole));
  }

  private startsOf(key: string): Starts {
    let st = this.starts.get(key);
    if (!st) this.starts.set(key, (st = { inFlight: false, failures: 0, nextAt: 0 }));
    return st;
  }

  private backOff(st: Starts): number {
    st.failures++;
    const wait = Math.min(DEFAULTS.health.replaceBackoffMaxMs, DEFAULTS.health.replaceBackoffMs * 2 ** (st.failures - 1));
    st.nextAt = this.ports.clock.now() + wait;
    return wait;
  }

  /**
   * Loaded (and, before a start, awake), checked under the model's lock: no unload, sleep or redeploy
   * of the model is half done. After the start the version may sleep: a version put to sleep gets its
   * new worker asleep too (a time-shared model's, a standby's whose only worker died), and keeps it.
   */
  private usable(model: string, version: string, awake = true): Promise<boolean> {
    return this.ports.exclusive(model, async () => {
      const v = await this.ports.versions.get(model, version).catch(() => undefined);
      return v !== undefined && isLoaded(v) && (!awake || !this.ports.workers.isAsleep(model, version));
    });
  }

  /**
   * Start one worker (pending: admitted by its probes). The version is checked under the model's
   * lock before and after (the start itself holds no lock: a rollback must not wait for a worker to
   * load); one unloaded or put to sleep meanwhile gets the new worker stopped again.
   */
  private async start(model: string, version: string, role: WorkerRole, st: Starts, kvRole: KvRole | undefined): Promise<void> {
    const key = `${model}/${version}`;
    try {
      if (!(await this.usable(model, version))) return;
      const w = await this.ports.workers.start(model, version, role, newHealth('pending', this.ports.clock.now()), { kvRole });
      if (!(await this.usable(model, version, false))) {
        await this.ports.workers.stop(w);
        return;
      }
      if (role === 'serving') this.ports.telemetry.health.replacement(model, version, 'started');
      this.ports.emit({
        kind: role === 'spare' ? 'spare_started' : 'worker_replaced',
        model,
        version,
        message: `started ${w.id} (${role}) for ${key}; it takes its place once its probes pass`,
      });
      await this.ports.audited(ACTOR, role === 'spare' ? 'worker.start_spare' : 'worker.replace', w.id, { model, version }, () => Promise.resolve());
      this.hc.sync();
    } catch (err) {
      const e = toGlidepathError(err);
      if (e.code === 'worker_start_cancelled') return; // the control plane shuts down: nothing to retry
      const wait = this.backOff(st);
      this.ports.emit({
        kind: 'worker_start_failed',
        model,
        version,
        message: `starting a ${role} worker of ${key} failed (${e.code}: ${e.message}); next try in ${wait} ms`,
      });
    } finally {
      st.inFlight = false;
    }
  }

  /**
   * Each model's degradation level from the share of its routed versions' serving workers that take
   * traffic (seed 004's thresholds: ≥1 none, ≥0.75 1, ≥0.5 2, ≥0.25 3, below 4).
   */
  reportDegradation(by: Map<string, { model: string; version: string; up: number; serving: number }>): void {
    for (const model of this.ports.models.names()) {
      if (!this.hc.config(model)) continue;
      let share = 0;
      let routed = 0;
      for (const rv of this.ports.routes.current(model).versions) {
        if (rv.weight <= 0) continue;
        const e = by.get(`${model}/${rv.id}`);
        // a version a rolling update shrinks or grows on purpose is measured against what it runs now
        const claimed = this.ports.workers.claimedBy(model, rv.id) !== undefined;
        const want = (claimed ? undefined : this.replicas.get(`${model}/${rv.id}`)) ?? e?.serving ?? 0;
        routed += rv.weight;
        share += rv.weight * (want > 0 ? Math.min(1, (e?.up ?? 0) / want) : 1);
      }
      const ratio = routed > 0 ? share / routed : 1;
      const level = ratio >= 1 ? 0 : ratio >= 0.75 ? 1 : ratio >= 0.5 ? 2 : ratio >= 0.25 ? 3 : 4;
      this.ports.telemetry.health.degradation(model, level);
    }
  }
}
