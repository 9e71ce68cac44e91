// The multi-model scheduler's decisions (pure; seed 003): how many serving replicas each model gets
// of a fixed set of GPUs, by priority and SLO, with preemption of strictly lower priorities only,
// and a reason for every change. The controller (controller.ts) measures, asks, and carries out.

/** Scheduling priorities, first served first; `batch` runs on what is left and has no SLO. */
export type SchedPriority = 'critical' | 'high' | 'standard' | 'batch';
export const SCHED_PRIORITIES: readonly SchedPriority[] = ['critical', 'high', 'standard', 'batch'];
const RANK: Readonly<Record<SchedPriority, number>> = { critical: 0, high: 1, standard: 2, batch: 3 };

/** One model as the scheduler sees it this round. */
export interface ModelLoad {
  model: string;
  /** Its active version (undefined: none; then it is frozen). */
  version?: string | undefined;
  priority: SchedPriority;
  /** p99 targets (ms); a model without one is never scaled for latency. */
  slo: { ttftP99Ms?: number | undefined; tpotP99Ms?: number | undefined };
  minReplicas: number;
  maxReplicas: number;
  /** GPUs one replica of its active version holds. */
  gpusPerReplica: number;
  /** Serving replicas of its active version now (starting ones included). */
  replicas: number;
  /** Of those, started and not yet taking traffic: a model is not raised again before they do. */
  starting: number;
  /** Over the scheduler's window; NaN without traffic. */
  ttftP99Ms: number;
  tpotP99Ms: number;
  /** Requests per second over the window. */
  rps: number;
  /** Requests in flight on average over the window. */
  inFlight: number;
  /** Requests the p99s are over (fewer than PlanSettings.minSamples: not judged against the SLO). */
  samples: number;
  /**
   * What its replicas are measured to serve and what it is asked for (controller.ts): completion
   * tokens/s one worker served over the window (the median worker), requests arriving per second
   * (those finished plus the growth of those in flight), and completion tokens per request.
   * Undefined or not finite: not measured (then its p99's overshoot sizes it).
   */
  capacity?: { workerTokensPerS: number; arrivalsPerS: number; tokensPerRequest: number } | undefined;
  /** The load one replica is sized for (config `scale_signal`), beside the SLO; undefined: none. */
  scaleSignal?: { queueDepth?: number | undefined; tokensPerS?: number | undefined } | undefined;
  /** Requests in flight at the gateway now (running and waiting): the queue depth the signal reads. */
  queued?: number | undefined;
  /** Completion tokens/s the model served over the window. */
  tokensPerS?: number | undefined;
  /** Sequences one replica runs at once (its engine's max_num_seqs); undefined: not known. */
  seqsPerReplica?: number | undefined;
  /** ms since its last request (or since the scheduler started); NaN: not measured (never judged idle). */
  idleMs: number;
  /** ms since the scheduler last changed its replicas (Infinity: never). */
  sinceChangeMs: number;
  /** Why it cannot be changed now (a rollout runs, no active version, asleep…); undefined: it can. */
  frozen?: string | undefined;
}

export interface PlanSettings {
  /** A model without a request for this long goes down to its min replicas. */
  idleAfterMs: number;
  /** No scale-down within this after a change (either way): the hysteresis that stops flapping. */
  cooldownMs: number;
  /** A model whose p99 is below this share of its SLO, past the cool-down, gives back one replica a round. */
  relaxBelow: number;
  /** The utilisation a replica count is sized for: p99 at the SLO means `1 / headroom` more replicas. */
  headroom: number;
  /** Requests a model's window must hold before its p99s are judged against its SLO. */
  minSamples: number;
}

export type Action = 'scale_up' | 'scale_down' | 'preempt';

/** One change, explained. */
export interface Decision {
  model: string;
  action: Action;
  from: number;
  to: number;
  /** Preemption: the model the GPUs go to. */
  for?: string | undefined;
  /** The victim goes below its min replicas (reported and alerted). */
  belowMin?: boolean | undefined;
  reason: string;
  /** What it is expected to change: the GPUs it takes or frees, each replica's share of the traffic, how busy they are. */
  effect?: string | undefined;
}

