// A/B experiments between two loaded versions: a sticky split, per-version samples of one metric,
// and an analysis that says with confidence which is better (and how many samples it still needs).
// Sees only the ports.
import { randomUUID } from 'node:crypto';
import { analyzeExperiment } from '../analysis/ab-test.js';
import type { ExperimentResult } from '../analysis/ab-test.js';
import { DEFAULTS } from '../defaults.js';
import { routeToSpec } from '../domain/route.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import { EXPERIMENT_METRICS } from './experiment-state.js';
import type { ExperimentMetric, ExperimentState } from './experiment-state.js';
import type { Actor, ControllerPorts } from './ports.js';
import type { StoredRollout } from './rollout-record.js';
import { PairSamples, reweighted } from './samples.js';
import { refuseTimeSharedStandby } from './bluegreen.js';

export { EXPERIMENT_METRICS };
export type { ExperimentMetric, ExperimentState };

export interface ExperimentOptions {
  a: string;
  b: string;
  split?: number | undefined;
  metric: ExperimentMetric;
  minDetectableEffect?: number | undefined;
  alpha?: number | undefined;
  power?: number | undefined;
}

interface Live {
  state: ExperimentState;
  samples: PairSamples;
  revision: number;
  /** Running minimum of the always-valid p-value over analyses of this sample stream (resets with it). */
  pMin?: number | undefined;
}

function valuesFor(s: PairSamples, which: 'a' | 'b', metric: ExperimentMetric): number[] {
  const v = which === 'a' ? s.a : s.b;
  switch (metric) {
    case 'quality':
      return v.quality.toArray();
    case 'ttft':
      return v.ttft.toArray();
    case 'tpot':
      return v.tpot.toArray();
    case 'latency':
      return v.latency.toArray();
  }
}

export class ExperimentController {
  private readonly live = new Map<string, Live>();
  private unsubscribe: (() => void) | undefined;
  constructor(private readonly ports: ControllerPorts) {}

  /** Listen to telemetry; resumed experiments come in through `recover`. */
  run(): void {
    this.unsubscribe ??= this.ports.telemetry.subscribe((r) => {
      if (this.live.size !== 0) for (const l of this.live.values()) l.samples.record(r);
    });
  }

  shutdown(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Experiments still running when the process stopped: their samples start again from here. */
  recover(stored: readonly StoredRollout<ExperimentState>[]): void {
    for (const { state: st, revision } of stored) this.live.set(st.id, { state: st, samples: samplesOf(st), revision });
  }

  quality(model: string, version: string, score: number): void {
    for (const l of this.live.values()) if (l.state.model === model) l.samples.quality(version, score);
  }

  private running(model: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.model === model && l.state.phase === 'running') return l;
    return undefined;
  }

  async create(model: string, opts: ExperimentOptions, actor: Actor): Promise<ExperimentState> {
    const p = this.ports;
    const split = opts.split ?? DEFAULTS.rollout.experimentSplit;
    if (!(split > 0 && split < 1)) throw new BadRequestError('invalid_split', `split must be strictly between 0 and 1, got ${split}`);
    if (!EXPERIMENT_METRICS.includes(opts.metric))
      throw new BadRequestError('invalid_metric', `metric must be one of ${EXPERIMENT_METRICS.join(', ')}, got ${JSON.stringify(opts.metric)}`);
    if (opts.a === opts.b) throw new BadRequestError('same_versions', 'an experiment needs two different versions');
    refuseTimeSharedStandby(p, model, 'an experiment');
    return p.exclusive(model, () =>
      p.audited(actor, 'experiment_create', model, { model, ...opts }, async () => {
        const running = this.running(model);
        if (running) throw new ConflictError('experiment_running', `model ${model} already runs experiment ${running.state.id}`);
        for (const id of [opts.a, opts.b]) {
          const v = await p.versions.get(model, id);
          if (v.status !== 'active' && v.status !== 'standby' && v.status !== 'ready') {
            throw new ConflictError('not_loaded', `version ${model}/${id} is ${v.status}; deploy it first (glidepath deploy green --version ${id})`);
          }
        }
        const route = p.routes.current(model);
        const cur = routeToSpec(route);
        const now = p.clock.now();
        const state: ExperimentState = {
          kind: 'experiment',
          id: `exp-${randomUUID().slice(0, 8)}`,
          model,
          a: opts.a,
          b: opts.b,
          split,
          metric: opts.metric,
          minDetectableEffect: opts.minDetectableEffect,
          alpha: opts.alpha ?? 0.05,
          power: opts.power ?? DEFAULTS.rollout.experimentPower,
          phase: 'running',
          createdAt: now,
          updatedAt: now,
          actor: actor.name,
          previousWeights: { ...cur.weights },
          previousStable: route.stable,
        };
        // recorded first: the store refuses a second unfinished rollout of the model before any traffic moves
        // (regression: the split was published first, so a refused experiment left its split in force)
        let revision = await p.rollouts.create(state);
        const weights = reweighted(cur.weights, { [opts.a]: 1 - split, [opts.b]: split });
        try {
          // sticky: a user (x-session-id or `user`) sees one version for the experiment's duration
          await p.routes.publish({
            model,
            weights,
            stable: opts.a,
            overrides: cur.overrides,
            stickySalt: cur.stickySalt ?? `experiment:${state.id}`,
            shadow: undefined,
          });
        } catch (err) {
          state.phase = 'stopped';
          state.stoppedReason = `the split could not be published: ${(err as Error).message}`;
          revision = await p.rollouts.save(state, revision);
          throw err;
        }
        this.live.set(state.id, { state, samples: samplesOf(state), revision });
        p.emit({
          kind: 'experiment_created',
          model,
          message: `${state.id}: ${opts.a} vs ${opts.b} on ${opts.metric}, ${Math.round(split * 100)} % to ${opts.b}`,
        });
        return state;
      }),
    );
  }

