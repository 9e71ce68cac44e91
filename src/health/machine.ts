// One worker's health as a pure state machine: HEALTHY → SUSPICIOUS → UNHEALTHY → DRAINING → DEAD,
// a circuit breaker (closed / open / half-open) inside it, and the routing weight each state implies.
//
// Pure: every function takes the state, an observation and `now`, and returns the next state; the
// health controller (controller.ts) feeds it probes and traffic outcomes and carries out what a
// change means (route weight, drain, replacement). The state is plain JSON so it is persisted as is
// and comes back after a kill -9.
//
// Failures come in three severities (docs/health.md, "Classification"):
// - critical — the answers are wrong (token_mismatch, logprob_drift): silent corruption. Nothing is
//   gained by more traffic or by waiting: the worker is drained at once and replaced, never recovered.
// - hard — the worker fails to answer (timeout, error, 5xx, reset, stall). A failed probe makes it
//   SUSPICIOUS (half weight); `failureThreshold` failed probes before it is HEALTHY again (a flapping
//   worker gets there) open the breaker (UNHEALTHY, weight 0). Real traffic's failures open it when
//   `failureThreshold` come in a row (a success ends the run) or at a failure rate over the last
//   requests — one failed request alone changes nothing (a 5xx now and then is no verdict on a
//   worker). After the recovery timeout, half-open probes, then a trickle of real traffic, close it
//   again; `deadAfterFailedRecoveries` failed recoveries give it up.
// - soft — it answers right but slowly (latency_spike, ttft_outlier): SUSPICIOUS, weight halved,
//   never unhealthy by latency alone (a throttled GPU still serves).

import { DEFAULTS } from '../defaults.js';

export type WorkerHealthState = 'pending' | 'healthy' | 'suspicious' | 'unhealthy' | 'draining' | 'dead';
export type BreakerState = 'closed' | 'open' | 'half_open';
export type Severity = 'critical' | 'hard' | 'soft';

/** Why a probe failed (the metric's `reason` label). */
export type ProbeFailureReason = 'token_mismatch' | 'logprob_drift' | 'latency_spike' | 'timeout' | 'error';
/** Why real traffic counted against a worker. */
export type PassiveFailureReason = 'error' | 'reset' | 'stall' | 'timeout' | 'ttft_outlier';
export type FailureReason = ProbeFailureReason | PassiveFailureReason | 'exited';

export const SEVERITY: Readonly<Record<FailureReason, Severity>> = {
  token_mismatch: 'critical',
  logprob_drift: 'critical',
  latency_spike: 'soft',
  ttft_outlier: 'soft',
  timeout: 'hard',
  error: 'hard',
  reset: 'hard',
  stall: 'hard',
  exited: 'hard',
};

/** The numbers the machine runs on (src/defaults.ts `health`, overridable per model). */
export interface MachineSettings {
  failureThreshold: number;
  healthyAfter: number;
  recoveryTimeoutMs: number;
  recoveryTimeoutMaxMs: number;
  halfOpenProbes: number;
  halfOpenRequests: number;
  deadAfterFailedRecoveries: number;
  baselineAlpha: number;
}

export interface LastFailure {
  reason: FailureReason;
  detail: string;
  at: number;
  /** 'probe' or 'traffic'. */
  source: 'probe' | 'traffic' | 'process';
}

/** One worker's health: persisted as is (JSON). */
export interface WorkerHealth {
  state: WorkerHealthState;
  breaker: BreakerState;
  /** When `state` was entered. */
  since: number;
  /** Failed probes since it was last HEALTHY. */
  failures: number;
  /** Failed requests in a row (a successful one resets it). */
  trafficFailures: number;
  /** Passing probes in a row. */
  passes: number;
  /** Open: when half-open probes may start. */
  openUntil: number | null;
  /** Recoveries tried and failed since the breaker last closed. */
  failedRecoveries: number;
  /** Half-open: probes passed in a row (again from 0 in the trial); real requests still to succeed in the trial. */
  halfOpenPasses: number;
  trialLeft: number;
  /** EMA of passing probes' latency, ms (null until the first). */
  baselineMs: number | null;
  /** Set by a critical failure: never recovered, only replaced. */
  corrupt: boolean;
  lastFailure: LastFailure | null;
}

export function newHealth(state: 'pending' | 'healthy', now: number): WorkerHealth {
  return {
    state,
    breaker: 'closed',
    since: now,
    failures: 0,
    trafficFailures: 0,
    passes: 0,
    openUntil: null,
    failedRecoveries: 0,
    halfOpenPasses: 0,
    trialLeft: 0,
    baselineMs: null,
    corrupt: false,
    lastFailure: null,
  };
}

