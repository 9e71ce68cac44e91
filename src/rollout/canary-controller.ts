// The progressive canary: load the candidate beside stable, walk the stages, judge every tick with
// the sequential canary judge, and advance, wait, pause, promote or roll back — persisted after
// every step so a restarted control plane continues where it stopped.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { judgeCanary, judgeConfig } from '../analysis/judge.js';
import type { JudgeConfig, JudgeConfigOverrides, Verdict } from '../analysis/judge.js';
import type { CanarySettings } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { routeToSpec } from '../domain/route.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { Actor, ControlPlane } from '../control/plane.js';
import { PairSamples, reweighted, trackRollouts } from './samples.js';
import { TERMINAL, checkStages, currentPercent, decide, nextStage, stageWeights, summarizeVerdict } from './canary-state.js';
import type { CanaryPhase, CanaryState, RollbackRecord, Step } from './canary-state.js';

export interface CanaryStartOptions {
  version: string;
  stages?: number[] | undefined;
  stageDurationMs?: number | undefined;
  shadowShare?: number | undefined;
}

/** Config overrides (glidepath.yaml `models[].canary`) → the judge's configuration. */
export function judgeOverrides(c: CanarySettings | undefined): JudgeConfigOverrides {
  if (!c) return {};
  const o: JudgeConfigOverrides = {};
  if (c.alpha !== undefined) o.alpha = c.alpha;
  const lat = (extra: object) => ({ ...(c.maxP99Increase !== undefined ? { maxP99Increase: c.maxP99Increase } : {}), ...(c.minSamples !== undefined ? { minSamples: c.minSamples } : {}), ...extra });
  o.latency = lat({});
  o.ttft = lat({});
  o.tpot = lat({});
  o.errors = {
    ...(c.maxErrorRate !== undefined ? { maxRate: c.maxErrorRate } : {}),
    ...(c.maxErrorIncrease !== undefined ? { maxRelativeIncrease: c.maxErrorIncrease } : {}),
    ...(c.minSamples !== undefined ? { minRequests: c.minSamples } : {}),
  };
  o.quality = { ...(c.maxQualityDecrease !== undefined ? { maxDecrease: c.maxQualityDecrease } : {}), ...(c.minSamples !== undefined ? { minSamples: Math.min(30, c.minSamples) } : {}) };
  o.throughput = c.minSamples !== undefined ? { minRequests: c.minSamples } : {};
  return o;
}

interface Live {
  state: CanaryState;
  samples: PairSamples;
  judge: JudgeConfig;
  revision: number;
  busy: boolean;
  /** Sample count at the last look: an unchanged stream is not judged again. */
  seen: number;
}

export class CanaryController {
  private readonly live = new Map<string, Live>();
  private unsubscribe: (() => void) | undefined;
  constructor(private readonly cp: ControlPlane) {}

  /** Resume every rollout the store says is still running, and start listening to telemetry. */
  recover(): void {
    const { unsubscribe, stored } = trackRollouts<CanaryState>(this.cp, 'canary', this.live);
    this.unsubscribe = unsubscribe;
    for (const { state: st, revision } of stored) {
      const l = this.track(st, revision);
      if (st.phase === 'loading' || st.phase === 'pending') {
        // the load was interrupted by the restart (boot marked the version failed)
        void this.finish(l, 'failed', 'glidepath restarted while the canary was loading; start it again');
      } else if (st.phase === 'rolling_back') {
        // the restart cut a rollback short after its route switch: finish drain and unload
        void this.cp
          .exclusive(st.model, () => this.doRollback(l, st.rollbackReason ?? 'completing a rollback interrupted by a restart', st.rollbackTo ?? 'rolled_back'))
          .catch((err: unknown) => this.event(l, 'error', `could not complete the rollback: ${(err as Error).message}`));
      } else if (st.phase === 'promoting') {
        // the restart cut a promotion short; the tick never looks at this phase, so finish it here
        // (publishing the route and registry.promote are idempotent)
        void this.cp.exclusive(st.model, () => this.doPromote(l, 'completing a promotion interrupted by a restart')).catch((err: unknown) => this.event(l, 'error', `could not complete the promotion: ${(err as Error).message}`));
      } else {
        // the samples restart with this process; the verdict history is kept
        st.look = 0;
        st.previous = {};
        this.event(l, 'resumed', `resumed after a restart at stage ${st.stageIndex + 1} (${currentPercent(st)} %), phase ${st.phase}`);
        this.persist(l);
      }
    }
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  private track(state: CanaryState, revision: number): Live {
    const m = this.cp.modelConfig(state.model);
    const l: Live = { state, samples: canarySamples(state, m.canary), judge: judgeConfig(judgeOverrides(m.canary)), revision, busy: false, seen: -1 };
    this.live.set(state.id, l);
    return l;
  }

  /** Quality scores from the LLM judge for a model's versions. */
  quality(model: string, version: string, score: number): void {
    for (const l of this.live.values()) if (l.state.model === model) l.samples.quality(version, score);
  }

  active(model: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.model === model && !TERMINAL.includes(l.state.phase)) return l;
    return undefined;
  }

