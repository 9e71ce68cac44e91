// The worker health controller: probes every worker on its interval (jittered), feeds real traffic's
// outcomes and process exits into each worker's state machine (machine.ts), and carries out what a
// change means — routing weight, drain, events, audit, metrics, persistence — and hands dead workers
// to recovery (recovery.ts). Sees only the ports; built per App (src/control/controllers.ts).
import type { HealthConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { NotFoundError, toGlidepathError } from '../errors.js';
import type { ControllerPorts, WorkerInfo } from '../rollout/ports.js';
import type { RequestRecord } from '../telemetry/record.js';
import type { WorkerFault } from '../telemetry/telemetry.js';
import { heldIn, isTrial, newHealth, step } from './machine.js';
import type { MachineSettings, Observation, WorkerHealth } from './machine.js';
import { routingWeightOf } from './persisted.js';
import { nextExpectation, probeWorker } from './prober.js';
import type { ProbeCheck } from './prober.js';
import { FAULTS, ttftOutliers } from './passive.js';
import { ProbeSets } from './probe-sets.js';
import { Recovery } from './recovery.js';
import { ReconcileLoop } from '../rollout/loop.js';
import { RateWindow, TtftTracker } from './tracked.js';
import type { HealthHost, Tracked } from './tracked.js';

const ACTOR = { name: 'health' };

export class HealthController implements HealthHost {
  readonly tracked = new Map<string, Tracked>();
  /** The versions' probe sets: recorded, pinned, re-recorded (probe-sets.ts). */
  readonly probeSets: ProbeSets;
  /** model/version → when its ejection cap was last reported (once per probe interval). */
  private readonly capReported = new Map<string, number>();
  private readonly recovery: Recovery;
  private readonly unsubs: (() => void)[] = [];
  private readonly loop: ReconcileLoop;
  private readonly rand: () => number;
  /** Versions reported as having no worker that takes traffic (reported once per episode). */
  private readonly down = new Set<string>();

  constructor(
    private readonly ports: ControllerPorts,
    opts: { tickMs: number; rand?: () => number },
  ) {
    this.rand = opts.rand ?? Math.random;
    this.loop = new ReconcileLoop(
      ports.clock,
      opts.tickMs,
      () => this.tick(),
      (what, err) => ports.emit({ kind: 'health_error', message: `${what}: ${toGlidepathError(err).message}` }),
    );
    this.recovery = new Recovery(ports, this);
    this.probeSets = new ProbeSets(ports, this);
    // versions load during boot, before run(): their probe sets are recorded as they come up
    this.unsubs.push(ports.workers.onLoaded((v, ws) => this.probeSets.recordAtLoad(v, ws)));
  }

  /** The model's health settings, or undefined when health is off for it. */
  config(model: string): HealthConfig | undefined {
    const h = this.ports.models.config(model).health;
    return h?.enabled ? h : undefined;
  }

  run(): void {
    if (this.running) return;
    const p = this.ports;
    this.unsubs.push(
      p.telemetry.subscribe((r) => this.onRecord(r)),
      p.telemetry.subscribeFaults((f) => this.onFault(f)),
      p.workers.onExit((w, detail) => {
        const t = this.tracked.get(w.id);
        if (t) this.observe(t, { kind: 'exited', detail });
      }),
    );
    // workers tracked before the loop ran (recorded while the boot loaded their version) get their
    // probes once it runs; the first tick (at once) tracks and starts the others
    const before = [...this.tracked.values()];
    this.loop.start(true);
    for (const t of before) this.resume(t);
  }

  private get running(): boolean {
    return this.loop.started;
  }

  shutdown(): void {
    this.loop.stop();
    for (const u of this.unsubs.splice(0)) u();
    for (const t of this.tracked.values()) t.cancelProbe?.();
  }

  /** Resolves when nothing the controller started is still running (tests). */
  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  /** Run `p` as the controller's background work: errors become events, never unhandled rejections. */
  spawn(what: string, p: Promise<unknown>): void {
    this.loop.spawn(p, what);
  }

  /** Start `work` in the background `ms` from now (not if the controller stops first). */
  later(what: string, ms: number, work: () => Promise<unknown>): void {
    this.loop.later(ms, what, work);
  }

  // ---- the loop ------------------------------------------------------------------------------

  private tick(): void {
    this.sync();
    const now = this.ports.clock.now();
    for (const t of this.tracked.values()) {
      this.observe(t, { kind: 'tick' });
      const cfg = this.config(t.info.model);
      if (cfg && t.dirty && now - t.persistedAt >= cfg.intervalMs) this.persist(t);
    }
    this.passiveLatency();
    this.report();
    this.spawn('recovery', this.recovery.reconcile());
  }

  /** Track the workers that appeared (loads, replacements, adoption), forget the ones gone. */
  sync(): void {
    const live = this.ports.workers.list();
    const seen = new Set<string>();
    for (const w of live) {
      if (this.config(w.model) === undefined) continue;
      seen.add(w.id);
      const t = this.tracked.get(w.id);
      if (t) t.info = w;
      else this.track(w);
    }
    for (const [id, t] of this.tracked) {
      if (seen.has(id)) continue;
      t.cancelProbe?.();
      this.tracked.delete(id);
      this.ports.telemetry.health.forget(t.info);
    }
    // what is kept per version goes with its last worker (an unloaded version's probe set is read again if it comes back)
    const versions = new Set([...this.tracked.values()].map((t) => `${t.info.model}/${t.info.version}`));
    this.probeSets.prune(versions);
    for (const k of this.capReported.keys()) if (!versions.has(k)) this.capReported.delete(k);
    for (const k of this.down) if (!versions.has(k)) this.down.delete(k);
  }

  /** The worker's tracked health, tracked from now when it was not. */
  trackedOf(w: WorkerInfo): Tracked {
    return this.tracked.get(w.id) ?? this.track(w);
  }

  private track(w: WorkerInfo): Tracked {
    const now = this.ports.clock.now();
    // never judged: a spare must pass its probes; a serving worker was warmed and is recorded at load
    const health = w.health ?? newHealth(w.role === 'spare' ? 'pending' : 'healthy', now);
    const t: Tracked = {
      info: w,
      health,
      // workers start at different prompts of the set (then take them in turn)
      turn: Math.floor(this.rand() * (this.config(w.model)?.probes.length ?? 1)),
      soon: true,
      cancelProbe: undefined,
      busy: false,
      weight: NaN,
      dirty: w.health === undefined,
      persistedAt: now,
      ratio: undefined,
      rate: new RateWindow(this.config(w.model)?.rateWindow ?? DEFAULTS.health.rateWindow),
      ttft: new TtftTracker(),
    };
    this.tracked.set(w.id, t);
    this.applyWeight(t);
    this.ports.telemetry.health.worker(w, health.state, health.breaker);
    if (t.dirty) this.persist(t);
    if (this.running) this.resume(t);
    return t;
  }

  /**
   * Carry on with a worker as its state says: probes, and for one a restart found DRAINING or DEAD
   * (its drain or replacement was cut short), the drain or the replacement.
   */
  private resume(t: Tracked): void {
    this.schedule(t);
    if (t.health.state === 'draining') this.spawn(`draining ${t.info.id}`, this.drain(t));
    if (t.health.state === 'dead') this.recovery.dead(t, 'dead');
  }

  private asleep(t: Tracked): boolean {
    return this.ports.workers.isAsleep(t.info.model, t.info.version);
  }

  // ---- probes --------------------------------------------------------------------------------

  /** Set the worker's next probe by its state: at once while it must prove itself, on the interval otherwise. */
  schedule(t: Tracked): void {
    t.cancelProbe?.();
    t.cancelProbe = undefined;
    const cfg = this.config(t.info.model);
    if (!cfg || !this.running) return;
    const h = t.health;
    let ms: number;
    if (h.state === 'draining' || h.state === 'dead') return;
    if (h.state === 'unhealthy' && h.breaker === 'open') return; // the tick turns it half-open
    // a worker that must prove itself (admission, half-open) soon, not back to back, except a worker
    // waiting for admission whose probes all passed so far: its next follows at once, so that a
    // replacement takes traffic one probe set after it started, not a gap per prompt later (three
    // prompts and 250 ms gaps held the simulator's replacements out ~1.2 s; bench:resilience's
    // kills every 2 s then found the fleet a worker short). An asleep one is only looked at again later.
    if (this.asleep(t)) ms = cfg.intervalMs * (1 + cfg.jitter * (2 * this.rand() - 1));
    else if (h.state === 'pending') ms = t.soon ? 0 : DEFAULTS.health.probeGapMs;
    else if (h.state === 'unhealthy' && !isTrial(h)) ms = DEFAULTS.health.probeGapMs;
    else ms = cfg.intervalMs * (1 + cfg.jitter * (2 * this.rand() - 1));
    t.cancelProbe = this.ports.clock.after(ms, () => this.spawn(`probing ${t.info.id}`, this.probe(t)));
  }

  private async probe(t: Tracked): Promise<void> {
    t.cancelProbe = undefined;
    if (t.busy || this.tracked.get(t.info.id) !== t) return;
    const cfg = this.config(t.info.model);
    // an asleep engine answers nothing by design: no verdict until it is awake
    if (!cfg || this.asleep(t)) return this.schedule(t);
    t.busy = true;
    t.soon = false; // until this probe passes
    try {
      const set = await this.probeSets.get(t.info.model, t.info.version);
      if (set === undefined) {
        // not recorded (an event says why); tried again after a back-off. A worker waiting for admission
        // meanwhile is admitted on its warm-up alone, as a deploy's workers are, and said loudly
        if (t.health.state === 'pending' && this.probeSets.failing(t.info.model, t.info.version)) this.restart(t, 'healthy', 'admitted without probes');
        return;
      }
      const h = t.health;
      const check: ProbeCheck = h.state === 'pending' ? 'admission' : h.state === 'unhealthy' ? 'half_open' : 'routine';
      // a model degraded to level 3 or worse relaxes its latency gates (a probe's spike limit among them)
      const relax = this.ports.routes.latencyFactor(t.info.model);
      const r = await probeWorker(this.ports, t.info, nextExpectation(set, t.turn++), h, cfg, check, this.poolRatio(t), relax);
      t.ratio = r.ratio;
      t.soon = r.obs?.kind === 'probe_pass';
      if (r.obs !== undefined && this.tracked.get(t.info.id) === t && !this.asleep(t)) this.observe(t, r.obs);
    } finally {
      t.busy = false;
      if (this.tracked.get(t.info.id) === t) this.schedule(t);
    }
  }

  /** A version's serving workers that are not dead (what a probe set is recorded from). */
  liveServing(model: string, version: string): WorkerInfo[] {
    return this.ports.workers.list(model, version).filter((w) => w.role === 'serving' && this.tracked.get(w.id)?.health.state !== 'dead');
  }

  /** The median latency ratio of the other serving workers of the version at their last probe (NaN when none is known). */
  private poolRatio(t: Tracked): number {
    const rs: number[] = [];
    for (const o of this.serving(t.info.model, t.info.version)) if (o !== t && o.ratio !== undefined) rs.push(o.ratio);
    if (rs.length === 0) return NaN;
    rs.sort((a, b) => a - b);
    return rs[Math.floor((rs.length - 1) / 2)] as number;
  }

  /** An operator puts a worker health took out back on probation: it takes traffic once its admission probes pass. */
  readmit(id: string): WorkerHealth {
    const t = this.tracked.get(id);
    if (!t) throw new NotFoundError('worker_not_found', `no worker ${JSON.stringify(id)} under health checks (glidepath workers lists them)`);
    return this.restart(t, 'pending');
  }

  /** Start a worker's health afresh (`why`: an event saying so); its probe baseline is kept. */
  private restart(t: Tracked, state: 'pending' | 'healthy', why?: string): WorkerHealth {
    const prev = t.health;
    t.health = { ...newHealth(state, this.ports.clock.now()), baselineMs: prev.baselineMs };
    t.soon = true; // probation anew: its admission probes follow one another while they pass
    this.persist(t);
    this.applyWeight(t);
    this.transitioned(t, prev, t.health);
    const { model, version, id } = t.info;
    if (why) this.ports.emit({ kind: 'worker_unchecked', model, version, message: `${id} ${why}: ${model}/${version} has no probe set to check it against` });
    return t.health;
  }

  // ---- passive signals -------------------------------------------------------------------------

  /** Every request record (synchronously, on the request's path): cheap unless the worker has something to prove. */
  private onRecord(r: RequestRecord): void {
    if (r.shadow || r.status !== 200 || r.errorCode !== undefined) return;
    const t = this.tracked.get(r.worker);
    if (t === undefined) return;
    t.rate.push(false);
    if (r.stream) t.ttft.observe(r.ttftMs - r.queueMs);
    if (t.health.trafficFailures > 0 || t.health.trialLeft > 0) this.observe(t, { kind: 'traffic_ok' });
  }

  private onFault(f: WorkerFault): void {
    const reason = FAULTS[f.code];
    const t = this.tracked.get(f.worker);
    const cfg = this.config(f.model);
    if (reason === undefined || t === undefined || !cfg?.passive || this.asleep(t)) return;
    t.rate.push(true);
    this.ports.telemetry.health.passiveFailure(f.model, f.version, reason);
    const rateTripped = t.rate.tripped(cfg.failureRate, cfg.rateMinCalls);
    this.observe(t, { kind: 'traffic_fail', reason, detail: `a request failed with ${f.code}`, rateTripped });
  }

  /** TTFT outliers: a worker much slower to first token than the median of its pool is SUSPICIOUS (a throttled GPU). */
  private passiveLatency(): void {
    const byVersion = new Map<string, Tracked[]>();
    for (const t of this.tracked.values()) {
      if (t.info.role !== 'serving' || (t.health.state !== 'healthy' && t.health.state !== 'suspicious')) continue;
      const k = `${t.info.model}/${t.info.version}`;
      byVersion.set(k, [...(byVersion.get(k) ?? []), t]);
    }
    for (const ts of byVersion.values()) {
      const cfg = this.config((ts[0] as Tracked).info.model);
      if (!cfg?.passive) continue;
      for (const { t, detail } of ttftOutliers(ts, cfg)) {
        this.ports.telemetry.health.passiveFailure(t.info.model, t.info.version, 'ttft_outlier');
        this.observe(t, { kind: 'traffic_fail', reason: 'ttft_outlier', detail, rateTripped: false });
      }
    }
  }

  // ---- applying a change -------------------------------------------------------------------------

  settings(t: Tracked, cfg: HealthConfig): MachineSettings {
    return {
      failureThreshold: cfg.failureThreshold,
      healthyAfter: cfg.healthyAfter,
      recoveryTimeoutMs: cfg.recoveryTimeoutMs,
      recoveryTimeoutMaxMs: cfg.recoveryTimeoutMaxMs,
      halfOpenProbes: cfg.halfOpenProbes,
      halfOpenRequests: cfg.halfOpenRequests,
      // a worker nobody can replace (a static endpoint) is never given up for failed recoveries: it is held out and retried
      deadAfterFailedRecoveries: t.info.replaceable && cfg.replace ? cfg.deadAfterFailedRecoveries : Infinity,
      baselineAlpha: DEFAULTS.health.baselineAlpha,
    };
  }

  /** Feed one observation to a worker's machine and carry out what changed. */
  observe(t: Tracked, o: Observation): void {
    const cfg = this.config(t.info.model);
    if (!cfg) return;
    const prev = t.health;
    const set = this.probeSets.cached(t.info.model, t.info.version);
    const now = this.ports.clock.now();
    let next = step(prev, o, { now, settings: this.settings(t, cfg), admitAfter: set?.probes.length ?? 1 });
    if (next === prev) return;
    if (o.kind !== 'exited' && this.capped(t, prev, next, cfg)) next = heldIn(prev, next, now);
    if (prev.breaker !== 'closed' && next.breaker === 'closed') t.rate.reset();
    t.health = next;
    // per-request counters (a run of failed requests) are not worth a write each: they go with the next one
    const material = next.state !== prev.state || next.breaker !== prev.breaker || next.failures !== prev.failures || next.trialLeft !== prev.trialLeft;
    if (material) this.persist(t);
    else t.dirty = true;
    this.applyWeight(t);
    if (next.state === prev.state && next.breaker === prev.breaker) return;
    this.transitioned(t, prev, next);
  }

  /**
   * The ejection cap: would this change take one more serving worker out of rotation than
   * `max_ejected_share` of its version allows (at least one may always go)? Reported once per interval.
   */
  private capped(t: Tracked, prev: WorkerHealth, next: WorkerHealth, cfg: HealthConfig): boolean {
    if (t.info.role !== 'serving' || routingWeightOf('serving', prev) === 0 || routingWeightOf('serving', next) > 0) return false;
    const serving = this.serving(t.info.model, t.info.version);
    const out = serving.filter((o) => o !== t && o.weight === 0).length;
    if (out + 1 <= Math.max(1, Math.floor(cfg.maxEjectedShare * serving.length))) return false;
    const key = `${t.info.model}/${t.info.version}`;
    const now = this.ports.clock.now();
    if (now - (this.capReported.get(key) ?? -Infinity) >= cfg.intervalMs) {
      this.capReported.set(key, now);
      const f = next.lastFailure;
      const corruption = f?.reason === 'token_mismatch' || f?.reason === 'logprob_drift';
      const e = {
        kind: corruption ? 'probe_set_suspect' : 'ejection_capped',
        model: t.info.model,
        version: t.info.version,
        message: `${t.info.id} failed (${f?.reason ?? 'unknown'}: ${f?.detail ?? ''}) but ${out} of ${serving.length} serving worker(s) are already out, the most max_ejected_share ${cfg.maxEjectedShare} allows: it stays in at reduced weight${corruption ? '. Several workers answering the probes otherwise at once is likelier a probe set that no longer fits the engine than silent corruption everywhere: check it (glidepath probes show) and record it again' : ''}`,
        at: now,
      };
      this.ports.emit(e);
      this.spawn('notifying', this.ports.notify(e));
    }
    return true;
  }

  /** The data plane's weight for the worker, when it changed (a trial's pick budget goes with the change into the trial). */
  applyWeight(t: Tracked): void {
    const w = routingWeightOf(t.info.role, t.health);
    if (w === t.weight) return;
    const budget = isTrial(t.health) && t.info.role === 'serving' ? t.health.trialLeft : Infinity;
    t.weight = w;
    try {
      this.ports.workers.setWeight(t.info, w, budget);
    } catch {
      // the worker left the data plane already (stopped): nothing to route
    }
  }

  private transitioned(t: Tracked, prev: WorkerHealth, next: WorkerHealth): void {
    const w = t.info;
    const p = this.ports;
    p.telemetry.health.worker(w, next.state, next.breaker);
    const why = next.lastFailure && next.lastFailure.at === next.since ? `: ${next.lastFailure.reason} (${next.lastFailure.detail})` : '';
    const breaker = prev.breaker !== next.breaker ? `, breaker ${prev.breaker} → ${next.breaker}` : '';
    const message = `worker ${w.id} ${prev.state} → ${next.state}${breaker}${why}`;
    p.emit({
      kind: 'worker_health',
      model: w.model,
      version: w.version,
      message,
      data: { worker: w.id, from: prev.state, to: next.state, breaker: next.breaker, lastFailure: next.lastFailure },
    });
    this.spawn(
      'auditing a health change',
      p.audited(ACTOR, 'worker.health', w.id, { from: prev.state, to: next.state, breaker: next.breaker, reason: next.lastFailure?.reason ?? null }, () =>
        Promise.resolve(),
      ),
    );
    if (next.state === 'draining') this.spawn(`draining ${w.id}`, this.drain(t));
    if (next.state === 'dead') this.recovery.dead(t, prev.state);
    // a new state or breaker (open ↔ half-open) means another probe schedule
    this.schedule(t);
    this.checkVersion(w.model, w.version);
  }

  /** Take the worker's in-flight requests off it: at once for a corrupt one (its answers are wrong), else let them finish (bounded). */
  private async drain(t: Tracked): Promise<void> {
    const d = await this.ports.workers.drainOne(t.info, t.health.corrupt ? 0 : DEFAULTS.gateway.drainTimeoutMs).catch(() => ({ aborted: 0, elapsedMs: 0 }));
    if (d.aborted > 0) {
      this.ports.emit({
        kind: 'worker_drained',
        model: t.info.model,
        version: t.info.version,
        message: `worker ${t.info.id}: ${d.aborted} in-flight request(s) taken off it`,
      });
    }
    this.observe(t, { kind: 'drained' });
  }

  /** A version none of whose serving workers takes traffic is reported loudly (event, audit, webhooks), once per episode. */
  private checkVersion(model: string, version: string): void {
    const key = `${model}/${version}`;
    const serving = this.serving(model, version);
    const up = serving.filter((t) => t.weight > 0).length;
    if (serving.length > 0 && up === 0 && !this.down.has(key)) {
      this.down.add(key);
      const message = `no worker of ${key} takes traffic: all ${serving.length} are unhealthy (${serving.map((t) => `${t.info.id} ${t.health.state}`).join(', ')})`;
      const e = { kind: 'version_unhealthy', model, version, message, at: this.ports.clock.now() };
      this.ports.emit(e);
      this.spawn('notifying', this.ports.notify(e));
    } else if (up > 0 && this.down.delete(key)) {
      this.ports.emit({ kind: 'version_recovered', model, version, message: `${key} takes traffic again on ${up} worker(s)` });
    }
  }

  persist(t: Tracked): void {
    t.dirty = false;
    t.persistedAt = this.ports.clock.now();
    this.spawn(`saving the health of ${t.info.id}`, this.ports.workers.saveHealth(t.info, t.health));
  }

  /** The serving workers of a version as tracked. */
  private serving(model: string, version: string): Tracked[] {
    return [...this.tracked.values()].filter((t) => t.info.model === model && t.info.version === version && t.info.role === 'serving');
  }

  /** Gauges: each version's workers that take traffic, and each model's degradation level. */
  private report(): void {
    const by = new Map<string, { model: string; version: string; up: number; serving: number }>();
    for (const t of this.tracked.values()) {
      if (t.info.role !== 'serving') continue;
      const k = `${t.info.model}/${t.info.version}`;
      const e = by.get(k) ?? { model: t.info.model, version: t.info.version, up: 0, serving: 0 };
      e.serving++;
      if (t.weight > 0) e.up++;
      by.set(k, e);
    }
    for (const e of by.values()) this.ports.telemetry.health.version(e.model, e.version, e.up, e.serving);
    this.recovery.reportDegradation(by);
  }
}