/** What the machine was told. */
export type Observation =
  | { kind: 'probe_pass'; latencyMs: number }
  | { kind: 'probe_fail'; reason: ProbeFailureReason; detail: string }
  /** A request served by the worker succeeded / failed (passive signals; 4xx and cancellations never come here). */
  | { kind: 'traffic_ok' }
  /** `rateTripped`: the worker's recent requests fail at or above the configured rate (the controller keeps that window). */
  | { kind: 'traffic_fail'; reason: PassiveFailureReason; detail: string; rateTripped: boolean }
  /** The process is gone (the provider saw it exit). */
  | { kind: 'exited'; detail: string }
  /** A draining worker has nothing in flight any more (or its drain timed out). */
  | { kind: 'drained' }
  /** Time passed: an open breaker may turn half-open. */
  | { kind: 'tick' };

/** Pending workers need this many passing probes in a row to be admitted (every prompt of the set once). */
export interface StepContext {
  now: number;
  settings: MachineSettings;
  /** Passing probes a pending worker needs (the probe set's size). */
  admitAfter: number;
}

/** Routing weight of a worker in this health: what the data plane's picker uses. */
export function routingWeight(h: WorkerHealth, trialWeight: number): number {
  switch (h.state) {
    case 'healthy':
      return 1;
    case 'suspicious':
      return DEFAULTS.health.suspiciousWeight;
    case 'unhealthy':
      return isTrial(h) ? trialWeight : 0;
    default:
      return 0;
  }
}

/** Half-open and past its probes: a trickle of real requests is being tried. */
export function isTrial(h: WorkerHealth): boolean {
  return h.breaker === 'half_open' && h.trialLeft > 0;
}

const done = (h: WorkerHealth) => h.state === 'draining' || h.state === 'dead';

function enter(h: WorkerHealth, state: WorkerHealthState, now: number, patch: Partial<WorkerHealth> = {}): WorkerHealth {
  return { ...h, ...patch, state, since: state === h.state ? h.since : now };
}

function openBreaker(h: WorkerHealth, c: StepContext, failure: LastFailure): WorkerHealth {
  const s = c.settings;
  const wait = Math.min(s.recoveryTimeoutMaxMs, s.recoveryTimeoutMs * 2 ** h.failedRecoveries);
  return enter(h, 'unhealthy', c.now, { breaker: 'open', openUntil: c.now + wait, halfOpenPasses: 0, trialLeft: 0, passes: 0, lastFailure: failure });
}

function giveUp(h: WorkerHealth, c: StepContext, failure: LastFailure, corrupt: boolean): WorkerHealth {
  return enter(h, h.state === 'pending' ? 'dead' : 'draining', c.now, {
    breaker: 'open',
    openUntil: null,
    trialLeft: 0,
    halfOpenPasses: 0,
    passes: 0,
    corrupt: h.corrupt || corrupt,
    lastFailure: failure,
  });
}

function close(h: WorkerHealth, c: StepContext): WorkerHealth {
  return enter(h, 'healthy', c.now, {
    breaker: 'closed',
    openUntil: null,
    failures: 0,
    trafficFailures: 0,
    failedRecoveries: 0,
    halfOpenPasses: 0,
    trialLeft: 0,
  });
}

/** A failed recovery (half-open probe or trial request): open again with a longer wait, or give up. */
function recoveryFailed(h: WorkerHealth, c: StepContext, failure: LastFailure): WorkerHealth {
  const failed = { ...h, failedRecoveries: h.failedRecoveries + 1 };
  if (failed.failedRecoveries >= c.settings.deadAfterFailedRecoveries) return giveUp(failed, c, failure, false);
  return openBreaker(failed, c, failure);
}

function failure(h: WorkerHealth, c: StepContext, f: LastFailure, rateTripped: boolean): WorkerHealth {
  const sev = SEVERITY[f.reason];
  if (sev === 'critical') return giveUp(h, c, f, true);
  if (h.state === 'unhealthy') {
    // open: a late traffic failure from before it opened changes nothing; half-open: the recovery failed
    if (h.breaker === 'half_open' && sev === 'hard') return recoveryFailed(h, c, f);
    if (h.breaker === 'half_open') return { ...h, halfOpenPasses: 0, lastFailure: f };
    return h;
  }
  if (sev === 'soft') {
    if (h.state === 'pending') return { ...h, passes: 0, lastFailure: f };
    return enter(h, 'suspicious', c.now, { passes: 0, lastFailure: f });
  }
  if (f.source === 'traffic') {
    const trafficFailures = h.trafficFailures + 1;
    if (trafficFailures >= c.settings.failureThreshold || rateTripped) return openBreaker({ ...h, trafficFailures }, c, f);
    return { ...h, trafficFailures };
  }
  const failures = h.failures + 1;
  if (h.state === 'pending') {
    // a replacement that cannot pass its admission probes is not worth a breaker: replace it again
    return failures >= c.settings.failureThreshold ? giveUp({ ...h, failures }, c, f, false) : { ...h, failures, passes: 0, lastFailure: f };
  }
  if (failures >= c.settings.failureThreshold) return openBreaker({ ...h, failures }, c, f);
  return enter(h, 'suspicious', c.now, { failures, passes: 0, lastFailure: f });
}

