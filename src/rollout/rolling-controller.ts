// The rolling update: replace a version's workers a few at a time under surge and unavailable
// budgets, the new ones as a pool of their own (never mixed with the old card), the route following
// ready capacity, each step persisted before it acts, and the fleet — not the history — as the
// planner's input, so a restarted control plane adopts what lives and carries on (docs/rolling.md).
// Sees only the ports.
import { DEFAULTS } from '../defaults.js';
import { routeOnlyTo, routeToSpec } from '../domain/route.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { ReconcileLoop } from './loop.js';
import { restoreSaved, rolloutEvent, saveInTurn, stepEvent } from './rollout-writes.js';
import type { Actor, ControllerPorts, EventPage } from './ports.js';
import type { StoredRollout } from './rollout-record.js';
import { assertFeasible, newShare, nextStep, routeAtShare } from './rolling-plan.js';
import type { RoleNow } from './rolling-plan.js';
import type { Version } from '../domain/version.js';
import { MAX_FAILURES, MAX_TRACE, budgetsNow, messageOf, pools, pushBounded } from './rolling-state.js';
import { describeStep, desiredOf, fleetCounts, findFailures, leavingWorkers, newLive } from './rolling-live.js';
import type { Live } from './rolling-live.js';
import type { RollingPhase, RollingState } from './rolling-state.js';
import { checkPartition, checkPartitionFits, initialState, rollingSettings, startedMessage, undoOptions } from './rolling-start.js';
import type { RollingStartOptions } from './rolling-start.js';
import { refuseTimeSharedStandby } from './bluegreen.js';
import { RollingWorkers } from './rolling-workers.js';

export type { RollingStartOptions } from './rolling-start.js';

const ACTOR: Actor = { name: 'rolling' };
const ACTIVE: readonly RollingPhase[] = ['progressing', 'rolling_back', 'paused'];

export class RollingController {
  private readonly live = new Map<string, Live>();
  private readonly unsubscribes: (() => void)[] = [];
  private readonly loop: ReconcileLoop;
  /** The update's workers started and stopped in the background. */
  private readonly workers: RollingWorkers;
  /** Shut down: what is still under way is not to be acted on. */
  private stopped = false;

  constructor(
    private readonly ports: ControllerPorts,
    opts: { tickMs: number },
  ) {
    this.loop = new ReconcileLoop(ports.clock, opts.tickMs, () => this.tick());
    this.workers = new RollingWorkers(ports, this.loop, {
      current: (l) => !this.stopped && this.live.get(l.state.id) === l,
      event: (l, kind, message) => this.event(l, kind, message),
      refreshShare: (l) => this.refreshShare(l),
    });
  }

  run(): void {
    if (this.loop.started) return;
    // a worker turning unhealthy shows at the next tick (its health is read from the fleet); ticking
    // at once keeps a failed start from waiting a whole tick
    this.unsubscribes.push(this.ports.workers.onHealth((w) => this.live.size > 0 && this.isOurs(w) && this.kick()));
    this.loop.start();
  }

  shutdown(): void {
    this.loop.stop();
    for (const u of this.unsubscribes.splice(0)) u();
    // a start still under way is no longer this controller's to finish (leadership lost, or the process
    // stops): its worker is stopped as soon as it exists, rather than left running unrecorded; the
    // controller that takes the update up reads the fleet and starts what is missing
    this.stopped = true;
    for (const l of this.live.values()) for (const x of l.launches) x.abandoned = true;
  }

  /** Resolves when no background work (starts, stops, ticks) runs (tests: advance the clock, then await this). */
  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  private kick(): void {
    this.loop.kick();
  }

  private isOurs(w: { model: string; version: string }): boolean {
    for (const l of this.live.values()) if (l.state.model === w.model && (l.state.from === w.version || l.state.to === w.version)) return true;
    return false;
  }

  /** Take up the updates the store says are unfinished: claim their versions; the next tick reads the fleet. */
  async recover(stored: readonly StoredRollout<RollingState>[]): Promise<void> {
    for (const { state, revision } of stored) {
      const l = this.track(state, revision);
      // the time the control plane was down was no lack of progress
      state.lastProgressAt = this.ports.clock.now();
      const counts = fleetCounts(this.ports.workers, l);
      const at = Object.entries(counts)
        .map(([r, c]) => `${r}: ${c.old} old, ${c.ready} new ready`)
        .join('; ');
      await this.event(l, 'resumed', `resumed after a restart at step ${state.step} (${state.phase}); the fleet now: ${at}`);
    }
  }

