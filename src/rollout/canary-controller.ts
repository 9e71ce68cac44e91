// The progressive canary: load the candidate beside stable, walk the stages, judge every tick with
// the sequential canary judge, and advance, wait, pause, promote or roll back — persisted after
// every step so a restarted control plane continues where it stopped. Sees only the ports.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { JudgeFn } from '../analysis/judge-packed.js';
import { DEFAULTS } from '../defaults.js';
import { routeToSpec } from '../domain/route.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { Actor, ControllerPorts, EventPage, RolloutLogEntry } from './ports.js';
import type { StoredRollout } from './rollout-record.js';
import { reweighted } from './samples.js';
import { drainAndUnload, routeToStable, takeBackFailedStart } from './canary-rollback.js';
import { canarySamples, newLive, sampleCountsOf } from './canary-live.js';
import type { CanarySampleCounts, Live } from './canary-live.js';
import { TERMINAL, checkStages, criticalHealth, currentPercent, nextStage, stageWeights } from './canary-state.js';
import type { CanaryPhase, CanaryState, RollbackRecord, Step } from './canary-state.js';
import { canaryNoticeView } from './canary-views.js';
import { ReconcileLoop } from './loop.js';
import { applyStep, takeLook, tickRunning } from './staged.js';
import type { StagedActions } from './staged.js';
import { restoreSaved, rolloutEvent, saveInTurn, stepEvent } from './rollout-writes.js';
import { refuseTimeSharedStandby } from './bluegreen.js';

export interface CanaryStartOptions {
  version: string;
  stages?: number[] | undefined;
  stageDurationMs?: number | undefined;
  shadowShare?: number | undefined;
}

export class CanaryController {
  private readonly live = new Map<string, Live>();
  /** The subscriptions run() made (records, workers' health). */
  private readonly unsubscribes: (() => void)[] = [];
  private readonly loop: ReconcileLoop;

  constructor(
    private readonly ports: ControllerPorts,
    private readonly opts: {
      tickMs: number;
      /** Where a look is computed: a worker thread in an App (src/control/judge-thread.ts), this thread by default. */
      judge?: JudgeFn | undefined;
    },
  ) {
    this.loop = new ReconcileLoop(ports.clock, opts.tickMs, () => this.tick());
  }

  /** Listen to telemetry and reconcile every `tickMs`; resumed rollouts come in through `recover`. */
  run(): void {
    if (this.loop.started) return;
    this.unsubscribes.push(
      this.ports.telemetry.subscribe((r) => {
        // every request's record comes here: no iterator while nothing is live (the usual case)
        if (this.live.size !== 0) for (const l of this.live.values()) l.samples.record(r);
      }),
      // a canary whose workers turn unhealthy (silent corruption, crashes the health checks caught) fails
      this.ports.workers.onHealth((w, h) => {
        const why = criticalHealth(w, h);
        if (why !== undefined) for (const l of this.live.values()) if (l.state.model === w.model && l.state.canary === w.version) l.unhealthy ??= why;
      }),
    );
    this.loop.start();
  }

  /** Stop ticking and listening. Work already under way (a load, a rollback) finishes on its own. */
  shutdown(): void {
    this.loop.stop();
    for (const u of this.unsubscribes.splice(0)) u();
  }

  /** Resolves when no background step (load, tick, recovery) is running (tests: advance the clock, then await this). */
  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  private inBackground(p: Promise<unknown>): void {
    this.loop.spawn(p);
  }

