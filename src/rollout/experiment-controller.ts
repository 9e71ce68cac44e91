// A/B experiments between two loaded versions: a sticky split, per-version samples of one metric,
// and an analysis that says with confidence which is better (and how many samples it still needs).
import { randomUUID } from 'node:crypto';
import { analyzeExperiment } from '../analysis/experiment.js';
import type { ExperimentResult } from '../analysis/experiment.js';
import { DEFAULTS } from '../defaults.js';
import { routeToSpec } from '../domain/route.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { Actor, ControlPlane } from '../control/plane.js';
import { PairSamples, reweighted, trackRollouts } from './samples.js';

export type ExperimentMetric = 'quality' | 'ttft' | 'tpot' | 'latency';
export const EXPERIMENT_METRICS: readonly ExperimentMetric[] = ['quality', 'ttft', 'tpot', 'latency'];

export interface ExperimentState {
  kind: 'experiment';
  id: string;
  model: string;
  a: string;
  b: string;
  split: number;
  metric: ExperimentMetric;
  /** Smallest difference worth detecting (metric units); undefined: the observed one. */
  minDetectableEffect?: number | undefined;
  alpha: number;
  power: number;
  phase: 'running' | 'stopped';
  createdAt: number;
  updatedAt: number;
  actor: string;
  /** Route before the experiment (restored at stop). */
  previousWeights: Record<string, number>;
  previousStable: string;
  result?: (ExperimentResult & { at: number }) | undefined;
  stoppedReason?: string | undefined;
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

export class ExperimentManager {
  private readonly live = new Map<string, Live>();
  private unsubscribe: (() => void) | undefined;
  constructor(private readonly cp: ControlPlane) {}

  recover(): void {
    const { unsubscribe, stored } = trackRollouts<ExperimentState>(this.cp, 'experiment', this.live);
    this.unsubscribe = unsubscribe;
    for (const { state: st, revision } of stored) {
      this.live.set(st.id, { state: st, samples: new PairSamples(st.model, st.a, st.b, DEFAULTS.rollout.maxSamplesPerVersion), revision });
    }
  }

  stop(): void {
    this.unsubscribe?.();
  }

  quality(model: string, version: string, score: number): void {
    for (const l of this.live.values()) if (l.state.model === model) l.samples.quality(version, score);
  }

  private running(model: string): Live | undefined {
    for (const l of this.live.values()) if (l.state.model === model && l.state.phase === 'running') return l;
    return undefined;
  }

  async create(
    model: string,
    opts: { a: string; b: string; split?: number | undefined; metric: ExperimentMetric; minDetectableEffect?: number | undefined; alpha?: number | undefined; power?: number | undefined },
    actor: Actor,
  ): Promise<ExperimentState> {
    const split = opts.split ?? DEFAULTS.rollout.experimentSplit;
    if (!(split > 0 && split < 1)) throw new BadRequestError('invalid_split', `split must be strictly between 0 and 1, got ${split}`);
    if (!EXPERIMENT_METRICS.includes(opts.metric)) throw new BadRequestError('invalid_metric', `metric must be one of ${EXPERIMENT_METRICS.join(', ')}, got ${JSON.stringify(opts.metric)}`);
    if (opts.a === opts.b) throw new BadRequestError('same_versions', 'an experiment needs two different versions');
    return this.cp.exclusive(model, () =>
      this.cp.audited(actor, 'experiment_create', model, { model, ...opts }, () => {
        if (this.running(model)) throw new ConflictError('experiment_running', `model ${model} already runs experiment ${this.running(model)?.state.id}`);
        for (const id of [opts.a, opts.b]) {
          const v = this.cp.version(model, id);
          if (v.status !== 'active' && v.status !== 'standby' && v.status !== 'ready') {
            throw new ConflictError('not_loaded', `version ${model}/${id} is ${v.status}; deploy it first (glidepath deploy green --version ${id})`);
          }
        }
        const cur = routeToSpec(this.cp.route(model));
        const now = Date.now();
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
          previousStable: this.cp.route(model).stable,
        };
        const weights = reweighted(cur.weights, { [opts.a]: 1 - split, [opts.b]: split });
        // sticky: a user (x-session-id or `user`) sees one version for the experiment's duration
        this.cp.publishRoute({ model, weights, stable: opts.a, overrides: cur.overrides, stickySalt: cur.stickySalt ?? `experiment:${state.id}`, shadow: undefined });
        const rec = this.cp.store.putRollout({ id: state.id, model, phase: 'running', state }, now);
        this.live.set(state.id, { state, samples: new PairSamples(model, opts.a, opts.b, DEFAULTS.rollout.maxSamplesPerVersion), revision: rec.revision });
        this.cp.events.emit({ kind: 'experiment_created', model, message: `${state.id}: ${opts.a} vs ${opts.b} on ${opts.metric}, ${Math.round(split * 100)} % to ${opts.b}` });
        return Promise.resolve(state);
      }),
    );
  }

