// The multi-model scheduler (seed 003): every round it measures each model (its active version's
// serving replicas, its recent TTFT/TPOT p99 and rate), asks the planner (plan.ts) for this round's
// replica counts, and carries them out behind the ports — preempted and scaled-down workers drained
// before they stop, new ones started on the GPUs freed — with every decision explained, audited and
// emitted. Health's recovery keeps the counts it sets (WorkersPort.setTarget); they survive a restart.
import type { SchedulerConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { engineTraitsOf } from '../domain/spec.js';
import { toGlidepathError } from '../errors.js';
import { newHealth } from '../health/machine.js';
import { ReconcileLoop } from '../rollout/loop.js';
import type { Actor, ControllerPorts, WorkerInfo } from '../rollout/ports.js';
import { plan } from './plan.js';
import type { Decision, ModelLoad, Plan, PlanSettings } from './plan.js';
import { LoadWindow } from './window.js';

const ACTOR: Actor = { name: 'scheduler' };
const TARGETS_KEY = 'scheduler.targets';

/** One round: what was measured, what was decided, whether it was carried out. */
export interface Round {
  at: number;
  dryRun: boolean;
  freeGpus: number;
  models: ModelLoad[];
  plan: Plan;
}

export interface HistoryEntry extends Decision {
  at: number;
  version: string;
  dryRun: boolean;
  /** How it went: done, or the error that stopped it. */
  outcome: string;
}

type Targets = Record<string, { version: string; replicas: number }>;

export class Scheduler {
  private readonly loop: ReconcileLoop;
  private readonly windows = new Map<string, LoadWindow>();
  private readonly changedAt = new Map<string, number>();
  private readonly history: HistoryEntry[] = [];
  private last: Round | undefined;
  private unsub: (() => void) | undefined;
  private busy = false;

  constructor(
    private readonly ports: ControllerPorts,
    private readonly cfg: SchedulerConfig,
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
    return { idleAfterMs: c.idleAfterMs, cooldownMs: c.cooldownMs, relaxBelow: c.relaxBelow, headroom: c.headroom };
  }

  /** Before health runs: the counts it set before a restart are kept again; then measure and tick. */
  async restore(): Promise<void> {
    for (const [model, t] of Object.entries(await this.savedTargets())) this.ports.workers.setTarget(model, t.version, t.replicas);
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
      this.window(r.model).add(r.at + r.latencyMs, r.ttftMs, r.tpotMs, r.latencyMs);
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
    const { models, free } = await this.measure();
    return { at: this.ports.clock.now(), dryRun: true, freeGpus: free, models, plan: plan(models, free, this.settings) };
  }

  /** A round: measure, plan, carry out (not in a dry run); one at a time (a spike's round and a tick's never overlap). */
  async round(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const r = await this.preview();
      r.dryRun = this.cfg.dryRun;
      this.last = r;
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

  private async measure(): Promise<{ models: ModelLoad[]; free: number }> {
    const p = this.ports;
    const now = p.clock.now();
    const models: ModelLoad[] = [];
    for (const name of p.models.names()) {
      const c = p.models.config(name);
      const v = await p.versions.active(name);
      const stats = this.window(name).stats(now);
      const serving = v === undefined ? [] : p.workers.list(name, v.id).filter((w) => w.role === 'serving');
      let frozen: string | undefined;
      if (v === undefined) frozen = 'no active version';
      else if (v.provider.kind === 'static') frozen = 'static endpoints: nothing to start or stop';
      else if (v.roles !== undefined) frozen = 'prefill/decode roles: not scaled by the scheduler';
      else if (p.workers.isAsleep(name, v.id)) frozen = 'asleep';
      else {
        const owner = p.workers.claimedBy(name, v.id);
        const rollout = owner === undefined ? await p.rollouts.inProgress(name) : undefined;
        if (owner !== undefined) frozen = `its workers belong to ${owner}`;
        else if (rollout !== undefined) frozen = `a ${rollout.kind} rollout is in progress (${rollout.id})`;
      }
      const changed = Math.max(this.changedAt.get(name) ?? Number.NEGATIVE_INFINITY, this.startedAt);
      models.push({
        model: name,
        priority: c.priority,
        slo: c.slo,
        minReplicas: c.minReplicas,
        maxReplicas: c.maxReplicas,
        gpusPerReplica: v?.tp ?? 1,
        replicas: serving.length,
        starting: serving.filter((w) => w.health?.state === 'pending').length,
        ttftP99Ms: stats.ttftP99Ms,
        tpotP99Ms: stats.tpotP99Ms,
        rps: stats.rps,
        inFlight: stats.inFlight,
        seqsPerReplica: v === undefined ? undefined : engineTraitsOf(v).maxNumSeqs,
        idleMs: now - stats.lastAt,
        sinceChangeMs: now - changed,
        frozen,
      });
    }
    return { models, free: (await p.gpus.free()).length };
  }

  /** Lower first (their GPUs are what the raises start on), then raise; each model's change under its lock. */
  private async act(r: Round): Promise<void> {
    const byModel = new Map(r.models.map((m) => [m.model, m]));
    const lowered = [...r.plan.targets].filter(([m, n]) => n < (byModel.get(m) as ModelLoad).replicas);
    const raised = [...r.plan.targets].filter(([m, n]) => n > (byModel.get(m) as ModelLoad).replicas);
    await Promise.all(lowered.map(([m, n]) => this.change(r, m, n)));
    await Promise.all(raised.map(([m, n]) => this.change(r, m, n)));
    const targets: Targets = (await this.ports.settings.get(TARGETS_KEY)) ?? {};
    for (const [m, n] of [...lowered, ...raised]) {
      const v = await this.ports.versions.active(m);
      if (v !== undefined) targets[m] = { version: v.id, replicas: this.ports.workers.target(m, v.id) ?? n };
    }
    await this.ports.settings.set(TARGETS_KEY, targets);
  }

  /** Bring `model`'s active version to `to` serving workers: drained and stopped, or started. */
  private async change(r: Round, model: string, to: number): Promise<void> {
    const p = this.ports;
    const decisions = r.plan.decisions.filter((d) => d.model === model);
    const v = await p.versions.active(model);
    if (v === undefined) return;
    const key = `${model}/${v.id}`;
    p.workers.claim(model, v.id, 'scheduler');
    let outcome = 'done';
    try {
      await p.audited(ACTOR, 'scheduler.scale', key, { to, decisions: decisions.map((d) => d.reason) }, async () => {
        p.workers.setTarget(model, v.id, to);
        const serving = p.workers.list(model, v.id).filter((w) => w.role === 'serving');
        if (to < serving.length) await this.shrink(serving, serving.length - to);
        else await this.grow(model, v.id, to - serving.length);
      });
    } catch (err) {
      outcome = `failed: ${toGlidepathError(err).message}`;
      // what runs is what it keeps: recovery neither refills what did not start nor restarts what stopped
      p.workers.setTarget(model, v.id, p.workers.list(model, v.id).filter((w) => w.role === 'serving').length);
    } finally {
      p.workers.claim(model, v.id, undefined);
      this.changedAt.set(model, p.clock.now());
    }
    for (const d of decisions) this.record(r, d, outcome, v.id);
  }

  /** `n` workers out: those still starting first (no traffic), then the newest; each out of rotation, drained, then stopped. */
  private async shrink(serving: WorkerInfo[], n: number): Promise<void> {
    const order = [...serving].sort(
      (a, b) => Number(a.health?.state !== 'pending') - Number(b.health?.state !== 'pending') || b.startedAt - a.startedAt || b.id.localeCompare(a.id),
    );
    await Promise.all(
      order.slice(0, n).map(async (w) => {
        // no new request from now; the ones in flight finish (or, past the drain's limit, continue elsewhere)
        this.ports.workers.setWeight(w, 0);
        await this.ports.workers.drainOne(w, this.cfg.drainTimeoutMs);
        await this.ports.workers.stop(w);
      }),
    );
  }

  private async grow(model: string, version: string, n: number): Promise<void> {
    const p = this.ports;
    const now = p.clock.now();
    const health = p.models.config(model).health?.enabled === true ? newHealth('pending', now) : newHealth('healthy', now);
    const started = await Promise.allSettled(Array.from({ length: n }, () => p.workers.start(model, version, 'serving', health)));
    const failed = started.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed.length > 0) throw failed[0]?.reason;
  }

  private record(r: Round, d: Decision, outcome: string, version = '?'): void {
    const e: HistoryEntry = { ...d, at: r.at, version, dryRun: r.dryRun, outcome };
    this.history.push(e);
    if (this.history.length > DEFAULTS.scheduler.historyMax) this.history.splice(0, this.history.length - DEFAULTS.scheduler.historyMax);
    const p = this.ports;
    const message = `${d.action.replace('_', ' ')} ${d.model}: ${d.from} → ${d.to} replica(s) — ${d.reason}${r.dryRun ? ' (dry run)' : ''}; ${outcome}`;
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