  /** Resume the canaries the store says are unfinished (the composition root reads them once at start). */
  async recover(stored: readonly StoredRollout<CanaryState>[]): Promise<void> {
    for (const { state: st, revision } of stored) {
      const l = this.track(st, revision);
      if (st.phase === 'loading' || st.phase === 'pending') {
        // the load was interrupted by the restart (boot marked the version failed and stopped its
        // workers), or it had just ended: what it loaded is unloaded, never left holding GPUs (in
        // `pending` its load had not begun)
        this.inBackground(this.failStart(l, 'glidepath restarted while the canary was loading; start it again', st.phase === 'loading'));
      } else if (st.phase === 'rolling_back') {
        // the restart cut a rollback short after its route switch: finish drain and unload
        this.inBackground(
          this.ports
            .exclusive(st.model, () =>
              this.doRollback(l, st.rollbackReason ?? 'completing a rollback interrupted by a restart', st.rollbackTo ?? 'rolled_back'),
            )
            .catch((err: unknown) => this.event(l, 'error', `could not complete the rollback: ${(err as Error).message}`)),
        );
      } else if (st.phase === 'promoting') {
        // the restart cut a promotion short; the tick never looks at this phase, so finish it here
        // (publishing the route and the registry's promote are idempotent)
        this.inBackground(
          this.ports
            .exclusive(st.model, () => this.doPromote(l, 'completing a promotion interrupted by a restart'))
            .catch((err: unknown) => this.event(l, 'error', `could not complete the promotion: ${(err as Error).message}`)),
        );
      } else {
        // the samples restart with this process; the verdict history is kept
        st.look = 0;
        st.previous = {};
        await this.event(l, 'resumed', `resumed after a restart at stage ${st.stageIndex + 1} (${currentPercent(st)} %), phase ${st.phase}`);
        await this.persist(l);
      }
    }
  }

  private track(state: CanaryState, revision: number): Live {
    const l = newLive(this.ports, state, revision);
    this.live.set(state.id, l);
    return l;
  }

  /** Quality scores from the LLM judge for a model's versions. */
  quality(model: string, version: string, score: number): void {
    for (const l of this.live.values()) if (l.state.model === model) l.samples.quality(version, score);
  }

