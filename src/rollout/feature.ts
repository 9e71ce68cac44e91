// Wires the canary controller, A/B experiments and the LLM judge into `glidepath up`: admin
// endpoints, the reconcile tick, and the response tap that feeds judge scores to the analysis.
import { z } from 'zod';
import { QualityJudge } from '../analysis/llmjudge.js';
import { DEFAULTS } from '../defaults.js';
import type { Feature } from '../control/app.js';
import type { ControlPlane } from '../control/plane.js';
import type { RouteDef, Ctx } from '../api/router.js';
import { CanaryController } from './canary-controller.js';
import type { CanaryState } from './canary-state.js';
import { TERMINAL, currentPercent } from './canary-state.js';
import { EXPERIMENT_METRICS, ExperimentManager } from './experiment-controller.js';
import type { ExperimentMetric } from './experiment-controller.js';

const startBody = z
  .object({
    version: z.string().min(1),
    stages: z.array(z.number()).optional(),
    stage_duration_ms: z.number().int().positive().optional(),
    shadow_share: z.number().min(0).max(1).optional(),
  })
  .strict();
const reasonBody = z.object({ reason: z.string().optional() }).strict();
const expBody = z
  .object({
    a: z.string().min(1),
    b: z.string().min(1),
    split: z.number().gt(0).lt(1).optional(),
    metric: z.enum(EXPERIMENT_METRICS as [ExperimentMetric, ...ExperimentMetric[]]),
    min_detectable_effect: z.number().positive().optional(),
    alpha: z.number().gt(0).lt(0.5).optional(),
    power: z.number().gt(0).lt(1).optional(),
  })
  .strict();
const stopBody = z.object({ promote: z.enum(['a', 'b']).optional() }).strict();

export class Rollouts {
  readonly canary: CanaryController;
  readonly experiments: ExperimentManager;
  judge: QualityJudge | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(readonly cp: ControlPlane) {
    this.canary = new CanaryController(cp);
    this.experiments = new ExperimentManager(cp);
  }

