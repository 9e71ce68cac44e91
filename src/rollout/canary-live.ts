// A running canary's in-memory side beside its persisted state: the samples it is judged on (this
// process's records, or every replica's read from a remote source), its judge settings, and what the
// operator view shows of them.
import { NO_READING, packReading } from '../analysis/binned.js';
import type { CanarySettings } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { CanaryState } from './canary-state.js';
import type { ControllerPorts } from './ports.js';
import { PairSamples } from './samples.js';
import type { VersionSamples } from './samples.js';
import { stagedLive } from './staged.js';
import type { StagedLive } from './staged.js';

export interface Live extends StagedLive<CanaryState> {
  /** Set when one of the canary's workers turned unhealthy: a critical failure, rolled back at the next tick. */
  unhealthy: string | undefined;
  /** Epoch ms the samples start from: a remote source (Prometheus) reads its window from here. */
  since: number;
  /** The remote source's failure since the look it began (undefined: it answers); said once each way. */
  sourceDown: string | undefined;
  /** Requests of each version the last remote read counted (what the judge saw, every replica's). */
  remoteCounts?: { stable: number; canary: number } | undefined;
}

/** What the operator view shows of the samples a running canary is judged on. */
export interface CanarySampleCounts {
  stable: number;
  canary: number;
  min_samples: number;
}

/** A canary's live side, as it starts or resumes (its samples begin now). */
export function newLive(ports: ControllerPorts, state: CanaryState, revision: number): Live {
  const m = ports.models.config(state.model);
  const l: Live = {
    ...stagedLive(state, revision, canarySamples(state, m.canary), m.canary),
    unhealthy: undefined,
    since: ports.clock.now(),
    sourceDown: undefined,
  };
  const remote = ports.telemetry.remote;
  if (remote !== undefined) {
    // every replica's traffic, as Prometheus scraped it; the quality scores stay this process's (the LLM judge's)
    l.remote = async (now) => {
      const s = l.state;
      const r = await remote.read(s.model, [s.stable, s.canary], l.since, now);
      l.remoteCounts = { stable: r.get(s.stable)?.requests ?? 0, canary: r.get(s.canary)?.requests ?? 0 };
      const cap = DEFAULTS.rollout.maxSamplesPerVersion;
      const q = (v: VersionSamples) => (v.quality.length > 0 ? v.quality.copy() : undefined);
      return { a: packReading(r.get(s.stable) ?? NO_READING, cap, q(l.samples.a)), b: packReading(r.get(s.canary) ?? NO_READING, cap, q(l.samples.b)) };
    };
  }
  return l;
}

/** The samples the canary is judged on, as the operator view shows them: with a remote source, its last read's. */
export function sampleCountsOf(l: Live): CanarySampleCounts {
  const n = l.remote !== undefined ? (l.remoteCounts ?? { stable: 0, canary: 0 }) : { stable: l.samples.a.requests, canary: l.samples.b.requests };
  return { ...n, min_samples: l.judge.latency.minSamples };
}

/** The stable and canary samples one canary is judged on; the canary's first requests are left out. */
export function canarySamples(s: CanaryState, settings: CanarySettings | undefined): PairSamples {
  return new PairSamples(
    s.model,
    s.stable,
    s.canary,
    DEFAULTS.rollout.maxSamplesPerVersion,
    settings?.ignoreFirstRequests ?? DEFAULTS.rollout.canaryIgnoreFirstRequests,
  );
}
