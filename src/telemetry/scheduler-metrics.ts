// The multi-model scheduler's metrics on /metrics (kept through the ports): each model's serving
// replicas, the target its last round set and its bounds, what it was short of, and its decisions
// by action and outcome (docs/multi-model.md).
import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

export class SchedulerMetrics {
  private readonly replicas: Gauge<'model' | 'kind'>;
  private readonly short: Gauge<'model'>;
  private readonly decisions: Counter<'model' | 'action' | 'outcome'>;

  constructor(registry: Registry) {
    this.replicas = new Gauge({
      name: 'glidepath_scheduler_replicas',
      help: "A model's serving replicas as the scheduler's last round saw them (kind: serving, target, min, max).",
      labelNames: ['model', 'kind'] as const,
      registers: [registry],
    });
    this.short = new Gauge({
      name: 'glidepath_scheduler_short_replicas',
      help: 'Replicas a model wanted in the last round and could not get (no free GPU, nothing of a lower priority to take).',
      labelNames: ['model'] as const,
      registers: [registry],
    });
    this.decisions = new Counter({
      name: 'glidepath_scheduler_decisions_total',
      help: "The scheduler's decisions (action: scale_up, scale_down, preempt) by what came of them (done, failed, skipped, dry_run).",
      labelNames: ['model', 'action', 'outcome'] as const,
      registers: [registry],
    });
  }

  /** One model after a round. */
  round(model: string, m: { serving: number; target: number; min: number; max: number; short: number }): void {
    this.replicas.set({ model, kind: 'serving' }, m.serving);
    this.replicas.set({ model, kind: 'target' }, m.target);
    this.replicas.set({ model, kind: 'min' }, m.min);
    this.replicas.set({ model, kind: 'max' }, m.max);
    this.short.set({ model }, m.short);
  }

  decision(model: string, action: string, outcome: 'done' | 'failed' | 'skipped' | 'dry_run'): void {
    this.decisions.inc({ model, action, outcome });
  }
}