  private track(state: RollingState, revision: number): Live {
    const l = newLive(state, revision);
    this.live.set(state.id, l);
    this.ports.workers.claim(state.model, state.from, state.id);
    this.ports.workers.claim(state.model, state.to, state.id);
    return l;
  }

  private active(model: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.model === model) return l;
    return undefined;
  }

  /** The running update of a model, else its newest one (by id: that one). */
  async get(model: string, id?: string): Promise<RollingState> {
    this.ports.models.config(model);
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l && l.state.model === model) return l.state;
      const r = await this.ports.rollouts.get(id);
      if (!r || r.state.model !== model || r.state.kind !== 'rolling')
        throw new NotFoundError('rollout_not_found', `no rolling update ${id} for model ${model}`);
      return r.state;
    }
    const a = this.active(model);
    if (a) return a.state;
    const last = await this.ports.rollouts.latest(model, 'rolling');
    if (!last) throw new NotFoundError('rollout_not_found', `model ${model} has had no rolling update`);
    return last.state;
  }

  /** The live counts per role of a model's running update (undefined when none runs). */
  liveCounts(model: string): { roles: Record<string, RoleNow>; stopping: number } | undefined {
    const l = this.active(model);
    if (!l) return undefined;
    return { roles: fleetCounts(this.ports.workers, l), stopping: l.stopping.size };
  }

  history(model: string, limit: number): Promise<StoredRollout<RollingState>[]> {
    this.ports.models.config(model);
    return this.ports.rollouts.history(model, 'rolling', limit);
  }

  async events(model: string, id?: string, page?: EventPage): Promise<Awaited<ReturnType<ControllerPorts['rollouts']['events']>>> {
    return this.ports.rollouts.events((await this.get(model, id)).id, page);
  }

  // ---- operator commands ----------------------------------------------------------------

  async start(model: string, o: RollingStartOptions, actor: Actor): Promise<RollingState> {
    const settings = rollingSettings(this.ports.models.config(model), o);
    return this.begin(model, actor, 'rolling_start', o, async (from) => {
      const state = initialState(from, await this.ports.versions.get(model, o.to), settings, actor, this.ports.clock.now());
      return { state, message: startedMessage(state) };
    });
  }

  /**
   * A restart in place (`kubectl rollout restart`): the active version's serving workers replaced by
   * fresh ones of the same version and card — a provider setting that keeps the card (a log level,
   * an environment variable) applied one worker at a time, under the same budgets.
   */
  async restart(model: string, o: Omit<RollingStartOptions, 'to' | 'partition'>, actor: Actor): Promise<RollingState> {
    const settings = rollingSettings(this.ports.models.config(model), o);
    return this.begin(model, actor, 'rolling_restart', o, (v) => {
      const olds = this.ports.workers.list(model, v.id).filter((w) => w.role === 'serving');
      const state = initialState(
        v,
        v,
        settings,
        actor,
        this.ports.clock.now(),
        olds.map((w) => w.id),
      );
      return Promise.resolve({ state, message: `restart in place: ${startedMessage(state)}` });
    });
  }

  /** Start an update under the model's lock, audited: none may run yet; `build` makes its state from the active version. */
  private begin(
    model: string,
    actor: Actor,
    action: string,
    params: object,
    build: (active: Version) => Promise<{ state: RollingState; message: string }>,
  ): Promise<RollingState> {
    const p = this.ports;
    refuseTimeSharedStandby(p, model, 'a rolling update');
    return p.exclusive(model, () =>
      p.audited(actor, action, model, { model, ...params }, async () => {
        const running = await p.rollouts.inProgress(model);
        if (running)
          throw new ConflictError('rollout_in_progress', `model ${model} has a ${running.kind} in progress (${running.id}); finish or abort it first`);
        const active = await p.versions.active(model);
        if (!active) throw new ConflictError('no_active_version', `model ${model} has no active version to roll from`);
        const owner = p.workers.claimedBy(model, active.id);
        if (owner !== undefined)
          throw new ConflictError('rollout_in_progress', `the workers of ${model}/${active.id} are being changed by the ${owner}; try again when it is done`);
        const { state, message } = await build(active);
        const revision = await p.rollouts.create(state);
        // `to` is loading until the update ends (boot leaves a version under a rolling update to it)
        if (!state.inPlace) await p.versions.transition(model, state.to, 'loading', {}, { actor: actor.name, reason: `rolling update ${state.id}` });
        await this.event(this.track(state, revision), 'started', message);
        this.kick();
        return state;
      }),
    );
  }

  pause(model: string, actor: Actor, reason = 'paused by an operator'): Promise<RollingState> {
    return this.command(model, actor, 'rolling_pause', async (l) => {
      const s = l.state;
      if (s.phase === 'paused') throw new ConflictError('already_paused', `rolling update ${s.id} is already paused (${s.pausedReason ?? ''})`);
      await this.doPause(l, `${reason} (${actor.name})`);
    });
  }

  resume(model: string, actor: Actor, opts: { partition?: number | undefined } = {}): Promise<RollingState> {
    return this.command(model, actor, 'rolling_resume', async (l) => {
      const s = l.state;
      if (opts.partition !== undefined) {
        checkPartitionFits(checkPartition(opts.partition), s.budgets);
        assertFeasible(s.budgets, opts.partition);
        s.partition = opts.partition;
      }
      if (s.phase !== 'paused') {
        if (opts.partition !== undefined) return this.persist(l);
        throw new ConflictError('not_paused', `rolling update ${s.id} is ${s.phase}, not paused`);
      }
      s.phase = s.resumeTo ?? 'progressing';
      s.resumeTo = undefined;
      s.pausedReason = undefined;
      // the deadline counts from the resume: the time paused was no lack of progress
      s.lastProgressAt = this.ports.clock.now();
      await this.setPhase(l, s.phase, `resumed by ${actor.name}${opts.partition !== undefined ? ` with partition ${opts.partition}` : ''}`);
      this.kick();
    });
  }

  /** Roll back to the old pool with the same budgets. */
  abort(model: string, actor: Actor, reason?: string): Promise<RollingState> {
    return this.command(model, actor, 'rolling_abort', async (l) => {
      if (pools(l.state).direction === 'back') throw new ConflictError('already_rolling_back', `rolling update ${l.state.id} is already rolling back`);
      // a restart in place has nothing to go back to (both pools are one version, one card): it stops here
      if (l.state.inPlace)
        return this.end(l, 'aborted', `stopped by ${actor.name}${reason ? `: ${reason}` : ''}; fresh and old workers of ${l.state.to} serve side by side`);
      await this.goBack(l, reason ?? `aborted by ${actor.name}`, 'aborted');
      this.kick();
    });
  }

  /** Roll a finished update back: a new rolling update to the version it replaced (its weights still cached). */
  async undo(model: string, actor: Actor, o: Omit<RollingStartOptions, 'to'> = {}): Promise<RollingState> {
    const running = this.active(model);
    if (running) throw new ConflictError('rollout_in_progress', `model ${model} has a rolling update in progress (${running.state.id}); abort it instead`);
    return this.start(model, undoOptions(model, await this.ports.rollouts.latest(model, 'rolling'), o), actor);
  }

  private command(model: string, actor: Actor, action: string, fn: (l: Live) => Promise<void>): Promise<RollingState> {
    this.ports.models.config(model);
    return this.ports.exclusive(model, () =>
      this.ports.audited(actor, action, model, { model }, async () => {
        const l = this.active(model);
        if (!l) throw new ConflictError('no_rolling_update', `model ${model} has no rolling update in progress`);
        try {
          await fn(l);
        } catch (err) {
          if (restoreSaved(l)) l.ready = 0;
          throw err;
        }
        return l.state;
      }),
    );
  }

  // ---- the loop ---------------------------------------------------------------------------

  /** One pass over every running update (the loop calls it every tick; a worker's health change too). */
  async tick(): Promise<void> {
    for (const l of [...this.live.values()]) {
      if (l.busy) continue;
      l.busy = true;
      try {
        await this.ports.exclusive(l.state.model, async () => {
          if (this.live.get(l.state.id) === l && ACTIVE.includes(l.state.phase)) await this.reconcile(l);
        });
      } catch (err) {
        // acting on what the store has (as a restart would): new workers ready are progress again
        if (restoreSaved(l)) l.ready = 0;
        await this.event(l, 'error', `step failed: ${messageOf(err)}`);
      } finally {
        l.busy = false;
      }
    }
  }

  /** Read the fleet, deal with failures, and take the next step (or finish). Under the model's lock. */
  private async reconcile(l: Live): Promise<void> {
    const s = l.state;
    const p = this.ports;
    const now = p.clock.now();
    // failures: new workers health gave up, past the step timeout, or whose start threw
    for (const w of findFailures(p.workers, l, now)) this.workers.stop(l, w, 0);
    if (l.failed.length > 0) {
      // taken off the list once handled and saved: a write that fails leaves them for the next tick
      const failures = [...l.failed];
      for (const f of failures) pushBounded(s.failures, { at: now, worker: f.worker, reason: f.reason }, MAX_FAILURES);
      await this.onFailure(l, failures.map((f) => f.reason).join('; '));
      l.failed.splice(0, failures.length);
    }
    this.workers.retryGpuWaits(l);
    const ready = Object.values(fleetCounts(p.workers, l)).reduce((n, c) => n + c.ready, 0);
    if (ready > l.ready) s.lastProgressAt = now;
    l.ready = ready;
    if (s.phase !== 'paused' && now - s.lastProgressAt > s.progressDeadlineMs) {
      s.deadlineExceededAt = now;
      await this.onFailure(l, `no progress for ${Math.round(s.progressDeadlineMs / 1000)} s (progress deadline exceeded)`);
    }
    // (read after the failures: one may have turned the update around)
    const pool = pools(s);
    const counts = fleetCounts(p.workers, l);
    const desired = desiredOf(s);
    if (s.phase === 'paused') {
      await this.publishShare(l, newShare(counts, desired));
      return;
    }
    const step = nextStep(counts, budgetsNow(s), pool.direction === 'forward' ? s.partition : 0);
    if (step.done) {
      // the last old workers still drain, or an abandoned start is still under way: the end waits for
      // them (each kicks a tick when done), so nothing is unloaded under a drain or a start
      if (l.stopping.size === 0 && l.launches.size === 0) await this.finish(l);
      return;
    }
    const moves = Object.values(step.start).some((n) => n > 0) || Object.values(step.stop).some((n) => n > 0);
    if (!moves) {
      await this.publishShare(l, newShare(counts, desired));
      if (step.waiting?.startsWith('paused at the partition')) await this.doPause(l, step.waiting, true);
      return;
    }
    const leaving = leavingWorkers(p.workers, l, step.stop);
    for (const [role, n] of Object.entries(step.stop)) (counts[role] as RoleNow).old -= n;
    for (const [role, n] of Object.entries(step.start)) (counts[role] as RoleNow).starting += n;
    s.step++;
    s.lastProgressAt = now;
    const share = newShare(counts, desired);
    pushBounded(
      s.trace,
      { at: now, step: s.step, roles: counts, share, started: step.start, stopped: leaving.map((w) => w.id), direction: pool.direction },
      MAX_TRACE,
    );
    s.message = describeStep(s.step, step.start, leaving, counts, share);
    // persisted before it acts, with its log entry in the same write: a restart reads the fleet and
    // finds this step done or not, and the log has it once
    await saveInTurn(this.ports, l, stepEvent(this.ports, s, 'rolling', s.to, 'step', s.message));
    // traffic first moves off the leaving workers' share, then they drain and stop
    await this.publishShare(l, share);
    for (const w of leaving) this.workers.stop(l, w, DEFAULTS.gateway.drainTimeoutMs);
    for (const [role, n] of Object.entries(step.start)) for (let i = 0; i < n; i++) this.workers.launch(l, role, pool.new);
  }

  private async refreshShare(l: Live): Promise<void> {
    if (this.live.get(l.state.id) === l && ACTIVE.includes(l.state.phase))
      await this.publishShare(l, newShare(fleetCounts(this.ports.workers, l), desiredOf(l.state)));
  }

  /** The route between the two pools at the new pool's share of ready capacity (published only when it changes). */
  private async publishShare(l: Live, share: number): Promise<void> {
    const s = l.state;
    if (s.inPlace) return; // one version, one pool: the route does not change
    const next = routeAtShare(routeToSpec(this.ports.routes.current(s.model)), pools(s), s.from, share);
    if (next !== undefined) await this.ports.routes.publish(next);
  }

  private async onFailure(l: Live, reason: string): Promise<void> {
    const s = l.state;
    await this.event(l, 'failure', reason);
    this.loop.spawn(
      this.ports.notify({ kind: 'rolling_failure', model: s.model, version: s.to, message: `${s.id}: ${reason}`, data: { id: s.id, phase: s.phase } }),
    );
    if (s.phase === 'paused') return;
    // going back already: never back and forth; an operator decides
    if (s.onFailure === 'pause' || pools(s).direction === 'back' || s.inPlace) await this.doPause(l, `failure: ${reason}`);
    else await this.goBack(l, reason, 'rolled_back');
  }

  private async doPause(l: Live, reason: string, partition = false): Promise<void> {
    const s = l.state;
    if (s.phase === 'paused') return;
    s.resumeTo = s.phase === 'rolling_back' ? 'rolling_back' : 'progressing';
    s.pausedReason = reason;
    await this.setPhase(l, 'paused', partition ? reason : `paused: ${reason}`);
  }

  private async goBack(l: Live, reason: string, end: 'aborted' | 'rolled_back'): Promise<void> {
    const s = l.state;
    s.rollbackReason = reason;
    s.rollbackTo = end;
    s.resumeTo = undefined;
    s.pausedReason = undefined;
    s.lastProgressAt = this.ports.clock.now();
    l.ready = 0;
    // the new workers still starting are not wanted any more
    for (const x of l.launches) x.abandoned = true;
    await this.setPhase(l, 'rolling_back', `rolling back to ${s.from} with the same budgets: ${reason}`);
  }

  /** The new pool alone serves: route it, settle the registry, unload what went. */
  private async finish(l: Live): Promise<void> {
    const s = l.state;
    const p = this.ports;
    if (s.inPlace) return this.end(l, 'succeeded', `every worker of ${s.to} replaced in ${s.step} step(s)`);
    const back = pools(s).direction === 'back';
    const keep = back ? s.from : s.to;
    const gone = back ? s.to : s.from;
    await p.routes.publish(routeOnlyTo(routeToSpec(p.routes.current(s.model)), keep, gone));
    await this.settle(s, back);
    await p.workers.unload(s.model, gone);
    const took = `${Math.round((p.clock.now() - s.startedAt) / 100) / 10} s`;
    if (back) await this.end(l, s.rollbackTo ?? 'rolled_back', `${s.from} serves alone again after ${took}: ${s.rollbackReason ?? ''}`);
    else await this.end(l, 'succeeded', `${s.to} serves alone after ${s.step} step(s) in ${took}; ${s.from} unloaded`);
  }

  /**
   * The registry after the end: `to` promoted (or retired when the update went back). Each step is
   * taken only from the status before it, so a finish cut short by a restart is simply done again.
   */
  private async settle(s: RollingState, back: boolean): Promise<void> {
    const p = this.ports;
    const opts = { actor: ACTOR.name, reason: `rolling update ${s.id}` };
    let v = await p.versions.get(s.model, s.to);
    if (back) {
      if (v.status !== 'retired') await p.versions.transition(s.model, s.to, 'retired', {}, opts);
      return;
    }
    // (`loading` unless a restart came between the update's record and that transition)
    if (v.status === 'registered' || v.status === 'retired' || v.status === 'failed') v = await p.versions.transition(s.model, s.to, 'loading', {}, opts);
    if (v.status === 'loading') v = await p.versions.transition(s.model, s.to, 'ready', {}, opts);
    if (v.status !== 'active') await p.versions.promote(s.model, s.to, { ...opts, demoteTo: 'retired' });
  }

  /** The update is over: its last state persisted, its versions let go, its end notified. */
  private async end(l: Live, phase: RollingPhase, message: string): Promise<void> {
    const s = l.state;
    const p = this.ports;
    s.finishedAt = p.clock.now();
    await this.setPhase(l, phase, message);
    this.live.delete(s.id);
    p.workers.claim(s.model, s.from, undefined);
    p.workers.claim(s.model, s.to, undefined);
    // (webhooks in the background: a dead endpoint must not hold the model's lock)
    this.loop.spawn(p.notify({ kind: `rolling_${phase}`, model: s.model, version: s.to, message, data: { id: s.id, from: s.from, to: s.to, steps: s.step } }));
  }

  private async setPhase(l: Live, phase: RollingPhase, message: string): Promise<void> {
    l.state.phase = phase;
    l.state.message = message;
    await this.persist(l);
    await this.event(l, phase, message);
  }

  /** Write the state as it is when its turn comes; writes of one update never overlap. */
  private persist(l: Live): Promise<void> {
    return saveInTurn(this.ports, l);
  }

  private event(l: Live, kind: string, message: string): Promise<void> {
    return rolloutEvent(this.ports, l.state, 'rolling', l.state.to, kind, message);
  }
}
