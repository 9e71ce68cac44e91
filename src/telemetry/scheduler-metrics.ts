// The multi-model scheduler's metrics on /metrics (kept through the ports): each model's serving
// replicas, the target its last round set and its bounds, what it was short of, and its decisions
// by action and outcome; which model of a time-shared group is awake and its switches (docs/multi-model.md).
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

export class SchedulerMetrics {
  private readonly replicas: Gauge<'model' | 'kind'>;
  private readonly short: Gauge<'model'>;
  private readonly decisions: Counter<'model' | 'action' | 'outcome'>;
  private readonly awakeGauge: Gauge<'group' | 'model'>;
  private readonly switches: Counter<'group' | 'to' | 'outcome'>;
  private readonly switchSeconds: Histogram<'group' | 'phase'>;

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
    this.awakeGauge = new Gauge({
      name: 'glidepath_timeshare_awake',
      help: 'Whether a model of a time-shared group has the GPUs (1) or sleeps (0).',
      labelNames: ['group', 'model'] as const,
      registers: [registry],
    });
    this.switches = new Counter({
      name: 'glidepath_timeshare_switches_total',
      help: 'Switches of a time-shared group to a model, by outcome (done, failed).',
      labelNames: ['group', 'to', 'outcome'] as const,
      registers: [registry],
    });
    this.switchSeconds = new Histogram({
      name: 'glidepath_timeshare_switch_seconds',
      help: "A time-shared group's switches by phase: drain (the awake model's requests finish), sleep, wake, total.",
      labelNames: ['group', 'phase'] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160],
      registers: [registry],
    });
  }

  awake(group: string, model: string, awake: boolean): void {
    this.awakeGauge.set({ group, model }, awake ? 1 : 0);
  }

  switched(group: string, to: string, outcome: 'done' | 'failed', phases: { drainMs?: number; sleepMs?: number; wakeMs?: number; totalMs: number }): void {
    this.switches.inc({ group, to, outcome });
    if (outcome !== 'done') return;
    const seconds = (ms: number | undefined) => (ms === undefined ? undefined : ms / 1000);
    for (const [phase, s] of [
      ['drain', seconds(phases.drainMs)],
      ['sleep', seconds(phases.sleepMs)],
      ['wake', seconds(phases.wakeMs)],
      ['total', seconds(phases.totalMs)],
    ] as const)
      if (s !== undefined) this.switchSeconds.observe({ group, phase }, s);
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
