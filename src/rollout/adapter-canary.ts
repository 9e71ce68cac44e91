// Adapter canaries (docs/multi-model.md, "Adapter canaries"): a new version of a LoRA adapter is
// loaded beside the registered one under a name of its own (`<name>--<version>`) on the same base
// workers, gets a share of that adapter's requests stage by stage, and is judged against it by the
// version canary's sequential judge on the records of each side (told apart by the name each is
// served as); then promoted (the registry serves the candidate, the old version is unloaded where
// its requests ended) or rolled back (share 0 at once, the candidate unloaded). Persisted after every
// step, resumed after a restart. Sees only the ports.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { JudgeFn } from '../analysis/judge-packed.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import { candidateName } from './adapter-canary-state.js';
import { adapterCanaryStateView } from './adapter-canary-views.js';
import type { AdapterCanaryState } from './adapter-canary-state.js';
import { TERMINAL, checkStages, currentPercent, nextStage } from './canary-state.js';
import type { CanaryPhase, Step } from './canary-state.js';
import { ReconcileLoop } from './loop.js';
import type { Actor, AdapterRef, ControllerPorts, EventPage, RolloutLogEntry } from './ports.js';
import type { StoredRollout } from './rollout-record.js';
import { restoreSaved, rolloutEvent, saveInTurn, stepEvent } from './rollout-writes.js';
import { PairSamples } from './samples.js';
import { applyStep, stagedLive, takeLook, tickRunning } from './staged.js';
import type { StagedActions, StagedLive } from './staged.js';

export interface AdapterCanaryStartOptions {
  /** Where the engine loads the new version from (vLLM's `lora_path`). */
  source: string;
  version: string;
  stages?: number[] | undefined;
  stageDurationMs?: number | undefined;
}

type Live = StagedLive<AdapterCanaryState>;

