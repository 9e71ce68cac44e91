// The multi-model scheduler (seed 003): every round it measures each model (its active version's
// serving replicas, its recent TTFT/TPOT p99 and rate), asks the planner (plan.ts) for this round's
// replica counts, and carries them out behind the ports — preempted and scaled-down workers drained
// before they stop, new ones started on the GPUs freed — with every decision explained, audited and
// emitted. Health's recovery keeps the counts it sets (WorkersPort.setTarget); they survive a restart.
import type { SchedulerConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { engineTraitsOf } from '../domain/spec.js';
import { ConflictError, toGlidepathError } from '../errors.js';
import { newHealth } from '../health/machine.js';
import { ReconcileLoop } from '../rollout/loop.js';
import type { Actor, ControllerPorts, WorkerInfo } from '../rollout/ports.js';
import { plan } from './plan.js';
import type { Decision, ModelLoad, Plan, PlanSettings } from './plan.js';
import { LoadWindow } from './window.js';
import { remoteLoad } from './remote-load.js';

const ACTOR: Actor = { name: 'scheduler' };

/** Serving workers that count: not dead nor draining (as health's recovery counts them). */
const servingOf = (ws: WorkerInfo[]) => ws.filter((w) => w.role === 'serving' && w.health?.state !== 'dead' && w.health?.state !== 'draining');
const TARGETS_KEY = 'scheduler.targets';

/** One round: what was measured, what was decided, whether it was carried out. */
export interface Round {
  at: number;
  dryRun: boolean;
  /** The scheduler runs and measures traffic (a plan asked of a disabled one has no p99s, rates or idle times). */
  measured: boolean;
  /** Free GPUs the round could give (those health's recovery is about to start replacements on left out). */
  freeGpus: number;
  /** GPUs kept for recovery's replacements of dead workers (free, but not the round's to give). */
  reservedGpus: number;
  models: ModelLoad[];
  plan: Plan;
}

export interface HistoryEntry extends Decision {
  at: number;
  version: string;
  dryRun: boolean;
  /** How it went: done, or the error that stopped it. */
  outcome: string;
  /** The GPUs the change freed (a scale-down, a preemption) or took (a scale-up), where known. */
  gpus: string[];
}

type Targets = Record<string, { version: string; replicas: number }>;

export class Scheduler {
  private readonly loop: ReconcileLoop;
  private readonly windows = new Map<string, LoadWindow>();
  private readonly changedAt = new Map<string, number>();
  /** The version each model's target was set for (cleared when another becomes active). */
  private readonly setFor = new Map<string, string>();
  private readonly history: HistoryEntry[] = [];
  private last: Round | undefined;
  private unsub: (() => void) | undefined;
  private busy = false;

  constructor(
    private readonly ports: ControllerPorts,
    private readonly cfg: SchedulerConfig,
    /** Models taking turns on shared GPUs: their replicas are their group's slots, not the scheduler's. */
    private readonly timeShared: (model: string) => boolean = () => false,
  ) {
    this.loop = new ReconcileLoop(
      ports.clock,
      cfg.intervalMs,
      () => this.round(),
      (what, err) => ports.emit({ kind: 'scheduler_error', message: `scheduler ${what}: ${toGlidepathError(err).message}` }),
    );
  }

  get settings(): PlanSettings {
    const c = this.cfg;
    return { idleAfterMs: c.idleAfterMs, cooldownMs: c.cooldownMs, relaxBelow: c.relaxBelow, headroom: c.headroom, minSamples: c.minSamples };
  }

  /** Before health runs: the counts it set before a restart are kept again; then measure and tick. */
  async restore(): Promise<void> {
    for (const [model, t] of Object.entries(await this.savedTargets())) {
      // a model time-shared since: its replicas are its group's slots
      if (this.timeShared(model)) continue;
      this.ports.workers.setTarget(model, t.version, t.replicas);
      this.setFor.set(model, t.version);
    }
  }

  /** The counts saved by earlier rounds; an entry that is not `{version, replicas}` is reported and dropped. */
  private async savedTargets(): Promise<Targets> {
    const raw: unknown = await this.ports.settings.get(TARGETS_KEY);
    const out: Targets = {};
    if (raw === undefined || raw === null) return out;
    for (const [model, t] of Object.entries(typeof raw === 'object' ? (raw as Record<string, unknown>) : {})) {
      const { version, replicas } = (t ?? {}) as { version?: unknown; replicas?: unknown };
      if (typeof version === 'string' && typeof replicas === 'number' && Number.isInteger(replicas) && replicas >= 0) out[model] = { version, replicas };
      else
        this.ports.emit({
          kind: 'scheduler_error',
          model,
          message: `scheduler: the saved replica count of ${model} is unreadable (${JSON.stringify(t)}): dropped`,
        });
    }
    return out;
  }

  run(): void {
    if (!this.cfg.enabled || this.loop.started) return;
    this.unsub = this.ports.telemetry.subscribe((r) => {
      if (r.shadow) return;
      this.window(r.model).add(r.at + r.latencyMs, r.ttftMs, r.tpotMs, r.latencyMs, r.completionTokens, r.worker);
      this.spike(r.model, r.ttftMs);
    });
    // nothing is given back within a cool-down of the start: its models have not been measured yet
    this.startedAt = this.ports.clock.now();
    this.loop.start();
  }

  private startedAt = Number.NEGATIVE_INFINITY;

  shutdown(): void {
    this.loop.stop();
    this.unsub?.();
    this.unsub = undefined;
  }

  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  /** The last round, and the decisions so far (newest last). */
  status(): { enabled: boolean; dryRun: boolean; intervalMs: number; last: Round | undefined; history: HistoryEntry[] } {
    return { enabled: this.cfg.enabled, dryRun: this.cfg.dryRun, intervalMs: this.cfg.intervalMs, last: this.last, history: [...this.history] };
  }

  /** What a round would decide now; nothing is changed. */
  async preview(): Promise<Round> {
    return this.measured(false);
  }

  private async measured(commit: boolean): Promise<Round> {
    const { models, free, reserved } = await this.measure(commit);
    return {
      at: this.ports.clock.now(),
      dryRun: true,
      measured: this.loop.started,
      freeGpus: free,
      reservedGpus: reserved,
      models,
      plan: plan(models, free, this.settings),
    };
  }

  /** A round: measure, plan, carry out (not in a dry run); one at a time (a spike's round and a tick's never overlap). */
  async round(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const r = await this.measured(true);
      r.dryRun = this.cfg.dryRun;
      this.last = r;
      for (const m of r.models) {
        const short = r.plan.short.find((s) => s.model === m.model);
        this.ports.telemetry.scheduler.round(m.model, {
          serving: m.replicas,
          target: r.plan.targets.get(m.model) ?? m.replicas,
          min: m.minReplicas,
          max: m.maxReplicas,
          short: short === undefined ? 0 : Math.max(0, short.wanted - short.got),
        });
      }
      if (this.cfg.dryRun) for (const d of r.plan.decisions) this.record(r, d, 'not carried out (dry run)');
      else if (r.plan.decisions.length > 0) await this.act(r);
    } finally {
      this.busy = false;
    }
  }

  private window(model: string): LoadWindow {
    let w = this.windows.get(model);
    if (!w) this.windows.set(model, (w = new LoadWindow(this.cfg.windowMs, DEFAULTS.scheduler.windowMaxSamples)));
    return w;
  }

  /** A request far over its model's TTFT SLO: a round now rather than at the next tick (at most one per interval). */
  private lastSpike = Number.NEGATIVE_INFINITY;
  private spike(model: string, ttftMs: number): void {
    const slo = this.ports.models.config(model).slo.ttftP99Ms;
    const now = this.ports.clock.now();
    if (slo === undefined || !(ttftMs >= slo * DEFAULTS.scheduler.spikeFactor) || now - this.lastSpike < this.cfg.intervalMs) return;
    this.lastSpike = now;
    this.loop.kick();
  }

  /**
   * Each model's requests in flight when the growth was last measured, and that growth (requests/s):
   * a queue that grows is demand the replicas did not serve.
   */
  private readonly backlog = new Map<string, { n: number; at: number; growth: number }>();

  /**
   * Requests arriving per second: those the window saw finish, plus the growth of those in flight —
   * measured between rounds at least half an interval apart (one request more over a few ms is no
   * surge: a spike's round, or a plan asked for between rounds, reuses the last growth), and moved on
   * by rounds only (`commit`: a plan changes nothing); never below 0.
   */
  private arrivals(model: string, n: number, finishedPerS: number, now: number, commit: boolean): number {
    const prev = this.backlog.get(model);
    let growth = prev?.growth ?? 0;
    if (prev === undefined || now - prev.at >= this.cfg.intervalMs / 2) {
      growth = prev === undefined ? 0 : (n - prev.n) / ((now - prev.at) / 1000);
      if (commit) this.backlog.set(model, { n, at: now, growth });
    }
    return Math.max(0, finishedPerS + growth);
  }

  private async measure(commit: boolean): Promise<{ models: ModelLoad[]; free: number; reserved: number }> {
    const p = this.ports;
    const now = p.clock.now();
    const models: ModelLoad[] = [];
    // GPUs health's recovery is about to start replacements on (a dead worker's, stopped): not free to give away
    let reserved = 0;
    for (const name of p.models.names()) {
      const c = p.models.config(name);
      const v = await p.versions.active(name);
      // a target set for a version that is no longer active (a swap, a rollback) is let go: recovery keeps its configured count
      const was = this.setFor.get(name);
      if (was !== undefined && was !== v?.id) {
        p.workers.setTarget(name, was, undefined);
        this.setFor.delete(name);
      }
      const serving = v === undefined ? [] : servingOf(p.workers.list(name, v.id));
      // what a replica serves is measured on the workers serving now (one stopped since would dilute it)
      const remote = p.telemetry.remote;
      const stats =
        remote === undefined
          ? this.window(name).stats(now, new Set(serving.map((w) => w.id)))
          : await remoteLoad(remote, {
              model: name,
              versions: p.routes.current(name).versions.map((x) => x.id),
              serving,
              now,
              windowMs: this.cfg.windowMs,
              idleAfterMs: this.cfg.idleAfterMs,
            });
      const queued = this.ports.routes.inflight(name);
      const arrivalsPerS = this.arrivals(name, queued, stats.rps, now, commit);
      let frozen: string | undefined;
      if (v === undefined) frozen = 'no active version';
      else if (v.provider.kind === 'static') frozen = 'static endpoints: nothing to start or stop';
      else if (v.roles !== undefined) frozen = 'prefill/decode roles: not scaled by the scheduler';
      else if (this.timeShared(name)) frozen = "time-shared: its replicas are its group's slots";
      else if (p.workers.isAsleep(name, v.id)) frozen = 'asleep';
      else {
        const owner = p.workers.claimedBy(name, v.id);
        const rollout = owner === undefined ? await p.rollouts.inProgress(name) : undefined;
        if (owner !== undefined) frozen = `its workers belong to ${owner}`;
        else if (rollout !== undefined) frozen = `a ${rollout.kind} rollout is in progress (${rollout.id})`;
      }
      // replicas health's recovery is about to start (a dead worker's replacement, a spare): their GPUs
      // are kept for them, and the model counts them as starting (it is not raised for them again)
      let missing = 0;
      if (v !== undefined && frozen === undefined && c.health?.enabled === true && c.health.replace) {
        const spares = p.workers.list(name, v.id).filter((w) => w.role === 'spare' && w.health?.state !== 'dead' && w.health?.state !== 'draining').length;
        missing = Math.max(0, (p.workers.target(name, v.id) ?? v.replicas) - serving.length);
        reserved += (missing + Math.max(0, (v.spares ?? 0) - spares)) * (v.tp ?? 1);
      }
      const changed = Math.max(this.changedAt.get(name) ?? Number.NEGATIVE_INFINITY, this.startedAt);
      models.push({
        model: name,
        version: v?.id,
        priority: c.priority,
        slo: c.slo,
        minReplicas: c.minReplicas,
        maxReplicas: c.maxReplicas,
        gpusPerReplica: v?.tp ?? 1,
        replicas: serving.length + missing,
        starting: serving.filter((w) => w.health?.state === 'pending').length + missing,
        ttftP99Ms: stats.ttftP99Ms,
        tpotP99Ms: stats.tpotP99Ms,
        samples: stats.samples,
        rps: stats.rps,
        inFlight: stats.inFlight,
        capacity: { workerTokensPerS: stats.workerTokensPerS, arrivalsPerS, tokensPerRequest: stats.tokensPerRequest },
        scaleSignal: c.scaleSignal,
        queued,
        tokensPerS: stats.tokensPerS,
        seqsPerReplica: v === undefined ? undefined : engineTraitsOf(v).maxNumSeqs,
        // nothing seen since the start is idle from the start, not forever; not running, it measures nothing
        idleMs: this.loop.started ? now - Math.max(stats.lastAt, this.startedAt) : Number.NaN,
        sinceChangeMs: now - changed,
        frozen,
      });
    }
    return { models, free: Math.max(0, (await p.gpus.free()).length - reserved), reserved };
  }

  /** Lower first (their GPUs are what the raises start on), then raise; then the counts are saved. */
  private async act(r: Round): Promise<void> {
    const byModel = new Map(r.models.map((m) => [m.model, m]));
    const lowered = r.models.filter((m) => (r.plan.targets.get(m.model) ?? m.replicas) < m.replicas);
    const raised = r.models.filter((m) => (r.plan.targets.get(m.model) ?? m.replicas) > m.replicas);
    const outcomes = new Map<string, { outcome: string; version: string; gpus: string[] }>();
    await Promise.all(lowered.map(async (m) => outcomes.set(m.model, await this.change(r, m))));
    await Promise.all(raised.map(async (m) => outcomes.set(m.model, await this.change(r, m))));
    // recorded in the plan's order (the changes ran side by side); a model's decisions share its change's GPUs in order
    const used = new Map<string, number>();
    for (const d of r.plan.decisions) {
      const o = outcomes.get(d.model);
      if (o === undefined) continue;
      const at = used.get(d.model) ?? 0;
      const n = Math.abs(d.to - d.from) * (byModel.get(d.model)?.gpusPerReplica ?? 1);
      used.set(d.model, at + n);
      this.record(r, d, o.outcome, o.version, o.gpus.slice(at, at + n));
    }
    const targets = await this.savedTargets();
    for (const name of Object.keys(targets)) if (!byModel.has(name) || this.setFor.get(name) !== targets[name]?.version) delete targets[name];
    for (const [name, version] of this.setFor) {
      const n = this.ports.workers.target(name, version);
      if (n !== undefined) targets[name] = { version, replicas: n };
    }
    await this.ports.settings.set(TARGETS_KEY, targets);
  }

  /**
   * Bring `m`'s active version to its target: drained and stopped, or started. The version is
   * claimed for the change (checked and taken under the model's lock, which is not held through
   * the drains and starts: a rollback never waits for them); one that changed, was put to sleep or
   * that another controller claimed since the round measured it is left alone.
   */
  private async change(r: Round, m: ModelLoad): Promise<{ outcome: string; version: string; gpus: string[] }> {
    const p = this.ports;
    const to = r.plan.targets.get(m.model) as number;
    const decisions = r.plan.decisions.filter((d) => d.model === m.model);
    const version = m.version as string;
    const taken = await p.exclusive(m.model, async () => {
      const v = await p.versions.active(m.model);
      if (v?.id !== version) return `skipped: its active version is ${v?.id ?? 'none'} now, not ${version}`;
      if (p.workers.isAsleep(m.model, version)) return 'skipped: it was put to sleep';
      const owner = p.workers.claimedBy(m.model, version);
      if (owner !== undefined) return `skipped: its workers belong to ${owner} now`;
      p.workers.claim(m.model, version, ACTOR.name);
      return undefined;
    });
    let outcome = taken ?? 'done';
    const gpus: string[] = [];
    if (taken === undefined) {
      try {
        await p.audited(ACTOR, 'scheduler.scale', `${m.model}/${version}`, { to, decisions: decisions.map((d) => d.reason) }, async () => {
          p.workers.setTarget(m.model, version, to);
          this.setFor.set(m.model, version);
          const serving = servingOf(p.workers.list(m.model, version));
          if (to < serving.length) gpus.push(...(await this.shrink(serving, serving.length - to)));
          else gpus.push(...(await this.grow(m.model, version, to - serving.length)));
        });
      } catch (err) {
        outcome = `failed: ${toGlidepathError(err).message}`;
        // what runs is what it keeps: recovery neither refills what did not start nor restarts what stopped
        p.workers.setTarget(m.model, version, servingOf(p.workers.list(m.model, version)).length);
      } finally {
        if (p.workers.claimedBy(m.model, version) === ACTOR.name) p.workers.claim(m.model, version, undefined);
        this.changedAt.set(m.model, p.clock.now());
      }
    }
    return { outcome, version, gpus };
  }

  /** `n` workers out: those still starting first (no traffic), then the newest; each out of rotation, drained, then stopped. */
  private async shrink(serving: WorkerInfo[], n: number): Promise<string[]> {
    const order = [...serving].sort(
      (a, b) => Number(a.health?.state !== 'pending') - Number(b.health?.state !== 'pending') || b.startedAt - a.startedAt || b.id.localeCompare(a.id),
    );
    const out = order.slice(0, n);
    await Promise.all(
      out.map(async (w) => {
        // no new request from now; the ones in flight finish, or past the drain's limit go on on another worker
        this.ports.workers.setWeight(w, 0);
        await this.ports.workers.drainOne(w, this.cfg.drainTimeoutMs, 'removed');
        await this.ports.workers.stop(w);
      }),
    );
    return out.flatMap((w) => w.gpus ?? []);
  }

  /** `n` workers started; a version swapped out or put to sleep meanwhile gets them stopped again. */
  private async grow(model: string, version: string, n: number): Promise<string[]> {
    const p = this.ports;
    const now = p.clock.now();
    const health = p.models.config(model).health?.enabled === true ? newHealth('pending', now) : newHealth('healthy', now);
    const started = await Promise.allSettled(Array.from({ length: n }, () => p.workers.start(model, version, 'serving', health)));
    const still = await p.exclusive(model, async () => (await p.versions.active(model))?.id === version && !p.workers.isAsleep(model, version));
    if (!still) {
      for (const s of started) if (s.status === 'fulfilled') await p.workers.stop(s.value);
      throw new ConflictError(
        'scheduler_version_changed',
        `${model}/${version} stopped being active and awake while its replicas started: they were stopped again`,
      );
    }
    const failed = started.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed.length > 0) throw failed[0]?.reason;
    return started.flatMap((x) => (x.status === 'fulfilled' ? [...(x.value.gpus ?? [])] : []));
  }

  private record(r: Round, d: Decision, outcome: string, version = '?', gpus: string[] = []): void {
    const e: HistoryEntry = { ...d, at: r.at, version, dryRun: r.dryRun, outcome, gpus };
    const kind = r.dryRun ? 'dry_run' : outcome === 'done' ? 'done' : outcome.startsWith('skipped') ? 'skipped' : 'failed';
    this.ports.telemetry.scheduler.decision(d.model, d.action, kind);
    this.history.push(e);
    if (this.history.length > DEFAULTS.scheduler.historyMax) this.history.splice(0, this.history.length - DEFAULTS.scheduler.historyMax);
    const p = this.ports;
    const on = gpus.length === 0 ? '' : ` (${d.to < d.from ? 'freed' : 'on'} ${gpus.join(', ')})`;
    const message = `${d.action.replace('_', ' ')} ${d.model}: ${d.from} → ${d.to} replica(s) — ${d.reason}${d.effect ? `; expected: ${d.effect}` : ''}${r.dryRun ? ' (dry run)' : ''}; ${outcome}${on}`;
    p.emit({ kind: `scheduler_${d.action}`, model: d.model, version, message, data: e });
    if (d.belowMin === true && !r.dryRun)
      void p.notify({
        kind: 'scheduler_below_min',
        model: d.model,
        version,
        message: `${d.model} preempted below its min replicas for ${d.for ?? '?'}: ${message}`,
      });
  }
}