  private active(model: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.model === model && !TERMINAL.includes(l.state.phase)) return l;
    return undefined;
  }

  /** Samples the running canary of a model is judged on (undefined when none runs): with a remote source, its last read's. */
  sampleCounts(model: string): CanarySampleCounts | undefined {
    const l = this.active(model);
    return l === undefined ? undefined : sampleCountsOf(l);
  }

  /** The running canary of a model, else its newest one (by id: that one) — never another kind of rollout. */
  async get(model: string, id?: string): Promise<CanaryState> {
    this.ports.models.config(model);
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l && l.state.model === model) return l.state;
      const r = await this.ports.rollouts.get(id);
      if (!r || r.state.model !== model || r.state.kind !== 'canary') throw new NotFoundError('rollout_not_found', `no canary ${id} for model ${model}`);
      return r.state;
    }
    const a = this.active(model);
    if (a) return a.state;
    const last = await this.ports.rollouts.latest(model, 'canary');
    if (!last) throw new NotFoundError('rollout_not_found', `model ${model} has had no canary`);
    return last.state;
  }

  /** Past canaries of the model, newest first. */
  history(model: string, limit: number): Promise<StoredRollout<CanaryState>[]> {
    this.ports.models.config(model);
    return this.ports.rollouts.history(model, 'canary', limit);
  }

  /** The events of a canary (default: the running or newest one). */
  async events(model: string, id?: string, page?: EventPage): Promise<Awaited<ReturnType<ControllerPorts['rollouts']['events']>>> {
    const s = await this.get(model, id);
    return this.ports.rollouts.events(s.id, page);
  }

  // ---- operator commands ----------------------------------------------------------------

  async start(model: string, opts: CanaryStartOptions, actor: Actor): Promise<CanaryState> {
    const p = this.ports;
    const m = p.models.config(model);
    const stages = [...(opts.stages ?? m.canary?.stages ?? DEFAULTS.rollout.stages)];
    const bad = checkStages(stages);
    if (bad) throw new BadRequestError('invalid_stages', bad);
    const stageDurationMs = opts.stageDurationMs ?? m.canary?.stageDurationMs ?? DEFAULTS.rollout.stageDurationMs;
    const shadowShare = opts.shadowShare ?? m.canary?.shadowShare ?? 0;
    refuseTimeSharedStandby(p, model, 'a canary');
    return p.exclusive(model, () =>
      p.audited(actor, 'canary_start', model, { model, ...opts }, async () => {
        const running = this.active(model);
        if (running) throw new ConflictError('rollout_in_progress', `model ${model} already has a canary in progress (${running.state.id})`);
        const stable = await p.versions.active(model);
        if (!stable) throw new ConflictError('no_active_version', `model ${model} has no active version to compare the canary with`);
        const v = await p.versions.get(model, opts.version);
        if (v.id === stable.id) throw new ConflictError('canary_is_active', `version ${model}/${v.id} is already the active version`);
        if (v.status === 'loading') throw new ConflictError('already_loading', `version ${model}/${v.id} is loading`);
        const now = p.clock.now();
        const state: CanaryState = {
          kind: 'canary',
          id: `canary-${randomUUID().slice(0, 8)}`,
          model,
          stable: stable.id,
          canary: v.id,
          stages,
          stageIndex: 0,
          stageDurationMs,
          phase: 'pending',
          createdAt: now,
          startedAt: now,
          stageStartedAt: now,
          updatedAt: now,
          look: 0,
          previous: {},
          verdicts: [],
          loadedByRollout: !(v.status === 'ready' || v.status === 'standby'),
          actor: actor.name,
          shadowShare,
        };
        const revision = await p.rollouts.create(state);
        const l = this.track(state, revision);
        await this.event(l, 'started', `canary ${v.id} vs stable ${stable.id}, stages ${stages.join(',')} %, ${Math.round(stageDurationMs / 1000)} s each`);
        this.inBackground(this.begin(l, actor));
        return state;
      }),
    );
  }

  /** Load the canary if needed, then enter the first stage. Runs in the background. */
  private async begin(l: Live, actor: Actor): Promise<void> {
    const s = l.state;
    const p = this.ports;
    // its own load ended: a failure after it unloads the candidate (a load that fails cleans up after
    // itself, and one refused because another load of the version runs must not touch that one)
    let loaded = false;
    try {
      if (s.loadedByRollout) {
        await this.setPhase(l, 'loading', `loading ${s.canary}`);
        const v = await p.versions.get(s.model, s.canary);
        await p.workers.load(v, actor, (msg) => void this.event(l, 'progress', msg));
        loaded = true;
      }
      await p.exclusive(s.model, async () => {
        if (TERMINAL.includes(s.phase)) return;
        s.stageIndex = 0;
        s.stageStartedAt = p.clock.now();
        l.samples = canarySamples(s, p.models.config(s.model).canary);
        l.since = p.clock.now();
        l.seen = -1;
        await this.applyWeights(l, currentPercent(s));
        await this.setPhase(l, 'progressing', `stage 1: ${currentPercent(s)} % to ${s.canary}`);
      });
    } catch (err) {
      await this.failStart(l, `could not start the canary: ${(err as Error).message}`, loaded);
    }
  }

  /** A canary that never got going fails, what it was given taken back (canary-rollback.ts); under the model's lock. */
  private async failStart(l: Live, message: string, unload: boolean): Promise<void> {
    const s = l.state;
    const p = this.ports;
    await p.exclusive(s.model, async () => {
      if (TERMINAL.includes(s.phase)) return; // an operator's abort got there first
      let why = message;
      try {
        await takeBackFailedStart(p, s, message, unload);
      } catch (err) {
        why = `${message}; could not take ${s.canary} back: ${(err as Error).message}`;
      }
      await this.finish(l, 'failed', why);
    });
  }

  async pause(model: string, actor: Actor, reason = 'paused by an operator'): Promise<CanaryState> {
    return this.command(model, actor, 'canary_pause', async (l) => {
      if (l.state.phase !== 'progressing') throw new ConflictError('not_progressing', `canary ${l.state.id} is ${l.state.phase}, not progressing`);
      l.state.pausedReason = `${reason} (${actor.name})`;
      await this.setPhase(l, 'paused', l.state.pausedReason);
    });
  }

  async resume(model: string, actor: Actor): Promise<CanaryState> {
    return this.command(model, actor, 'canary_resume', async (l) => {
      if (l.state.phase !== 'paused') throw new ConflictError('not_paused', `canary ${l.state.id} is ${l.state.phase}, not paused`);
      l.state.pausedReason = undefined;
      // a human looked at an inconclusive stage and said go on: the stage counts as passed
      await this.setPhase(l, 'progressing', `resumed by ${actor.name}`);
      await this.apply(l, nextStage(l.state), 'resumed by an operator');
    });
  }

  async promote(model: string, actor: Actor): Promise<CanaryState> {
    return this.command(model, actor, 'canary_promote', (l) => {
      if (l.state.phase !== 'progressing' && l.state.phase !== 'paused') throw new ConflictError('not_running', `canary ${l.state.id} is ${l.state.phase}`);
      return this.doPromote(l, `promoted by ${actor.name}`);
    });
  }

  async abort(model: string, actor: Actor, reason?: string): Promise<CanaryState> {
    return this.command(model, actor, 'canary_abort', (l) => this.doRollback(l, reason ?? `aborted by ${actor.name}`, 'aborted'));
  }

  private async command(model: string, actor: Actor, action: string, fn: (l: Live) => Promise<void>): Promise<CanaryState> {
    this.ports.models.config(model);
    return this.ports.exclusive(model, () =>
      this.ports.audited(actor, action, model, { model }, async () => {
        const l = this.active(model);
        if (!l) throw new ConflictError('no_canary', `model ${model} has no canary in progress`);
        try {
          await fn(l);
        } catch (err) {
          if (restoreSaved(l)) l.seen = -1;
          throw err;
        }
        return l.state;
      }),
    );
  }

  // ---- the loop ---------------------------------------------------------------------------

  /** One reconcile pass over every running canary (the loop calls it every tick). */
  async tick(now = this.ports.clock.now()): Promise<void> {
    await tickRunning(
      this.live.values(),
      this.ports,
      (l) => l.state.model,
      (l) => this.live.has(l.state.id),
      async (l) => {
        if (l.unhealthy !== undefined) {
          await this.event(l, 'unhealthy', l.unhealthy);
          await this.apply(l, { kind: 'rollback', reason: l.unhealthy }, '', now);
          return;
        }
        await this.evaluate(l, now);
      },
      (l, err) => this.event(l, 'error', `evaluation failed: ${err.message}`),
    );
  }

  /** Judge the cumulative samples, record the look, and act on the decision. */
  private async evaluate(l: Live, now: number): Promise<void> {
    const looked = await takeLook(l, now, this.opts.judge);
    if (looked === undefined) return;
    const { verdict, step, sourceError } = looked;
    if (sourceError !== undefined && l.sourceDown === undefined) {
      l.sourceDown = sourceError.message;
      await this.event(l, 'metrics_unavailable', `the metric source does not answer; every look waits (no data) until it does: ${sourceError.message}`);
    } else if (sourceError === undefined && l.sourceDown !== undefined) {
      l.sourceDown = undefined;
      await this.event(l, 'metrics_available', 'the metric source answers again; looks judge its data');
    }
    if (step.kind !== 'none') this.ports.telemetry.canary.verdict(l.state.model, verdict.outcome, verdict.action);
    await this.apply(l, step, verdict.reasons.join('; '), now);
    if (step.kind === 'none') await this.persist(l);
  }

  private apply(l: Live, step: Step, why: string, now = this.ports.clock.now()): Promise<void> {
    return applyStep(l, step, why, now, this.actions);
  }

  /** What each decided step does to a version canary. */
  private readonly actions: StagedActions<Live> = {
    advanced: async (l, why) => {
      const s = l.state;
      await this.applyWeights(l, currentPercent(s));
      // the stage and its log entry in one write: a leader killed before it leaves the stage to the next
      // one (which advances again, once); after it, the stage is done and logged once
      const message = `stage ${s.stageIndex + 1}: ${currentPercent(s)} % to ${s.canary}${why ? ` (${why})` : ''}`;
      await this.persist(l, stepEvent(this.ports, s, 'canary', s.canary, 'advance', message));
    },
    promote: (l, why) => this.doPromote(l, why),
    pause: (l, reason) => this.setPhase(l, 'paused', reason),
    rollback: (l, reason) => this.doRollback(l, reason, 'rolled_back'),
  };

  // ---- actions ------------------------------------------------------------------------------

  private async applyWeights(l: Live, percent: number): Promise<void> {
    const s = l.state;
    const cur = routeToSpec(this.ports.routes.current(s.model));
    const weights = reweighted(cur.weights, stageWeights(s, percent));
    const shadow = s.shadowShare > 0 && percent < 100 ? { version: s.canary, share: s.shadowShare } : undefined;
    await this.ports.routes.publish({ model: s.model, weights, stable: s.stable, overrides: cur.overrides, stickySalt: cur.stickySalt, shadow });
  }

  private async doPromote(l: Live, why: string): Promise<void> {
    const s = l.state;
    const p = this.ports;
    await this.setPhase(l, 'promoting', `promoting ${s.canary}: ${why}`);
    const cur = routeToSpec(p.routes.current(s.model));
    const weights = reweighted(cur.weights, { [s.canary]: 1 });
    // stable stays loaded at weight 0: an instant rollback target
    await p.routes.publish({ model: s.model, weights, stable: s.canary, overrides: cur.overrides, stickySalt: cur.stickySalt, shadow: undefined });
    // idempotent: a promotion completed after a restart may find the registry already switched
    await p.versions.promote(s.model, s.canary, { actor: 'canary', reason: `canary ${s.id} promoted` });
    await this.finish(l, 'succeeded', `${s.canary} is active; ${s.stable} is standby`);
  }

  /**
   * Seed 001's rollback sequence: all traffic to stable at once, drain the canary's in-flight
   * requests (bounded), unload it if this rollout loaded it; timed step by step and notified.
   */
  private async doRollback(l: Live, reason: string, phase: 'rolled_back' | 'aborted'): Promise<void> {
    const s = l.state;
    const t0 = performance.now();
    const percentAtRollback = currentPercent(s);
    await routeToStable(this.ports, s);
    const t1 = performance.now();
    // persisted right after the switch: a restart finishes what follows
    s.rollbackReason = reason;
    s.rollbackTo = phase;
    await this.setPhase(l, 'rolling_back', reason);
    const t2 = performance.now();
    const d = await drainAndUnload(this.ports, s, reason);
    const rb: RollbackRecord = {
      reason,
      at: this.ports.clock.now(),
      timing: { traffic_shift_ms: t1 - t0, drain_ms: t2 - t1 + d.drainMs, unload_ms: d.unloadMs, total_ms: performance.now() - t0 },
      drained: d.drained,
      aborted: d.aborted,
      canaryRequests: l.samples.b.requests,
      percentAtRollback,
    };
    s.rollback = rb;
    await this.finish(
      l,
      phase,
      `${phase === 'aborted' ? 'aborted' : 'rolled back'} at ${percentAtRollback} % after ${rb.canaryRequests} canary request(s): ${reason}`,
    );
  }

  private async finish(l: Live, phase: CanaryPhase, message: string): Promise<void> {
    await this.setPhase(l, phase, message);
    this.live.delete(l.state.id);
    await this.ports.notify({
      kind: `canary_${phase}`,
      model: l.state.model,
      version: l.state.canary,
      message,
      // the API's names, as `GET …/canary` shows the same rollback and verdict
      data: canaryNoticeView(l.state),
    });
  }

  private async setPhase(l: Live, phase: CanaryPhase, message: string): Promise<void> {
    l.state.phase = phase;
    l.state.message = message;
    await this.persist(l);
    await this.event(l, phase, message);
  }

  /** Write the state as it is when its turn comes; writes of one rollout never overlap. */
  private persist(l: Live, event?: RolloutLogEntry): Promise<void> {
    const s = l.state;
    this.ports.telemetry.canary.state(s.model, s.canary, s.phase, currentPercent(s), s.stageStartedAt, TERMINAL.includes(s.phase));
    return saveInTurn(this.ports, l, event);
  }

  private event(l: Live, kind: string, message: string): Promise<void> {
    return rolloutEvent(this.ports, l.state, 'canary', l.state.canary, kind, message);
  }
}