/** A version as vLLM's lora names take it (it becomes part of `<name>--<version>`). */
const VERSION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export class AdapterCanaryController {
  private readonly live = new Map<string, Live>();
  private unsubscribe: (() => void) | undefined;
  private readonly loop: ReconcileLoop;

  constructor(
    private readonly ports: ControllerPorts,
    private readonly opts: { tickMs: number; judge?: JudgeFn | undefined },
  ) {
    this.loop = new ReconcileLoop(ports.clock, opts.tickMs, () => this.tick());
  }

  run(): void {
    if (this.loop.started) return;
    this.unsubscribe = this.ports.telemetry.subscribe((r) => {
      if (this.live.size !== 0 && r.adapter !== undefined) for (const l of this.live.values()) l.samples.record(r);
    });
    this.loop.start();
  }

  shutdown(): void {
    this.loop.stop();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Resolves when no background step runs (tests: advance the clock, then await this). */
  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  /** Quality scores from the LLM judge: an adapter's answers count for the side they were served by. */
  quality(model: string, _version: string, score: number, adapter?: string): void {
    if (adapter === undefined) return;
    for (const l of this.live.values()) if (l.state.model === model) l.samples.quality(adapter, score);
  }

  /** Resume the adapter canaries the store says are unfinished. */
  async recover(stored: readonly StoredRollout<AdapterCanaryState>[]): Promise<void> {
    for (const r of stored) {
      try {
        await this.recoverOne(r);
      } catch (err) {
        // one canary that cannot be resumed (its model gone from the config) never stops the others, nor the process: it ends failed
        const message = `not resumed after a restart: ${(err as Error).message}`;
        this.live.delete(r.state.id);
        this.ports.emit({ kind: 'adapter_canary_failed', model: r.state.model, message: `${r.state.id}: ${r.state.adapter}: ${message}` });
        await this.ports.rollouts.save({ ...r.state, phase: 'failed', message }, r.revision).catch(() => undefined);
      }
    }
  }

  private async recoverOne({ state: s, revision }: StoredRollout<AdapterCanaryState>): Promise<void> {
    const l = this.track(s, revision);
    const p = this.ports;
    if (s.phase === 'rolling_back' || s.phase === 'promoting') {
      // the restart cut it short after its decision: finish it (both are idempotent)
      const finish =
        s.phase === 'promoting'
          ? () => this.doPromote(l, 'completing a promotion interrupted by a restart')
          : () => this.doRollback(l, s.rollbackReason ?? 'completing a rollback interrupted by a restart', s.rollbackTo ?? 'rolled_back');
      this.loop.spawn(p.exclusive(s.adapter, finish).catch((err: unknown) => this.event(l, 'error', `could not complete it: ${(err as Error).message}`)));
      return;
    }
    const a = p.adapters.get(s.adapter);
    if (a === undefined || a.model !== s.model) {
      await this.finish(l, 'failed', `adapter ${s.adapter} is no longer registered on ${s.model}`);
      return;
    }
    // the data plane starts without the candidate: its share again (the samples restart with this process)
    s.look = 0;
    s.previous = {};
    if (s.phase === 'pending') s.phase = 'progressing';
    await this.event(l, 'resumed', `resumed after a restart at stage ${s.stageIndex + 1} (${currentPercent(s)} %), phase ${s.phase}`);
    if (await this.applyShareOrFail(l)) await this.persist(l);
  }

  private track(state: AdapterCanaryState, revision: number): Live {
    const m = this.ports.models.config(state.model);
    const l: Live = stagedLive(state, revision, sidesOf(state, m.canary?.ignoreFirstRequests), m.canary);
    this.live.set(state.id, l);
    return l;
  }

  private active(adapter: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.adapter === adapter && !TERMINAL.includes(l.state.phase)) return l;
    return undefined;
  }

  /** The registered adapter of that name (NotFoundError naming it). */
  private adapter(name: string): AdapterRef {
    const a = this.ports.adapters.get(name);
    if (a === undefined) throw new NotFoundError('adapter_not_found', `no adapter ${name} is registered (glidepath adapter list -m MODEL)`);
    return a;
  }

  /** The running canary of an adapter, else its newest one (by id: that one). */
  async get(name: string, id?: string): Promise<AdapterCanaryState> {
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l && l.state.adapter === name) return l.state;
      const r = await this.ports.rollouts.get(id);
      if (!r || r.state.kind !== 'adapter_canary' || r.state.adapter !== name)
        throw new NotFoundError('rollout_not_found', `no canary ${id} of adapter ${name}`);
      return r.state;
    }
    const a = this.active(name);
    if (a) return a.state;
    const last = await this.ports.rollouts.latest(name, 'adapter_canary');
    if (!last) throw new NotFoundError('rollout_not_found', `adapter ${name} has had no canary`);
    return last.state;
  }

  history(name: string, limit: number): Promise<StoredRollout<AdapterCanaryState>[]> {
    return this.ports.rollouts.history(name, 'adapter_canary', limit);
  }

  async events(name: string, id?: string, page?: EventPage): Promise<Awaited<ReturnType<ControllerPorts['rollouts']['events']>>> {
    return this.ports.rollouts.events((await this.get(name, id)).id, page);
  }

  /** Samples a running canary of the adapter is judged on (undefined when none runs). */
  sampleCounts(name: string): { stable: number; canary: number; min_samples: number } | undefined {
    const l = this.active(name);
    return l && { stable: l.samples.a.requests, canary: l.samples.b.requests, min_samples: l.judge.latency.minSamples };
  }

  // ---- operator commands ----------------------------------------------------------------

  async start(name: string, o: AdapterCanaryStartOptions, actor: Actor): Promise<AdapterCanaryState> {
    const p = this.ports;
    if (typeof o.source !== 'string' || o.source.trim() === '')
      throw new BadRequestError('invalid_body', 'source: a path or URI the engine loads the new version from');
    if (typeof o.version !== 'string' || !VERSION.test(o.version))
      throw new BadRequestError('invalid_body', `version: ${JSON.stringify(o.version)} is not a version (letters, digits, . _ -; at most 64)`);
    // the adapter as it is under its lock: a promotion that runs now ends first (its stable side is the one it made)
    return p.exclusive(name, () => {
      const a = this.adapter(name);
      const m = p.models.config(a.model);
      const stages = [...(o.stages ?? m.canary?.stages ?? DEFAULTS.rollout.stages)];
      const bad = checkStages(stages);
      if (bad) throw new BadRequestError('invalid_stages', bad);
      const servedAs = candidateName(name, o.version);
      if (servedAs === a.servedAs || o.version === a.version)
        throw new ConflictError('canary_is_active', `adapter ${name} is already at version ${o.version} (served as ${a.servedAs})`);
      if (o.source === a.source)
        throw new ConflictError('canary_is_active', `adapter ${name} already loads from ${o.source}: a canary compares another source`);
      // the engines know an adapter by one name: the candidate's must be no model's, adapter's or version's already
      if (p.adapters.taken(servedAs))
        throw new ConflictError('adapter_name_taken', `the candidate would be loaded as ${servedAs}, which a model or another adapter already is`);
      return p.audited(actor, 'adapter_canary_start', `${a.model}/${name}`, { adapter: name, ...o }, async () => {
        const running = this.active(name);
        if (running) throw new ConflictError('rollout_in_progress', `adapter ${name} already has a canary in progress (${running.state.id})`);
        const now = p.clock.now();
        const s: AdapterCanaryState = {
          kind: 'adapter_canary',
          id: `adapter-canary-${randomUUID().slice(0, 8)}`,
          model: a.model,
          adapter: name,
          stable: { source: a.source, version: a.version ?? null, servedAs: a.servedAs },
          candidate: { source: o.source, version: o.version, servedAs },
          stages,
          stageIndex: 0,
          stageDurationMs: o.stageDurationMs ?? m.canary?.stageDurationMs ?? DEFAULTS.rollout.stageDurationMs,
          phase: 'progressing',
          createdAt: now,
          startedAt: now,
          stageStartedAt: now,
          updatedAt: now,
          look: 0,
          previous: {},
          verdicts: [],
          actor: actor.name,
        };
        const revision = await p.rollouts.create(s);
        const l = this.track(s, revision);
        await this.event(l, 'started', `${name} ${o.version} (${o.source}) vs ${a.version ?? a.source}, stages ${stages.join(',')} % of its requests`);
        if (await this.applyShareOrFail(l)) this.show(l);
        return s;
      });
    });
  }

  pause(name: string, actor: Actor, reason = 'paused by an operator'): Promise<AdapterCanaryState> {
    return this.command(name, actor, 'adapter_canary_pause', async (l) => {
      if (l.state.phase !== 'progressing') throw new ConflictError('not_progressing', `canary ${l.state.id} is ${l.state.phase}, not progressing`);
      l.state.pausedReason = `${reason} (${actor.name})`;
      await this.setPhase(l, 'paused', l.state.pausedReason);
    });
  }

  resume(name: string, actor: Actor): Promise<AdapterCanaryState> {
    return this.command(name, actor, 'adapter_canary_resume', async (l) => {
      if (l.state.phase !== 'paused') throw new ConflictError('not_paused', `canary ${l.state.id} is ${l.state.phase}, not paused`);
      l.state.pausedReason = undefined;
      await this.setPhase(l, 'progressing', `resumed by ${actor.name}`);
      await this.apply(l, nextStage(l.state), 'resumed by an operator');
    });
  }

  promote(name: string, actor: Actor): Promise<AdapterCanaryState> {
    return this.command(name, actor, 'adapter_canary_promote', (l) => this.doPromote(l, `promoted by ${actor.name}`));
  }

  abort(name: string, actor: Actor, reason?: string): Promise<AdapterCanaryState> {
    return this.command(name, actor, 'adapter_canary_abort', (l) => this.doRollback(l, reason ?? `aborted by ${actor.name}`, 'aborted'));
  }

  private command(name: string, actor: Actor, action: string, fn: (l: Live) => Promise<void>): Promise<AdapterCanaryState> {
    return this.ports.exclusive(name, () =>
      this.ports.audited(actor, action, name, { adapter: name }, async () => {
        const l = this.active(name);
        if (!l) throw new ConflictError('no_canary', `adapter ${name} has no canary in progress`);
        if (l.state.phase !== 'progressing' && l.state.phase !== 'paused') throw new ConflictError('not_running', `canary ${l.state.id} is ${l.state.phase}`);
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

  /** One pass over the running canaries: each judged under its adapter's lock, and moved as its look decides. */
  async tick(now = this.ports.clock.now()): Promise<void> {
    await tickRunning(
      this.live.values(),
      this.ports,
      (l) => l.state.adapter,
      (l) => this.live.has(l.state.id),
      async (l) => {
        const looked = await takeLook(l, now, this.opts.judge);
        if (looked === undefined) return;
        const { verdict, step } = looked;
        if (step.kind !== 'none') this.ports.telemetry.adapterCanary.verdict(l.state.model, l.state.adapter, verdict.outcome, verdict.action);
        await this.apply(l, step, verdict.reasons.join('; '), now);
        if (step.kind === 'none') await this.persist(l);
      },
      (l, err) => this.event(l, 'error', `evaluation failed: ${err.message}`),
    );
  }

  private apply(l: Live, step: Step, why: string, now = this.ports.clock.now()): Promise<void> {
    return applyStep(l, step, why, now, this.actions);
  }

  /** What each decided step does to an adapter canary. */
  private readonly actions: StagedActions<Live> = {
    advanced: async (l, why) => {
      const s = l.state;
      this.applyShare(l);
      // the stage and its log entry in one write (as the version canary's)
      const message = `stage ${s.stageIndex + 1}: ${currentPercent(s)} % of ${s.adapter}'s requests to ${s.candidate.version}${why ? ` (${why})` : ''}`;
      await this.persist(l, stepEvent(this.ports, s, 'adapter_canary', s.candidate.version, 'advance', `${s.adapter}: ${message}`));
    },
    promote: (l, why) => this.doPromote(l, why),
    pause: (l, reason) => this.setPhase(l, 'paused', reason),
    rollback: (l, reason) => this.doRollback(l, reason, 'rolled_back'),
  };

  // ---- actions ------------------------------------------------------------------------------

  /** The candidate at the stage's share of the adapter's requests (the data plane's, in memory). */
  private applyShare(l: Live): void {
    const s = l.state;
    this.ports.adapters.setCandidate(s.adapter, { spec: this.candidateRef(s), share: currentPercent(s) / 100, salt: s.id });
  }

  /** applyShare, or the canary fails (nothing of it was loaded: no request went to it) saying why; whether it runs. */
  private async applyShareOrFail(l: Live): Promise<boolean> {
    try {
      this.applyShare(l);
      return true;
    } catch (err) {
      await this.finish(l, 'failed', `the candidate cannot be put beside ${l.state.adapter}: ${(err as Error).message}`);
      return false;
    }
  }

  private candidateRef(s: AdapterCanaryState): AdapterRef {
    return { name: s.adapter, model: s.model, source: s.candidate.source, version: s.candidate.version, servedAs: s.candidate.servedAs };
  }

  /** Unload a version of the adapter — never the one the registry serves it as (nothing to unload then). */
  private retire(s: AdapterCanaryState, servedAs: string): Promise<{ unloaded: number; failed: string[]; pending: string[] }> {
    if (this.ports.adapters.get(s.adapter)?.servedAs === servedAs) return Promise.resolve({ unloaded: 0, failed: [], pending: [] });
    return this.ports.adapters.retire(s.model, servedAs);
  }

  /** The candidate is the adapter from now on (persisted); the old version is unloaded where its last requests ended. */
  private async doPromote(l: Live, why: string): Promise<void> {
    const s = l.state;
    await this.setPhase(l, 'promoting', `promoting ${s.adapter} ${s.candidate.version}: ${why}`);
    await this.ports.adapters.promote(s.adapter, this.candidateRef(s));
    const r = await this.retire(s, s.stable.servedAs);
    const failed =
      (r.failed.length > 0 ? `; the unload failed on ${r.failed.join(', ')}` : '') +
      (r.pending.length > 0 ? `; still serving it (unloaded after their last request): ${r.pending.join(', ')}` : '');
    await this.finish(
      l,
      'succeeded',
      `${s.adapter} is ${s.candidate.version} (served as ${s.candidate.servedAs}); ${s.stable.servedAs} unloaded from ${r.unloaded} worker(s)${failed}`,
    );
  }

  /** All of the adapter's requests back to the registered version at once, then the candidate unloaded where its requests ended. */
  private async doRollback(l: Live, reason: string, phase: 'rolled_back' | 'aborted'): Promise<void> {
    const s = l.state;
    const t0 = performance.now();
    const percentAtRollback = currentPercent(s);
    this.ports.adapters.setCandidate(s.adapter, undefined);
    const t1 = performance.now();
    s.rollbackReason = reason;
    s.rollbackTo = phase;
    await this.setPhase(l, 'rolling_back', reason);
    const t2 = performance.now();
    const r = await this.retire(s, s.candidate.servedAs);
    s.rollback = {
      reason,
      at: this.ports.clock.now(),
      timing: { traffic_shift_ms: t1 - t0, unload_ms: performance.now() - t2, total_ms: performance.now() - t0 },
      unloaded: r.unloaded,
      unloadFailed: r.failed,
      unloadPending: r.pending,
      candidateRequests: l.samples.b.requests,
      percentAtRollback,
    };
    const what = phase === 'aborted' ? 'aborted' : 'rolled back';
    await this.finish(l, phase, `${what} at ${percentAtRollback} % after ${s.rollback.candidateRequests} request(s) of ${s.candidate.version}: ${reason}`);
  }

  private async finish(l: Live, phase: CanaryPhase, message: string): Promise<void> {
    await this.setPhase(l, phase, message);
    this.live.delete(l.state.id);
    const s = l.state;
    // (webhooks in the background: a dead endpoint must not hold the adapter's lock)
    this.loop.spawn(
      this.ports.notify({
        kind: `adapter_canary_${phase}`,
        model: s.model,
        version: s.candidate.version,
        message: `adapter ${s.adapter}: ${message}`,
        // the API's names, as `GET …/adapters/:name/canary` shows the same state
        data: adapterCanaryStateView(s),
      }),
    );
  }

  private async setPhase(l: Live, phase: CanaryPhase, message: string): Promise<void> {
    l.state.phase = phase;
    l.state.message = message;
    await this.persist(l);
    await this.event(l, phase, message);
  }

  /** Write the state as it is when its turn comes, and show it on /metrics. */
  private persist(l: Live, event?: RolloutLogEntry): Promise<void> {
    this.show(l);
    return saveInTurn(this.ports, l, event);
  }

  /** The state on /metrics (`glidepath_adapter_canary_*`). */
  private show(l: Live): void {
    const s = l.state;
    this.ports.telemetry.adapterCanary.state(s.model, s.adapter, s.candidate.version, s.phase, currentPercent(s), s.stageStartedAt, TERMINAL.includes(s.phase));
  }

  private event(l: Live, kind: string, message: string): Promise<void> {
    return rolloutEvent(this.ports, l.state, 'adapter_canary', l.state.candidate.version, kind, `${l.state.adapter}: ${message}`);
  }
}

/** The registered version's and the candidate's samples, told apart by the name each is served as. */
function sidesOf(s: AdapterCanaryState, ignoreFirst: number | undefined): PairSamples {
  return new PairSamples(
    s.model,
    s.stable.servedAs,
    s.candidate.servedAs,
    DEFAULTS.rollout.maxSamplesPerVersion,
    ignoreFirst ?? DEFAULTS.rollout.canaryIgnoreFirstRequests,
    'adapter',
  );
}