export interface Plan {
  /** Replicas per model after this round (every model given). */
  targets: Map<string, number>;
  /** In order: scale-downs and preemptions (they free GPUs) before scale-ups. */
  decisions: Decision[];
  /** GPUs left free. */
  free: number;
  /** Models that wanted more than they got, and why. */
  short: { model: string; wanted: number; got: number; reason: string }[];
}

const ms = (x: number) => `${Math.round(x)} ms`;
/**
 * A saturated model's demand (tokens/s asked for) and what one replica serves (tokens/s): saturated,
 * that is what it can. Undefined when it keeps up (what a replica served is then only its share of the
 * demand) or nothing is measured.
 */
function measuredDemand(m: ModelLoad): { demand: number; workerTokensPerS: number; arrivalsPerS: number; tokensPerRequest: number } | undefined {
  const c = m.capacity;
  if (c === undefined || !(c.workerTokensPerS > 0) || !(c.tokensPerRequest > 0) || !Number.isFinite(c.workerTokensPerS * c.tokensPerRequest)) return undefined;
  const saturated = c.arrivalsPerS > m.rps * SATURATED || (m.seqsPerReplica !== undefined && m.inFlight >= m.replicas * m.seqsPerReplica * SLOTS_FULL);
  return saturated ? { ...c, demand: c.arrivalsPerS * c.tokensPerRequest } : undefined;
}

/** Replicas a model that asks for more gets: `fit`, at least one more than it has, at most its max. */
function oneMoreAtLeast(m: ModelLoad, fit: number): number {
  return Math.min(m.maxReplicas, Math.max(m.replicas + 1, fit));
}

/** What going from `from` to `to` replicas is expected to do, in words. */
export function effectOf(m: ModelLoad, from: number, to: number): string {
  const parts = [`${Math.abs(to - from) * m.gpusPerReplica} GPU(s) ${to > from ? 'taken' : 'freed'}`];
  if (to === 0) parts.push(m.rps > 0 ? `no replica: its ${m.rps.toFixed(1)} req/s refused (503) until it has one again` : 'no replica');
  else if (m.rps > 0 && from > 0) parts.push(`${(m.rps / from).toFixed(1)} → ${(m.rps / to).toFixed(1)} req/s a replica`);
  const d = measuredDemand(m);
  if (d !== undefined && to > 0 && from > 0) {
    const pct = (n: number) => `${Math.round((d.demand / (n * d.workerTokensPerS)) * 100)} %`;
    parts.push(`${pct(from)} → ${pct(to)} of the measured capacity asked for`);
  }
  return parts.join('; ');
}

/** Arrivals above this × the finishing rate: a queue grows, the replicas serve all they can. */
const SATURATED = 1.05;
/** Requests in flight above this share of the replicas' sequence slots: they are full. */
const SLOTS_FULL = 0.9;

/**
 * Replicas a model violating its SLO wants, at least one more, at most its max. A saturated model
 * (more requests arriving than finishing, or its replicas' sequence slots full) is sized from its
 * measured capacity: the demand (requests arriving × tokens each) over what one replica was measured
 * to serve — saturated, that is what it can — sized for `headroom`. Otherwise (or unmeasured) its
 * replicas keep up and the latency is not a lack of throughput: the p99's overshoot of the SLO scales
 * the count (seed 003).
 */
export function wantedFor(m: ModelLoad, s: PlanSettings): { want: number; why: string } | undefined {
  const slo = sloWant(m, s);
  const signal = signalWant(m);
  if (slo === undefined || signal === undefined) return slo ?? signal;
  return slo.want >= signal.want ? { want: slo.want, why: `${slo.why}; ${signal.why}` } : { want: signal.want, why: `${signal.why}; ${slo.why}` };
}