  /** The running experiment of a model, else its newest one (by id: that one) — never another kind of rollout. */
  async get(model: string, id?: string): Promise<ExperimentState> {
    this.ports.models.config(model);
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l && l.state.model === model) return l.state;
      const r = await this.ports.rollouts.get(id);
      if (!r || r.state.model !== model || r.state.kind !== 'experiment')
        throw new NotFoundError('experiment_not_found', `no experiment ${id} for model ${model}`);
      return r.state;
    }
    const r = this.running(model);
    if (r) return r.state;
    const last = await this.ports.rollouts.latest(model, 'experiment');
    if (!last) throw new NotFoundError('experiment_not_found', `model ${model} has no experiment`);
    return last.state;
  }

  /** Analyse the samples so far (always-valid p-values: look as often as you like). */
  async analyze(model: string): Promise<ExperimentState & { result: ExperimentResult & { at: number } }> {
    this.ports.models.config(model);
    // under the model's lock: two analyses (or an analysis and a stop) never write the same revision
    return this.ports.exclusive(model, async () => {
      const l = this.running(model);
      if (!l) throw new ConflictError('no_experiment', `model ${model} has no running experiment`);
      const s = l.state;
      const direction = s.metric === 'quality' ? 'higher' : 'lower';
      const res = analyzeExperiment(valuesFor(l.samples, 'a', s.metric), valuesFor(l.samples, 'b', s.metric), {
        direction,
        alpha: s.alpha,
        power: s.power,
        minDetectableEffect: s.minDetectableEffect,
        previousPValue: l.pMin,
      });
      if (res.status === 'analyzed' && Number.isFinite(res.p_value_sequential)) l.pMin = res.p_value_sequential;
      const result = { ...res, at: this.ports.clock.now() };
      s.result = result;
      s.updatedAt = result.at;
      l.revision = await this.ports.rollouts.save(s, l.revision);
      return { ...s, result };
    });
  }

  /** End it: restore the route it replaced (or send everything to `promote`). */
  async stopExperiment(model: string, opts: { promote?: 'a' | 'b' | undefined }, actor: Actor): Promise<ExperimentState> {
    const p = this.ports;
    p.models.config(model);
    return p.exclusive(model, () =>
      p.audited(actor, 'experiment_stop', model, { model, ...opts }, async () => {
        const l = this.running(model);
        if (!l) throw new ConflictError('no_experiment', `model ${model} has no running experiment`);
        const s = l.state;
        const cur = routeToSpec(p.routes.current(model));
        if (opts.promote) {
          const winner = opts.promote === 'a' ? s.a : s.b;
          const weights = reweighted(cur.weights, { [winner]: 1 });
          await p.routes.publish({ model, weights, stable: winner, overrides: cur.overrides, stickySalt: cur.stickySalt });
          const v = await p.versions.get(model, winner);
          if (v.status !== 'active') await p.versions.promote(model, winner, { actor: actor.name, reason: `experiment ${s.id}` });
        } else {
          await p.routes.publish({ model, weights: s.previousWeights, stable: s.previousStable, overrides: cur.overrides, stickySalt: cur.stickySalt });
        }
        s.phase = 'stopped';
        s.stoppedReason = opts.promote ? `promoted ${opts.promote === 'a' ? s.a : s.b}` : 'stopped; previous route restored';
        s.updatedAt = p.clock.now();
        l.revision = await p.rollouts.save(s, l.revision);
        this.live.delete(s.id);
        p.emit({ kind: 'experiment_stopped', model, message: `${s.id}: ${s.stoppedReason}` });
        return s;
      }),
    );
  }

  /** Raw per-version values (tests and the dashboard). */
  values(model: string): { a: number[]; b: number[] } {
    const l = this.running(model);
    if (!l) throw new ConflictError('no_experiment', `model ${model} has no running experiment`);
    return { a: valuesFor(l.samples, 'a', l.state.metric), b: valuesFor(l.samples, 'b', l.state.metric) };
  }
}

function samplesOf(s: ExperimentState): PairSamples {
  return new PairSamples(s.model, s.a, s.b, DEFAULTS.rollout.maxSamplesPerVersion);
}