/** The next health after an observation. Never throws; an observation that means nothing in a state leaves it as it is. */
export function step(h: WorkerHealth, o: Observation, c: StepContext): WorkerHealth {
  if (done(h)) {
    if (o.kind === 'drained' && h.state === 'draining') return enter(h, 'dead', c.now);
    if (o.kind === 'exited' && h.state === 'draining')
      return enter(h, 'dead', c.now, { lastFailure: { reason: 'exited', detail: o.detail, at: c.now, source: 'process' } });
    return h;
  }
  const s = c.settings;
  switch (o.kind) {
    case 'tick':
      if (h.state === 'unhealthy' && h.breaker === 'open' && h.openUntil !== null && c.now >= h.openUntil) {
        return { ...h, breaker: 'half_open', openUntil: null, halfOpenPasses: 0, trialLeft: 0 };
      }
      return h;
    case 'exited':
      return enter(h, 'dead', c.now, {
        breaker: 'open',
        openUntil: null,
        trialLeft: 0,
        lastFailure: { reason: 'exited', detail: o.detail, at: c.now, source: 'process' },
      });
    case 'drained':
      return h;
    case 'probe_fail':
      return failure(h, c, { reason: o.reason, detail: o.detail, at: c.now, source: 'probe' }, false);
    case 'traffic_fail':
      return failure(h, c, { reason: o.reason, detail: o.detail, at: c.now, source: 'traffic' }, o.rateTripped);
    case 'traffic_ok': {
      if (isTrial(h)) {
        const trialLeft = h.trialLeft - 1;
        return trialLeft <= 0 ? close(h, c) : { ...h, trialLeft };
      }
      // a success ends a run of failed requests (the rate window, kept by the controller, remembers both)
      return h.trafficFailures !== 0 ? { ...h, trafficFailures: 0 } : h;
    }
    case 'probe_pass': {
      const baselineMs = h.state === 'healthy' || h.state === 'pending' ? ema(h.baselineMs, o.latencyMs, s.baselineAlpha) : h.baselineMs;
      switch (h.state) {
        case 'pending': {
          const passes = h.passes + 1;
          return passes >= c.admitAfter ? enter(h, 'healthy', c.now, { passes, failures: 0, baselineMs }) : { ...h, passes, baselineMs };
        }
        case 'healthy':
          return { ...h, passes: h.passes + 1, failures: 0, baselineMs };
        case 'suspicious': {
          const passes = h.passes + 1;
          if (passes >= s.healthyAfter) return enter(h, 'healthy', c.now, { passes, failures: 0, trafficFailures: 0 });
          return { ...h, passes };
        }
        case 'unhealthy': {
          if (h.breaker !== 'half_open') return h;
          const halfOpenPasses = h.halfOpenPasses + 1;
          if (halfOpenPasses < s.halfOpenProbes) return { ...h, halfOpenPasses };
          // in the trial, as many passing probes again with no failed request close it: a model with no
          // traffic must not keep a recovered worker out for ever
          if (isTrial(h) || s.halfOpenRequests <= 0) return close(h, c);
          // probes passed: now a trickle of real traffic, counted down by successes
          return { ...h, halfOpenPasses: 0, trialLeft: s.halfOpenRequests };
        }
        default:
          return h;
      }
    }
  }
}

function ema(prev: number | null, x: number, alpha: number): number {
  return prev === null ? x : alpha * x + (1 - alpha) * prev;
}

/**
 * The ejection cap (DEFAULTS.health.maxEjectedShare): the worker would have been taken out of
 * rotation, but too much of its version already is. It stays in at suspicious weight with the failure
 * recorded, its breaker closed; the next probes decide again.
 */
export function heldIn(prev: WorkerHealth, next: WorkerHealth, now: number): WorkerHealth {
  return {
    ...prev,
    state: 'suspicious',
    breaker: 'closed',
    since: prev.state === 'suspicious' ? prev.since : now,
    failures: next.failures,
    trafficFailures: 0,
    passes: 0,
    openUntil: null,
    trialLeft: 0,
    lastFailure: next.lastFailure,
  };
}

/** The seed's numeric encoding for the gauge (0 healthy … 4 dead; -1 pending: not judged yet). */
export const STATE_VALUE: Readonly<Record<WorkerHealthState, number>> = {
  pending: -1,
  healthy: 0,
  suspicious: 1,
  unhealthy: 2,
  draining: 3,
  dead: 4,
};

export const BREAKER_VALUE: Readonly<Record<BreakerState, number>> = { closed: 0, open: 1, half_open: 2 };