/**
 * Replicas a model's scale signal asks for (none when it is within it): what it carries now over
 * what one replica is sized for — requests in flight over `queue_depth`, tokens/s over `tokens_per_s`
 * — at least one more, at most its max.
 */
export function signalWant(m: ModelLoad): { want: number; why: string } | undefined {
  const t = m.scaleSignal;
  if (t === undefined) return undefined;
  let fit = 0;
  const over: string[] = [];
  const queued = m.queued ?? 0;
  if (t.queueDepth !== undefined && queued > m.replicas * t.queueDepth) {
    fit = Math.max(fit, Math.ceil(queued / t.queueDepth));
    over.push(`${queued} request(s) in flight > ${m.replicas} × ${t.queueDepth}`);
  }
  const tps = m.tokensPerS ?? 0;
  if (t.tokensPerS !== undefined && tps > m.replicas * t.tokensPerS) {
    fit = Math.max(fit, Math.ceil(tps / t.tokensPerS));
    over.push(`${Math.round(tps)} tok/s > ${m.replicas} × ${t.tokensPerS}`);
  }
  if (over.length === 0) return undefined;
  const want = oneMoreAtLeast(m, fit);
  return { want, why: `scale signal: ${over.join(', ')} → ${want}` };
}

/** Whether `fewer` replicas carry what the scale signal reads at `relax` of what each is sized for (undefined: no signal). */
function signalRelaxed(m: ModelLoad, fewer: number, relax: number): boolean | undefined {
  const t = m.scaleSignal;
  if (t === undefined || (t.queueDepth === undefined && t.tokensPerS === undefined)) return undefined;
  return (
    (t.queueDepth === undefined || (m.queued ?? 0) <= fewer * t.queueDepth * relax) &&
    (t.tokensPerS === undefined || (m.tokensPerS ?? 0) <= fewer * t.tokensPerS * relax)
  );
}

function sloWant(m: ModelLoad, s: PlanSettings): { want: number; why: string } | undefined {
  // a p99 of a few requests is their slowest one: no replicas for one slow request
  if (m.samples < s.minSamples) return undefined;
  const over: string[] = [];
  let ratio = 0;
  if (m.slo.ttftP99Ms !== undefined && m.ttftP99Ms > m.slo.ttftP99Ms) {
    ratio = Math.max(ratio, m.ttftP99Ms / m.slo.ttftP99Ms);
    over.push(`TTFT p99 ${ms(m.ttftP99Ms)} > SLO ${ms(m.slo.ttftP99Ms)}`);
  }
  if (m.slo.tpotP99Ms !== undefined && m.tpotP99Ms > m.slo.tpotP99Ms) {
    ratio = Math.max(ratio, m.tpotP99Ms / m.slo.tpotP99Ms);
    over.push(`TPOT p99 ${ms(m.tpotP99Ms)} > SLO ${ms(m.slo.tpotP99Ms)}`);
  }
  if (over.length === 0) return undefined;
  const c = measuredDemand(m);
  if (c !== undefined) {
    const want = oneMoreAtLeast(m, Math.ceil(c.demand / (c.workerTokensPerS * s.headroom)));
    return {
      want,
      why:
        `${over.join(', ')}: demand ${Math.round(c.demand)} tok/s (${c.arrivalsPerS.toFixed(1)} req/s × ${Math.round(c.tokensPerRequest)} tok) ` +
        `over ${Math.round(c.workerTokensPerS)} tok/s a replica (measured), sized for ${Math.round(s.headroom * 100)} % → ${want}`,
    };
  }
  const want = oneMoreAtLeast(m, Math.ceil((Math.max(1, m.replicas) * ratio) / s.headroom));
  return { want, why: `${over.join(', ')}: ×${ratio.toFixed(2)} on ${m.replicas} replica(s), sized for ${Math.round(s.headroom * 100)} % → ${want}` };
}

/**
 * This round's targets. In order: idle models go down to their min and comfortable ones give back
 * one replica (past the cool-down); every model gets its min replicas; models violating their SLO or
 * past their scale signal get what `wantedFor` asks, in priority order; batch models with traffic take what is left.
 * GPUs come from the free ones, then from models of strictly lower priority (lowest first, then
 * least traffic): above their min first, below it only for a critical model.
 */
