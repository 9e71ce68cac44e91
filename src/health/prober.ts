// Probing through the ports: one probe of one worker (with its retries, classified into the state
// machine's observation), and recording a version's probe set from its workers.
import type { HealthConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { ProbeExpectation, ProbePrompt, ProbeSet } from '../domain/probes.js';
import type { ControllerPorts, WorkerInfo } from '../rollout/ports.js';
import type { Observation, WorkerHealth } from './machine.js';
import { checkAnswer, parseAnswer, probeBody, recordProbeSet } from './probe-set.js';
import type { ProbeAnswer, Recorded } from './probe-set.js';

/** What a probe is for: the `check` label of the probe histogram. */
export type ProbeCheck = 'routine' | 'half_open' | 'admission' | 'record';

/** One try: the answer read, or why there is none (`inconclusive`: the worker was saturated, nothing is known). */
type Try = { ok: true; answer: ProbeAnswer; ms: number } | { ok: false; reason: 'timeout' | 'error' | 'inconclusive'; detail: string; ms: number };

async function tryOnce(ports: ControllerPorts, w: WorkerInfo, p: ProbePrompt, cfg: HealthConfig, check: ProbeCheck): Promise<Try> {
  const o = await ports.workers.probe(w, probeBody(w.model, p), cfg.timeoutMs);
  ports.telemetry.health.probe(w.model, w.version, check, o.ms / 1000);
  if (o.kind === 'inconclusive') return { ok: false, reason: 'inconclusive', detail: o.message, ms: o.ms };
  if (o.kind === 'failed') return { ok: false, reason: o.timeout ? 'timeout' : 'error', detail: o.message, ms: o.ms };
  if (o.status !== 200) return { ok: false, reason: 'error', detail: `answered ${o.status}: ${o.body.slice(0, 120)}`, ms: o.ms };
  const a = parseAnswer(o.body);
  if (typeof a === 'string') return { ok: false, reason: 'error', detail: a, ms: o.ms };
  return { ok: true, answer: a, ms: o.ms };
}

/** A probe's verdict (undefined: inconclusive, nothing to tell the state machine) and its latency against the worker's baseline. */
export interface ProbeResult {
  obs: Observation | undefined;
  ratio: number | undefined;
}

/**
 * Probe a worker with one expectation: up to 1 + `retries` tries, the first pass wins (a transient
 * timeout, a near-tie on a busy engine or a GC pause must not count). Checks in order: answered at
 * all, tokens, logprobs, latency within `latencyFactor` × the worker's baseline — unless `poolRatio`
 * (the median latency ratio of the version's other workers) says the whole pool is that slow: load,
 * not this worker. `relax` multiplies the worker's own limit (a degraded model's latency gates), never
 * the pool's test. Tries the saturated worker could not take are inconclusive; all inconclusive, no
 * observation.
 */
export async function probeWorker(
  ports: ControllerPorts,
  w: WorkerInfo,
  e: ProbeExpectation,
  h: WorkerHealth,
  cfg: HealthConfig,
  check: ProbeCheck,
  poolRatio: number,
  relax = 1,
): Promise<ProbeResult> {
  let last: Extract<Observation, { kind: 'probe_fail' }> | undefined;
  let ratio: number | undefined;
  for (let i = 0; i <= cfg.retries; i++) {
    const t = await tryOnce(ports, w, e, cfg, check);
    if (!t.ok) {
      if (t.reason !== 'inconclusive') last = { kind: 'probe_fail', reason: t.reason, detail: `probe ${JSON.stringify(e.prompt)}: ${t.detail}` };
      continue;
    }
    const c = checkAnswer(e, t.answer);
    if (!c.ok) {
      last = { kind: 'probe_fail', reason: c.reason, detail: `probe ${JSON.stringify(e.prompt)}: ${c.detail}` };
      continue;
    }
    const base = h.baselineMs;
    ratio = base !== null && base > 0 ? t.ms / base : undefined;
    const limit = cfg.latencyFactor * relax;
    if (base !== null && t.ms > base * limit && t.ms - base > cfg.latencyFloorMs && !(poolRatio >= cfg.latencyFactor)) {
      last = {
        kind: 'probe_fail',
        reason: 'latency_spike',
        detail: `probe took ${t.ms.toFixed(0)} ms, ${(t.ms / base).toFixed(1)}× its baseline of ${base.toFixed(0)} ms (limit ${limit}×)`,
      };
      continue;
    }
    ports.telemetry.health.probeDone(w.model, w.version, check, 'pass');
    return { obs: { kind: 'probe_pass', latencyMs: t.ms }, ratio };
  }
  if (last === undefined) {
    ports.telemetry.health.probeDone(w.model, w.version, check, 'inconclusive');
    return { obs: undefined, ratio };
  }
  ports.telemetry.health.probeDone(w.model, w.version, check, 'fail');
  ports.telemetry.health.probeFailure(w.model, w.version, last.reason);
  return { obs: last, ratio };
}

/**
 * Record a version's probe set from `workers`: every prompt to every worker (retried like a probe),
 * then `recordProbeSet` (majority, or the reference). Also returns each agreeing worker's mean
 * latency, its first baseline.
 */
export async function recordFrom(
  ports: ControllerPorts,
  workers: readonly WorkerInfo[],
  cfg: HealthConfig,
  reference: readonly { prompt: string; tokens: string[] }[] | undefined,
): Promise<Recorded & { latencyMs: Map<string, number> }> {
  const answers = new Map<string, (ProbeAnswer | string)[]>();
  const latency = new Map<string, number>();
  await Promise.all(
    workers.map(async (w) => {
      const got: (ProbeAnswer | string)[] = [];
      let total = 0;
      for (const p of cfg.probes) {
        let t: Try | undefined;
        for (let i = 0; i <= cfg.retries && !t?.ok; i++) t = await tryOnce(ports, w, p, cfg, 'record');
        const r = t as Try;
        got.push(r.ok ? r.answer : `${r.reason}: ${r.detail}`);
        total += r.ms;
      }
      answers.set(w.id, got);
      latency.set(w.id, total / cfg.probes.length);
    }),
  );
  const recorded = recordProbeSet({
    prompts: cfg.probes,
    answers,
    reference,
    settings: { minMargin: cfg.minMargin, minTokens: DEFAULTS.health.minTokens, logprobTolerance: cfg.logprobTolerance },
    now: ports.clock.now(),
  });
  return { ...recorded, latencyMs: latency };
}

/** The prompt a worker is probed with next: they take turns, so every prompt is checked in one round. */
export function nextExpectation(set: ProbeSet, turn: number): ProbeExpectation {
  return set.probes[turn % set.probes.length] as ProbeExpectation;
}
