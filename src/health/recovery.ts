// Recovery: keeps each loaded version at its replicas and hot spares. A dead worker is stopped (its
// GPUs freed) and its place taken at once by a ready spare, or by a new worker started through the
// provider — which takes traffic only after its admission probes pass; a failed start is retried
// with back-off. Declarative (what is missing is recomputed from the live fleet every tick), so a
// control plane killed halfway through a replacement finishes it after the restart.
import { DEFAULTS } from '../defaults.js';
import { isLoaded } from '../domain/version.js';
import { toGlidepathError } from '../errors.js';
import type { ControllerPorts, WorkerRole } from '../rollout/ports.js';
import type { HealthHost, Tracked } from './tracked.js';
import { newHealth } from './machine.js';

const ACTOR = { name: 'health' };

/** Per version: a start in flight, and the back-off after failed ones. */
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

  constructor(
    private readonly ports: ControllerPorts,
    private readonly hc: HealthHost,
  ) {}

  /** A worker died: a spare steps in, the dead one is stopped (unless it is a fixed endpoint, held out), and what is missing is started. */
  dead(t: Tracked): void {
    const w = t.info;
    const cfg = this.hc.config(w.model);
    const replace = w.replaceable && (cfg?.replace ?? false);
    this.ports.emit({
      kind: 'worker_dead',
      model: w.model,
      version: w.version,
      message: `worker ${w.id} is dead${t.health.lastFailure ? ` (${t.health.lastFailure.reason}: ${t.health.lastFailure.detail})` : ''}; ${replace ? 'replacing it' : w.replaceable ? 'replacement is off (health.replace: false): held out' : 'a fixed endpoint: held out, not replaced'}`,
    });
    this.promoteSpares(w.model, w.version);
    if (!replace) return;
    const key = `${w.model}/${w.version}`;
    this.stopping.set(key, (this.stopping.get(key) ?? 0) + 1);
    this.hc.spawn(
      `replacing ${w.id}`,
      this.ports.workers
        .stop(w)
        .finally(() => this.stopping.set(key, (this.stopping.get(key) ?? 1) - 1))
        .then(() => {
          this.hc.sync();
          return this.reconcileVersion(w.model, w.version);
        }),
    );
  }

  /** Every tracked version: its replicas and spares. */
  async reconcile(): Promise<void> {
    const versions = new Map<string, [string, string]>();
    for (const t of this.hc.tracked.values()) versions.set(`${t.info.model}/${t.info.version}`, [t.info.model, t.info.version]);
    for (const [model, version] of versions.values()) await this.reconcileVersion(model, version);
  }

  private version(model: string, version: string): { serving: Tracked[]; spares: Tracked[] } {
    const ts = [...this.hc.tracked.values()].filter((t) => t.info.model === model && t.info.version === version && alive(t));
    return { serving: ts.filter((t) => t.info.role === 'serving'), spares: ts.filter((t) => t.info.role === 'spare') };
  }

  /** Ready spares take the place of missing serving workers, at once (no start, no lock: weights and a role). */
  private promoteSpares(model: string, version: string): void {
    const want = this.replicas.get(`${model}/${version}`);
    if (want === undefined) return;
    const { serving, spares } = this.version(model, version);
    let deficit = want - serving.length;
    for (const s of spares) {
      if (deficit <= 0) return;
      if (s.health.state !== 'healthy') continue;
      deficit--;
      s.info = { ...s.info, role: 'serving' };
      this.hc.applyWeight(s);
      this.ports.telemetry.health.worker(s.info, s.health.state, s.health.breaker);
      this.ports.telemetry.health.replacement(model, version, 'spare');
      this.ports.emit({ kind: 'spare_promoted', model, version, message: `spare ${s.info.id} took a dead worker's place in ${model}/${version}` });
      this.hc.spawn(
        `promoting ${s.info.id}`,
        this.ports.audited(ACTOR, 'worker.promote_spare', s.info.id, { model, version }, () => this.ports.workers.setRole(s.info, 'serving')),
      );
    }
  }

  /** Serving replicas each version wants (from its registry record; refreshed by reconcileVersion). */
  private readonly replicas = new Map<string, number>();

  async reconcileVersion(model: string, version: string): Promise<void> {
    const cfg = this.hc.config(model);
    if (!cfg) return;
    const key = `${model}/${version}`;
    const v = await this.ports.versions.get(model, version).catch(() => undefined);
    if (v === undefined || !isLoaded(v) || this.ports.workers.isAsleep(model, version)) return;
    const wantSpares = v.spares ?? 0;
    const isStatic = v.provider.kind === 'static';
    this.replicas.set(key, v.provider.kind === 'static' ? v.provider.endpoints.length - wantSpares : v.replicas);
    this.promoteSpares(model, version);
    const { serving, spares } = this.version(model, version);
    this.ports.telemetry.health.spares(model, version, spares.filter((s) => s.health.state === 'healthy').length, wantSpares);
    if (isStatic || !cfg.replace) return;
    const st = this.starts.get(key) ?? { inFlight: false, failures: 0, nextAt: 0 };
    this.starts.set(key, st);
    if (st.inFlight || (this.stopping.get(key) ?? 0) > 0 || this.ports.clock.now() < st.nextAt) return;
    const role: WorkerRole | undefined = serving.length < v.replicas ? 'serving' : spares.length < wantSpares ? 'spare' : undefined;
    if (role === undefined) return;
    st.inFlight = true;
    this.hc.spawn(`starting a ${role} worker of ${key}`, this.start(model, version, role, st));
  }

  /** Start one worker (pending: admitted by its probes); on failure back off; a version unloaded meanwhile gets it stopped again. */
  private async start(model: string, version: string, role: WorkerRole, st: Starts): Promise<void> {
    const key = `${model}/${version}`;
    try {
      const w = await this.ports.workers.start(model, version, role, newHealth('pending', this.ports.clock.now()));
      st.failures = 0;
      st.nextAt = 0;
      const v = await this.ports.versions.get(model, version);
      if (!isLoaded(v)) {
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
      st.failures++;
      const wait = Math.min(DEFAULTS.health.replaceBackoffMaxMs, DEFAULTS.health.replaceBackoffMs * 2 ** (st.failures - 1));
      st.nextAt = this.ports.clock.now() + wait;
      const e = toGlidepathError(err);
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
        const want = this.replicas.get(`${model}/${rv.id}`) ?? e?.serving ?? 0;
        routed += rv.weight;
        share += rv.weight * (want > 0 ? Math.min(1, (e?.up ?? 0) / want) : 1);
      }
      const ratio = routed > 0 ? share / routed : 1;
      const level = ratio >= 1 ? 0 : ratio >= 0.75 ? 1 : ratio >= 0.5 ? 2 : ratio >= 0.25 ? 3 : 4;
      this.ports.telemetry.health.degradation(model, level);
    }
  }
}