export function plan(models: readonly ModelLoad[], freeGpus: number, s: PlanSettings): Plan {
  const byPriority = [...models].sort((a, b) => RANK[a.priority] - RANK[b.priority] || a.model.localeCompare(b.model));
  const target = new Map(models.map((m) => [m.model, m.replicas]));
  const decisions: Decision[] = [];
  const short: Plan['short'] = [];
  const raised = new Set<string>();
  const lowered = new Set<string>();
  let free = freeGpus;
  const get = (m: ModelLoad) => target.get(m.model) as number;

  const change = (m: ModelLoad, to: number, action: Action, reason: string, extra: Partial<Decision> = {}) => {
    const from = get(m);
    free += (from - to) * m.gpusPerReplica;
    target.set(m.model, to);
    lowered.add(m.model);
    decisions.push({ model: m.model, action, from, to, reason, ...extra });
  };

  // 0. above its max (the max was lowered): down to it, now
  for (const m of byPriority) if (m.frozen === undefined && get(m) > m.maxReplicas) change(m, m.maxReplicas, 'scale_down', `above its max of ${m.maxReplicas}`);

  // 1. give back: idle to min, comfortable by one (never what was just raised, never within the cool-down)
  for (const m of byPriority) {
    if (m.frozen !== undefined || get(m) <= m.minReplicas || m.sinceChangeMs < s.cooldownMs) continue;
    if (m.idleMs >= s.idleAfterMs) {
      change(m, m.minReplicas, 'scale_down', `idle for ${ms(m.idleMs)} (≥ ${ms(s.idleAfterMs)}): down to its min`);
      continue;
    }
    const slo = m.slo.ttftP99Ms;
    const fewer = get(m) - 1;
    const tpot = m.slo.tpotP99Ms;
    // comfortable: its SLO (TTFT, TPOT, those it has) and its scale signal, those it has (at least one), well within
    const sloRelaxed =
      slo === undefined && tpot === undefined
        ? undefined
        : m.samples >= s.minSamples && (slo === undefined || m.ttftP99Ms < slo * s.relaxBelow) && (tpot === undefined || m.tpotP99Ms < tpot * s.relaxBelow);
    const signalOk = signalRelaxed(m, fewer, s.relaxBelow);
    if (sloRelaxed === false || signalOk === false || (sloRelaxed === undefined && signalOk === undefined)) continue;
    // one fewer must still carry what runs (sized for the headroom), where a replica's sequences are known
    if (m.seqsPerReplica !== undefined && m.inFlight > fewer * m.seqsPerReplica * s.headroom) continue;
    const load = m.seqsPerReplica === undefined ? '' : `, ${m.inFlight.toFixed(1)} in flight fit ${fewer} × ${m.seqsPerReplica} sequences`;
    const why = [
      ...(slo === undefined ? [] : [`TTFT p99 ${ms(m.ttftP99Ms)} < ${Math.round(s.relaxBelow * 100)} % of its SLO ${ms(slo)}`]),
      ...(slo === undefined && tpot !== undefined ? [`TPOT p99 ${ms(m.tpotP99Ms)} < ${Math.round(s.relaxBelow * 100)} % of its SLO ${ms(tpot)}`] : []),
      ...(signalOk === true ? [`its scale signal fits ${fewer} replica(s) at ${Math.round(s.relaxBelow * 100)} %`] : []),
    ];
    change(m, fewer, 'scale_down', `${why.join(', ')}${load}: one replica back`);
  }

  /**
   * `n` more replicas for `m`: free GPUs, then preemption; returns how many it got. Preemptions that
   * do not add up to a whole replica (a 2-GPU replica, one 1-GPU victim) are undone: no victim pays
   * for a replica that is not started, and nobody else takes what it would have freed.
   */
  const acquire = (m: ModelLoad, n: number, reason: string): number => {
    let got = 0;
    let sinceLast = decisions.length;
    while (got < n) {
      if (free >= m.gpusPerReplica) {
        free -= m.gpusPerReplica;
        got++;
        sinceLast = decisions.length;
        continue;
      }
      if (!preemptOne(m)) {
        undo(sinceLast);
        break;
      }
    }
    if (got > 0) {
      const from = get(m);
      target.set(m.model, from + got);
      raised.add(m.model);
      decisions.push({ model: m.model, action: 'scale_up', from, to: from + got, reason });
    }
    return got;
  };

  /** Take back the decisions from index `from` on (preemptions that freed too little). */
  const undo = (from: number) => {
    for (const d of decisions.splice(from).reverse()) {
      const v = models.find((x) => x.model === d.model) as ModelLoad;
      free -= (d.from - d.to) * v.gpusPerReplica;
      target.set(d.model, d.from);
      if (!decisions.some((x) => x.model === d.model)) lowered.delete(d.model);
    }
  };

  /** Free one victim replica for `m`: strictly lower priority, lowest first, then least traffic; above min first. */
  const preemptOne = (m: ModelLoad): boolean => {
    const lower = byPriority
      .filter((v) => RANK[v.priority] > RANK[m.priority] && v.frozen === undefined && get(v) > 0)
      .sort((a, b) => RANK[b.priority] - RANK[a.priority] || a.rps - b.rps || a.model.localeCompare(b.model));
    const victim = lower.find((v) => get(v) > v.minReplicas) ?? (m.priority === 'critical' ? lower[0] : undefined);
    if (victim === undefined) return false;
    const to = get(victim) - 1;
    const belowMin = to < victim.minReplicas;
    change(
      victim,
      to,
      'preempt',
      `one replica to ${m.model} (${m.priority} over ${victim.priority})${belowMin ? `: below its min of ${victim.minReplicas}` : ''}`,
      {
        for: m.model,
        belowMin: belowMin || undefined,
      },
    );
    return true;
  };

  // 2. every model its min
  for (const m of byPriority) {
    if (m.frozen !== undefined || get(m) >= m.minReplicas) continue;
    const need = m.minReplicas - get(m);
    const got = acquire(m, need, `below its min of ${m.minReplicas}`);
    if (got < need) short.push({ model: m.model, wanted: m.minReplicas, got: get(m), reason: 'no free GPU and nothing of a lower priority to take' });
  }

  // 3. SLO violations, by priority
  for (const m of byPriority) {
    if (m.frozen !== undefined) continue;
    const w = wantedFor(m, s);
    if (w === undefined || w.want <= get(m)) continue;
    // its p99 still holds the time before the replicas it is waiting for: asking again would overshoot
    if (m.starting > 0) {
      short.push({ model: m.model, wanted: w.want, got: get(m), reason: `${m.starting} replica(s) still starting` });
      continue;
    }
    const need = w.want - get(m);
    const got = acquire(m, need, w.why);
    if (got < need) short.push({ model: m.model, wanted: w.want, got: get(m), reason: 'no free GPU and nothing of a lower priority to take' });
  }

  // 4. what is left to batch models with traffic
  for (const m of byPriority) {
    if (m.priority !== 'batch' || m.frozen !== undefined || m.rps <= 0 || raised.has(m.model) || lowered.has(m.model)) continue;
    const room = Math.min(m.maxReplicas - get(m), Math.floor(free / m.gpusPerReplica));
    if (room > 0) acquire(m, room, `batch: ${room} free replica slot(s) left over`);
  }

  const byName = new Map(models.map((x) => [x.model, x]));
  for (const d of decisions) d.effect = effectOf(byName.get(d.model) as ModelLoad, d.from, d.to);
  // scale-downs and preemptions first: their GPUs are what the scale-ups start on
  const order = (d: Decision) => (d.action === 'scale_up' ? 1 : 0);
  decisions.sort((a, b) => order(a) - order(b));
  return { targets: target, decisions, free, short };
}