  start(): void {
    const j = this.cp.cfg.judge;
    if (j) {
      this.judge = new QualityJudge(
        { url: j.url, model: j.model, apiKey: j.apiKeyEnv ? process.env[j.apiKeyEnv] : undefined, timeoutMs: j.timeoutMs },
        (r) => {
          this.cp.dp.telemetry.recordQuality(r.model, r.version, r.score);
          this.canary.quality(r.model, r.version, r.score);
          this.experiments.quality(r.model, r.version, r.score);
        },
        { concurrency: j.concurrency, queueMax: DEFAULTS.judge.queueMax, pairTtlMs: DEFAULTS.judge.pairTtlMs, pointwise: j.mode === 'pointwise' },
      );
      const share = j.mode === 'pointwise' ? j.sampleShare : 0;
      for (const m of this.cp.cfg.models) this.cp.dp.setTap(m.name, { share, listener: this.judge.listener });
    }
    this.canary.recover();
    this.experiments.recover();
    this.timer = setInterval(() => void this.tick(), this.cp.cfg.control.tickMs);
    this.timer.unref();
  }

  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      await this.canary.tick();
    } finally {
      this.ticking = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.canary.stop();
    this.experiments.stop();
  }

  /** Operator view of a canary: stage, weights, both versions' live windows, verdicts, next decision. */
  canaryView(model: string, id?: string): Record<string, unknown> {
    const s: CanaryState = this.canary.get(model, id);
    const now = Date.now();
    const route = this.cp.dp.models.get(model)?.route;
    const win = (v: string) => this.cp.dp.telemetry.stats(model, v, now);
    const live = this.canary.active(model);
    const canaryN = live ? live.samples.b.requests : undefined;
    const minSamples = live?.judge.latency.minSamples ?? DEFAULTS.canary.latency.minSamples;
    const canaryWin = win(s.canary);
    const rate = canaryWin.rps;
    const stageLeftMs = Math.max(0, s.stageStartedAt + s.stageDurationMs - now);
    const samplesLeft = canaryN === undefined ? 0 : Math.max(0, minSamples - canaryN);
    const samplesEtaMs = samplesLeft === 0 ? 0 : rate > 0 ? (samplesLeft / rate) * 1000 : null;
    return {
      ...s,
      percent: currentPercent(s),
      weights: route ? Object.fromEntries(route.versions.map((v) => [v.id, v.weight])) : null,
      windows: { [s.stable]: win(s.stable), [s.canary]: canaryWin },
      samples: live ? { stable: live.samples.a.requests, canary: live.samples.b.requests, min_samples: minSamples } : null,
      next_decision: TERMINAL.includes(s.phase)
        ? null
        : { stage_holds_ms: stageLeftMs, samples_needed: samplesLeft, samples_eta_ms: samplesEtaMs, earliest_ms: samplesEtaMs === null ? null : Math.max(stageLeftMs, samplesEtaMs) },
      judge: this.judge?.stats() ?? null,
    };
  }

  routes(): RouteDef[] {
    const cp = this.cp;
    const model = (c: Ctx) => {
      const m = c.params.model as string;
      cp.modelConfig(m);
      return m;
    };
    const actor = (c: Ctx) => ({ name: c.principal.name });
    return [
      {
        method: 'POST',
        path: '/models/:model/canary',
        role: 'operator',
        summary: 'start a progressive canary of a version against the active one',
        handler: async (c) => {
          const b = await c.body(startBody);
          const s = await this.canary.start(model(c), { version: b.version, stages: b.stages, stageDurationMs: b.stage_duration_ms, shadowShare: b.shadow_share }, actor(c));
          return this.canaryView(s.model, s.id);
        },
      },
      { method: 'GET', path: '/models/:model/canary', role: 'viewer', summary: 'the running (or last) canary with live numbers', handler: (c) => this.canaryView(model(c), c.query.get('id') ?? undefined) },
      {
        method: 'GET',
        path: '/models/:model/canary/history',
        role: 'viewer',
        summary: 'past rollouts of the model, newest first',
        handler: (c) => cp.store.listRollouts({ model: model(c), limit: 50 }).map((r) => ({ id: r.id, phase: r.phase, created_at: r.createdAt, updated_at: r.updatedAt, state: r.state })),
      },
      {
        method: 'GET',
        path: '/models/:model/canary/events',
        role: 'viewer',
        summary: 'the events of a rollout (id=…, default the current one)',
        handler: (c) => {
          const s = this.canary.get(model(c), c.query.get('id') ?? undefined);
          return cp.store.rolloutEvents(s.id);
        },
      },
      ...(['pause', 'resume', 'promote', 'abort'] as const).map(
        (verb): RouteDef => ({
          method: 'POST',
          path: `/models/:model/canary/${verb}`,
          role: 'operator',
          summary: `${verb} the running canary`,
          handler: async (c) => {
            const b = await c.body(reasonBody);
            const m = model(c);
            const s = verb === 'pause' ? await this.canary.pause(m, actor(c), b.reason) : verb === 'resume' ? await this.canary.resume(m, actor(c)) : verb === 'promote' ? await this.canary.promote(m, actor(c)) : await this.canary.abort(m, actor(c), b.reason);
            return this.canaryView(m, s.id);
          },
        }),
      ),
      {
        method: 'POST',
        path: '/models/:model/experiments',
        role: 'operator',
        summary: 'start an A/B experiment between two loaded versions',
        handler: async (c) => {
          const b = await c.body(expBody);
          return this.experiments.create(model(c), { a: b.a, b: b.b, split: b.split, metric: b.metric, minDetectableEffect: b.min_detectable_effect, alpha: b.alpha, power: b.power }, actor(c));
        },
      },
      { method: 'GET', path: '/models/:model/experiments', role: 'viewer', summary: 'the running (or last) experiment', handler: (c) => this.experiments.get(model(c), c.query.get('id') ?? undefined) },
      { method: 'POST', path: '/models/:model/experiments/analyze', role: 'viewer', summary: 'analyse the running experiment now', handler: (c) => this.experiments.analyze(model(c)) },
      {
        method: 'POST',
        path: '/models/:model/experiments/stop',
        role: 'operator',
        summary: 'stop the experiment: restore the previous route, or promote a or b',
        handler: async (c) => {
          const b = await c.body(stopBody);
          return this.experiments.stopExperiment(model(c), { promote: b.promote }, actor(c));
        },
      },
      { method: 'GET', path: '/judge', role: 'viewer', summary: 'LLM judge counters (judged, failures, dropped, queue)', handler: () => ({ configured: this.judge !== undefined, ...(this.judge?.stats() ?? {}) }) },
    ];
  }
}

let current: Rollouts | undefined;
/** The running instance (tests reach the controller through it). */
export function rollouts(): Rollouts | undefined {
  return current;
}

/** Registered from src/control/app.ts. */
export const rolloutsFeature: Feature = {
  name: 'rollouts',
  routes: (cp: ControlPlane) => {
    current = new Rollouts(cp);
    return current.routes();
  },
  start: () => current?.start(),
  stop: () => {
    current?.stop();
    current = undefined;
  },
};