  get(model: string, id?: string): CanaryState {
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l) return l.state;
      const rec = this.cp.store.getRollout(id);
      if (!rec || rec.model !== model) throw new NotFoundError('rollout_not_found', `no rollout ${id} for model ${model}`);
      return rec.state as CanaryState;
    }
    const a = this.active(model);
    if (a) return a.state;
    const last = this.cp.store.listRollouts({ model, limit: 1 })[0];
    if (!last) throw new NotFoundError('rollout_not_found', `model ${model} has had no canary`);
    return last.state as CanaryState;
  }

  // ---- operator commands ----------------------------------------------------------------

  async start(model: string, opts: CanaryStartOptions, actor: Actor): Promise<CanaryState> {
    const m = this.cp.modelConfig(model);
    const stages = opts.stages ?? m.canary?.stages ?? [...DEFAULTS.rollout.stages];
    const bad = checkStages(stages);
    if (bad) throw new BadRequestError('invalid_stages', bad);
    const stageDurationMs = opts.stageDurationMs ?? m.canary?.stageDurationMs ?? DEFAULTS.rollout.stageDurationMs;
    const shadowShare = opts.shadowShare ?? m.canary?.shadowShare ?? 0;
    return this.cp.exclusive(model, () =>
      this.cp.audited(actor, 'canary_start', model, { model, ...opts }, () => {
        if (this.active(model)) throw new ConflictError('rollout_in_progress', `model ${model} already has a canary in progress (${this.active(model)?.state.id})`);
        const stable = this.cp.registry.active(model);
        if (!stable) throw new ConflictError('no_active_version', `model ${model} has no active version to compare the canary with`);
        const v = this.cp.version(model, opts.version);
        if (v.id === stable.id) throw new ConflictError('canary_is_active', `version ${model}/${v.id} is already the active version`);
        if (v.status === 'loading') throw new ConflictError('already_loading', `version ${model}/${v.id} is loading`);
        const now = Date.now();
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
        const rec = this.cp.store.putRollout({ id: state.id, model, phase: state.phase, state }, now);
        const l = this.track(state, rec.revision);
        this.event(l, 'started', `canary ${v.id} vs stable ${stable.id}, stages ${stages.join(',')} %, ${Math.round(stageDurationMs / 1000)} s each`);
        void this.begin(l, actor);
        return Promise.resolve(state);
      }),
    );
  }

  /** Load the canary if needed, then enter the first stage. Runs in the background. */
  private async begin(l: Live, actor: Actor): Promise<void> {
    const s = l.state;
    try {
      if (s.loadedByRollout) {
        this.setPhase(l, 'loading', `loading ${s.canary}`);
        const v = this.cp.registry.get(s.model, s.canary);
        await this.cp.load(v, actor, (msg) => this.event(l, 'progress', msg));
      }
      await this.cp.exclusive(s.model, () => {
        if (TERMINAL.includes(s.phase)) return Promise.resolve();
        s.stageIndex = 0;
        s.stageStartedAt = Date.now();
        l.samples = canarySamples(s, this.cp.modelConfig(s.model).canary);
        l.seen = -1;
        this.applyWeights(l, currentPercent(s));
        this.setPhase(l, 'progressing', `stage 1: ${currentPercent(s)} % to ${s.canary}`);
        return Promise.resolve();
      });
    } catch (err) {
      await this.finish(l, 'failed', `could not start the canary: ${(err as Error).message}`);
    }
  }

  async pause(model: string, actor: Actor, reason = 'paused by an operator'): Promise<CanaryState> {
    return this.command(model, actor, 'canary_pause', (l) => {
      if (l.state.phase !== 'progressing') throw new ConflictError('not_progressing', `canary ${l.state.id} is ${l.state.phase}, not progressing`);
      l.state.pausedReason = `${reason} (${actor.name})`;
      this.setPhase(l, 'paused', l.state.pausedReason);
      return Promise.resolve();
    });
  }

  async resume(model: string, actor: Actor): Promise<CanaryState> {
    return this.command(model, actor, 'canary_resume', (l) => {
      if (l.state.phase !== 'paused') throw new ConflictError('not_paused', `canary ${l.state.id} is ${l.state.phase}, not paused`);
      l.state.pausedReason = undefined;
      // a human looked at an inconclusive stage and said go on: the stage counts as passed
      this.setPhase(l, 'progressing', `resumed by ${actor.name}`);
      return this.apply(l, nextStage(l.state), 'resumed by an operator');
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
    this.cp.modelConfig(model);
    return this.cp.exclusive(model, () =>
      this.cp.audited(actor, action, model, { model }, async () => {
        const l = this.active(model);
        if (!l) throw new ConflictError('no_canary', `model ${model} has no canary in progress`);
        await fn(l);
        return l.state;
      }),
    );
  }

  // ---- the loop ---------------------------------------------------------------------------

  /** One reconcile pass over every running canary (the controller calls it every tick). */
  async tick(now = Date.now()): Promise<void> {
    for (const l of [...this.live.values()]) {
      if (l.busy || (l.state.phase !== 'progressing' && l.state.phase !== 'paused')) continue;
      l.busy = true;
      try {
        await this.cp.exclusive(l.state.model, async () => {
          // re-checked under the lock: an abort/promote queued ahead of this tick may have ended it
          if (!this.live.has(l.state.id) || (l.state.phase !== 'progressing' && l.state.phase !== 'paused')) return;
          await this.evaluate(l, now);
        });
      } catch (err) {
        this.event(l, 'error', `evaluation failed: ${(err as Error).message}`);
      } finally {
        l.busy = false;
      }
    }
  }

  /** Judge the cumulative samples, record the look, and act on the decision. */
  async evaluate(l: Live, now = Date.now()): Promise<{ verdict: Verdict; step: Step } | undefined> {
    const s = l.state;
    const seen = l.samples.a.requests + l.samples.b.requests + l.samples.a.quality.length + l.samples.b.quality.length;
    // nothing new and the stage still holds: the verdict could not change
    if (seen === l.seen && now - s.stageStartedAt < s.stageDurationMs) return undefined;
    l.seen = seen;
    const verdict = judgeCanary(l.samples.a.toMetricSamples(), l.samples.b.toMetricSamples(), l.judge, { index: s.look, previous: s.previous });
    s.look++;
    s.previous = verdict.sequentialPValues;
    const step = decide(s, verdict, now);
    s.last = summarizeVerdict(verdict, s, now, step.kind !== 'none');
    s.message = step.kind === 'none' ? step.why : undefined;
    if (step.kind !== 'none') {
      s.verdicts.push(s.last);
      if (s.verdicts.length > DEFAULTS.rollout.maxVerdicts) s.verdicts.splice(0, s.verdicts.length - DEFAULTS.rollout.maxVerdicts);
    }
    await this.apply(l, step, verdict.reasons.join('; '));
    if (step.kind === 'none') this.persist(l);
    return { verdict, step };
  }

  private async apply(l: Live, step: Step, why: string): Promise<void> {
    const s = l.state;
    switch (step.kind) {
      case 'none':
        return;
      case 'advance':
        s.stageIndex = step.to;
        s.stageStartedAt = Date.now();
        this.applyWeights(l, currentPercent(s));
        this.event(l, 'advance', `stage ${s.stageIndex + 1}: ${currentPercent(s)} % to ${s.canary}${why ? ` (${why})` : ''}`);
        this.persist(l);
        return;
      case 'promote':
        await this.doPromote(l, why || 'every stage passed');
        return;
      case 'pause':
        s.pausedReason = step.reason;
        this.setPhase(l, 'paused', step.reason);
        return;
      case 'rollback':
        await this.doRollback(l, step.reason, 'rolled_back');
        return;
    }
  }

  // ---- actions ------------------------------------------------------------------------------

  private applyWeights(l: Live, percent: number): void {
    const s = l.state;
    const cur = routeToSpec(this.cp.route(s.model));
    const weights = reweighted(cur.weights, stageWeights(s, percent));
    const shadow = s.shadowShare > 0 && percent < 100 ? { version: s.canary, share: s.shadowShare } : undefined;
    this.cp.publishRoute({ model: s.model, weights, stable: s.stable, overrides: cur.overrides, stickySalt: cur.stickySalt, shadow });
  }

  private async doPromote(l: Live, why: string): Promise<void> {
    const s = l.state;
    this.setPhase(l, 'promoting', `promoting ${s.canary}: ${why}`);
    const cur = routeToSpec(this.cp.route(s.model));
    const weights = reweighted(cur.weights, { [s.canary]: 1 });
    // stable stays loaded at weight 0: an instant rollback target
    this.cp.publishRoute({ model: s.model, weights, stable: s.canary, overrides: cur.overrides, stickySalt: cur.stickySalt, shadow: undefined });
    this.cp.registry.promote(s.model, s.canary, { actor: 'canary', reason: `canary ${s.id} promoted` });
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
    const cur = routeToSpec(this.cp.route(s.model));
    const weights = reweighted(cur.weights, { [s.stable]: 1, [s.canary]: 0 });
    if (s.loadedByRollout) delete weights[s.canary];
    this.cp.publishRoute({ model: s.model, weights, stable: s.stable, overrides: Object.fromEntries(Object.entries(cur.overrides ?? {}).filter(([, v]) => v !== s.canary)), stickySalt: cur.stickySalt, shadow: undefined });
    const t1 = performance.now();
    // persisted right after the switch (same synchronous step): a restart finishes what follows
    s.rollbackReason = reason;
    s.rollbackTo = phase;
    this.setPhase(l, 'rolling_back', reason);
    let drained = 0;
    let aborted = 0;
    if (s.loadedByRollout) {
      const d = await this.cp.dp.drain(s.model, s.canary, DEFAULTS.rollout.rollbackDrainTimeoutMs);
      drained = d.drained;
      aborted = d.aborted;
    }
    const t2 = performance.now();
    if (s.loadedByRollout) {
      await this.cp.workers.stopVersion(s.model, s.canary);
      await this.cp.dp.removeVersion(s.model, s.canary).catch(() => undefined);
      const v = this.cp.registry.get(s.model, s.canary);
      if (v.status === 'ready' || v.status === 'standby') this.cp.registry.transition(s.model, s.canary, 'retired', { gpus: [] }, { actor: 'canary', reason });
    }
    const t3 = performance.now();
    const rb: RollbackRecord = {
      reason,
      at: Date.now(),
      timing: { traffic_shift_ms: t1 - t0, drain_ms: t2 - t1, unload_ms: t3 - t2, total_ms: t3 - t0 },
      drained,
      aborted,
      canaryRequests: l.samples.b.requests,
      percentAtRollback,
    };
    s.rollback = rb;
    await this.finish(l, phase, `${phase === 'aborted' ? 'aborted' : 'rolled back'} at ${percentAtRollback} % after ${rb.canaryRequests} canary request(s): ${reason}`);
  }

  private async finish(l: Live, phase: CanaryPhase, message: string): Promise<void> {
    this.setPhase(l, phase, message);
    this.live.delete(l.state.id);
    await this.cp.notify({ kind: `canary_${phase}`, model: l.state.model, version: l.state.canary, message, data: { id: l.state.id, rollback: l.state.rollback, last: l.state.last } });
  }

  private setPhase(l: Live, phase: CanaryPhase, message: string): void {
    l.state.phase = phase;
    l.state.message = message;
    this.persist(l);
    this.event(l, phase, message);
  }

  private persist(l: Live): void {
    l.state.updatedAt = Date.now();
    const rec = this.cp.store.putRollout({ id: l.state.id, model: l.state.model, phase: l.state.phase, state: l.state }, l.state.updatedAt, l.revision);
    l.revision = rec.revision;
  }

  private event(l: Live, kind: string, message: string): void {
    const at = Date.now();
    try {
      this.cp.store.appendRolloutEvent({ rolloutId: l.state.id, at, kind, message });
    } catch {
      // the rollout row may not exist yet (first persist) — the control event still goes out
    }
    this.cp.events.emit({ kind: `canary_${kind}`, model: l.state.model, version: l.state.canary, message: `${l.state.id}: ${message}`, at });
  }
}

/** The stable and canary samples one canary is judged on; the canary's first requests are left out. */
function canarySamples(s: CanaryState, settings: CanarySettings | undefined): PairSamples {
  return new PairSamples(s.model, s.stable, s.canary, DEFAULTS.rollout.maxSamplesPerVersion, settings?.ignoreFirstRequests ?? DEFAULTS.rollout.canaryIgnoreFirstRequests);
}
