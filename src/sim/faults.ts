// Fault injection: the active fault set and the per-request decision (deterministic by request number).
import { DEFAULTS } from '../defaults.js';
import type { FaultKind } from './metrics.js';
import type { SimFaultSpec } from './options.js';
import { fmix32, unit } from './tokenizer.js';

/** What a new inference request meets. */
export type FaultDecision =
  | { kind: 'process_exit' }
  | { kind: 'hang' }
  | { kind: 'error'; status: number }
  | {
      kind: 'serve';
      crashAfterTokens: number | undefined;
      stallAfterTokens?: number | undefined;
      garbageAfterTokens?: number | undefined;
      latencyMultiplier: number;
      corrupt: boolean;
      logprobDrift: number;
    };

export class FaultState {
  private spec: SimFaultSpec;
  private n = 0;
  readonly counts: Record<FaultKind, number> = {
    error: 0,
    crash: 0,
    stall: 0,
    garbage: 0,
    hang: 0,
    latency: 0,
    corrupt: 0,
    drift: 0,
    flap: 0,
    process_exit: 0,
  };

  constructor(
    initial: SimFaultSpec,
    private readonly seed: number,
    private readonly onFault: (kind: FaultKind) => void,
  ) {
    this.spec = { ...initial };
  }

  get current(): SimFaultSpec {
    return { ...this.spec };
  }

  set(spec: SimFaultSpec): void {
    this.spec = { ...spec };
  }

  clear(): void {
    this.spec = {};
  }

  count(kind: FaultKind): void {
    this.counts[kind]++;
    this.onFault(kind);
  }

  /**
   * Decide the fate of the next inference request. Order: process exit, hang, a flapping worker's
   * bad period, error (drawn with probability error_rate from a hash of (seed, request number)),
   * then serve with the crash/latency/corruption faults applied.
   */
  decide(now: number = Date.now()): FaultDecision {
    const f = this.spec;
    const n = this.n++;
    if (f.processExit) {
      this.count('process_exit');
      return { kind: 'process_exit' };
    }
    if (f.hang) {
      this.count('hang');
      return { kind: 'hang' };
    }
    if (f.flapMs !== undefined && Math.floor(now / f.flapMs) % 2 === 1) {
      this.count('flap');
      return { kind: 'error', status: f.errorStatus ?? DEFAULTS.sim.faultErrorStatus };
    }
    if (f.errorRate !== undefined && f.errorRate > 0 && unit(fmix32((this.seed ^ 0xe7707) + Math.imul(n, 0x9e3779b1))) < f.errorRate) {
      this.count('error');
      return { kind: 'error', status: f.errorStatus ?? DEFAULTS.sim.faultErrorStatus };
    }
    const latencyMultiplier = f.latencyMultiplier ?? 1;
    if (latencyMultiplier !== 1) this.count('latency');
    const corrupt = f.corrupt ?? false;
    if (corrupt) this.count('corrupt');
    const logprobDrift = f.logprobDrift ?? 0;
    if (logprobDrift > 0) this.count('drift');
    const d: FaultDecision = { kind: 'serve', crashAfterTokens: f.crashAfterTokens, latencyMultiplier, corrupt, logprobDrift };
    if (f.stallAfterTokens !== undefined) d.stallAfterTokens = f.stallAfterTokens;
    if (f.garbageAfterTokens !== undefined) d.garbageAfterTokens = f.garbageAfterTokens;
    return d;
  }
}
