// Admin routes: the multi-model scheduler — its last round (what it measured of each model, what it
// decided and why, who was short) with the decisions so far, what a round would decide now, and the
// time-shared groups (who is awake, who waits, the switches and what they cost) and a turn given by hand.
import type { HistoryEntry, Round } from '../../scheduler/controller.js';
import type { GroupStatus, SwitchRecord } from '../../scheduler/time-share.js';
import type { Decision } from '../../scheduler/plan.js';
import { z } from 'zod';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf } from './context.js';

const turnBody = z.object({ model: z.string().min(1) }).strict();

const num = (x: number): number | null => (Number.isFinite(x) ? Math.round(x * 10) / 10 : null);

function decisionView(d: Decision) {
  return {
    model: d.model,
    action: d.action,
    from: d.from,
    to: d.to,
    for: d.for ?? null,
    below_min: d.belowMin === true,
    reason: d.reason,
    effect: d.effect ?? null,
  };
}

export function roundView(r: Round) {
  return {
    at: new Date(r.at).toISOString(),
    dry_run: r.dryRun,
    measured: r.measured,
    free_gpus: r.freeGpus,
    reserved_gpus: r.reservedGpus,
    free_gpus_after: r.plan.free,
    models: r.models.map((m) => ({
      model: m.model,
      priority: m.priority,
      replicas: m.replicas,
      target: r.plan.targets.get(m.model) ?? m.replicas,
      starting: m.starting,
      min_replicas: m.minReplicas,
      max_replicas: m.maxReplicas,
      gpus_per_replica: m.gpusPerReplica,
      slo: { ttft_p99_ms: m.slo.ttftP99Ms ?? null, tpot_p99_ms: m.slo.tpotP99Ms ?? null },
      ttft_p99_ms: num(m.ttftP99Ms),
      tpot_p99_ms: num(m.tpotP99Ms),
      rps: num(m.rps),
      in_flight: m.queued ?? null,
      tokens_per_s: m.tokensPerS === undefined ? null : num(m.tokensPerS),
      scale_signal: m.scaleSignal === undefined ? null : { queue_depth: m.scaleSignal.queueDepth ?? null, tokens_per_s: m.scaleSignal.tokensPerS ?? null },
      idle_ms: num(m.idleMs),
      frozen: m.frozen ?? null,
    })),
    decisions: r.plan.decisions.map(decisionView),
    short: r.plan.short,
  };
}

function historyView(h: HistoryEntry) {
  return { at: new Date(h.at).toISOString(), version: h.version, dry_run: h.dryRun, outcome: h.outcome, gpus: h.gpus, ...decisionView(h) };
}

function switchView(s: SwitchRecord) {
  const ms = (x: number | undefined) => (x === undefined ? null : Math.round(x));
  return {
    at: new Date(s.at).toISOString(),
    from: s.from ?? null,
    to: s.to,
    why: s.why,
    drain_ms: ms(s.drainMs),
    sleep_ms: ms(s.sleepMs),
    wake_ms: ms(s.wakeMs),
    total_ms: Math.round(s.totalMs),
    released: s.released,
    outcome: s.outcome,
  };
}

export function groupView(g: GroupStatus, now: number) {
  const done = g.history.filter((s) => s.outcome === 'done');
  const lastHour = done.filter((s) => now - s.at <= 3_600_000);
  return {
    group: g.group,
    models: g.models,
    awake: g.awake ?? null,
    awake_since: g.since > 0 ? new Date(g.since).toISOString() : null,
    switching: g.switching,
    waiting: g.waiting.map((w) => ({ model: w.model, held: w.held, oldest_wait_ms: Math.round(now - w.since) })),
    backing_off: g.backingOff.map((b) => ({ model: b.model, failures: b.failures, until: new Date(b.until).toISOString() })),
    decision: g.decision === undefined ? null : { kind: g.decision.kind, to: 'to' in g.decision ? g.decision.to : null, why: g.decision.why },
    expected_switch_ms: Math.round(g.switchMs),
    // against keeping every member resident: the GPUs it saves, and what its switches cost
    cost: {
      gpus_saved: g.gpusSaved,
      switches_last_hour: lastHour.length,
      switching_ms_last_hour: Math.round(lastHour.reduce((a, s) => a + s.totalMs, 0)),
      mean_wake_ms: done.length === 0 ? null : Math.round(done.reduce((a, s) => a + (s.wakeMs ?? 0), 0) / done.length),
    },
    history: g.history.map(switchView),
  };
}

export function schedulerRoutes({ controllers }: AdminContext): RouteDef[] {
  return [
    get(
      '/scheduler',
      { role: 'viewer', summary: 'the multi-model scheduler: its settings, last round (each model measured, the decisions and why) and its decisions so far' },
      (): SchedulerView => {
        const s = controllers.scheduler.status();
        return {
          enabled: s.enabled,
          dry_run: s.dryRun,
          interval_ms: s.intervalMs,
          last_round: s.last ? roundView(s.last) : null,
          history: s.history.map(historyView),
          time_sharing: controllers.timeShare.status().map((g) => groupView(g, Date.now())),
        };
      },
    ),
    post(
      '/scheduler/time-sharing/:group/turn',
      {
        role: 'operator',
        body: turnBody,
        summary:
          "give a model of a time-share group the group's GPUs now (the awake one drained and put to sleep, it woken); its switch, or null when it has them already",
      },
      async (c, b) => {
        const rec = await controllers.timeShare.turn(c.params.group as string, b.model, actorOf(c));
        return rec === undefined ? null : switchView(rec);
      },
    ),
    get(
      '/scheduler/plan',
      { role: 'viewer', summary: 'what a scheduler round would decide now, explained; nothing is changed (whether or not the scheduler is enabled)' },
      async () => roundView(await controllers.scheduler.preview()),
    ),
  ];
}

/** `GET /scheduler/plan`'s answer (and `last_round` of `GET /scheduler`). */
export type RoundView = ReturnType<typeof roundView>;
/** `GET /scheduler`'s answer. */
export interface SchedulerView {
  enabled: boolean;
  dry_run: boolean;
  interval_ms: number;
  last_round: RoundView | null;
  history: ReturnType<typeof historyView>[];
  time_sharing: ReturnType<typeof groupView>[];
}