  get(model: string, id?: string): ExperimentState {
    if (id !== undefined) {
      const l = this.live.get(id);
      if (l) return l.state;
      const rec = this.cp.store.getRollout(id);
      if (!rec || rec.model !== model) throw new NotFoundError('experiment_not_found', `no experiment ${id} for model ${model}`);
      return rec.state as ExperimentState;
    }
    const r = this.running(model);
    if (r) return r.state;
    const last = this.cp.store.listRollouts({ model, limit: 50 }).find((x) => (x.state as ExperimentState).kind === 'experiment');
    if (!last) throw new NotFoundError('experiment_not_found', `model ${model} has no experiment`);
    return last.state as ExperimentState;
  }

  /** Analyse the samples so far (always-valid p-values: look as often as you like). */
  analyze(model: string): ExperimentState & { result: ExperimentResult & { at: number } } {
    const l = this.running(model);
    if (!l) throw new ConflictError('no_experiment', `model ${model} has no running experiment`);
    const s = l.state;
    const direction = s.metric === 'quality' ? 'higher' : 'lower';
    const res = analyzeExperiment(valuesFor(l.samples, 'a', s.metric), valuesFor(l.samples, 'b', s.metric), { direction, alpha: s.alpha, power: s.power, minDetectableEffect: s.minDetectableEffect, previousPValue: l.pMin });
    if (res.status === 'analyzed' && Number.isFinite(res.p_value_sequential)) l.pMin = res.p_value_sequential;
    s.result = { ...res, at: Date.now() };
    s.updatedAt = Date.now();
    const rec = this.cp.store.putRollout({ id: s.id, model, phase: s.phase, state: s }, s.updatedAt, l.revision);
    l.revision = rec.revision;
    return s as ExperimentState & { result: ExperimentResult & { at: number } };
  }

  /** End it: restore the route it replaced (or send everything to `promote`). */
  async stopExperiment(model: string, opts: { promote?: 'a' | 'b' | undefined }, actor: Actor): Promise<ExperimentState> {
    return this.cp.exclusive(model, () =>
      this.cp.audited(actor, 'experiment_stop', model, { model, ...opts }, () => {
        const l = this.running(model);
        if (!l) throw new ConflictError('no_experiment', `model ${model} has no running experiment`);
        const s = l.state;
        const cur = routeToSpec(this.cp.route(model));
        if (opts.promote) {
          const winner = opts.promote === 'a' ? s.a : s.b;
          const weights = reweighted(cur.weights, { [winner]: 1 });
          this.cp.publishRoute({ model, weights, stable: winner, overrides: cur.overrides, stickySalt: cur.stickySalt });
          const v = this.cp.registry.get(model, winner);
          if (v.status !== 'active') this.cp.registry.promote(model, winner, { actor: actor.name, reason: `experiment ${s.id}` });
        } else {
          this.cp.publishRoute({ model, weights: s.previousWeights, stable: s.previousStable, overrides: cur.overrides, stickySalt: cur.stickySalt });
        }
        s.phase = 'stopped';
        s.stoppedReason = opts.promote ? `promoted ${opts.promote === 'a' ? s.a : s.b}` : 'stopped; previous route restored';
        s.updatedAt = Date.now();
        this.cp.store.putRollout({ id: s.id, model, phase: 'aborted', state: s, terminal: true }, s.updatedAt, l.revision);
        this.live.delete(s.id);
        this.cp.events.emit({ kind: 'experiment_stopped', model, message: `${s.id}: ${s.stoppedReason}` });
        return Promise.resolve(s);
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
