// A canary look's input in transferable form, and the judge as an asynchronous function of it: the
// controller packs its cumulative samples into Float64Arrays (one memcpy each) and awaits a verdict,
// computed in this thread (`judgeInProcess`, for tests and fallbacks) or in a worker thread
// (src/control/judge-thread.ts), so that a look over full windows never stalls the gateway's loop.
import { judgeCanary } from './judge.js';
import type { JudgeConfig, LookInfo, MetricSamples, Verdict } from './judge-types.js';

/** MetricSamples with the series as Float64Arrays: structured-clone and transfer without a per-element copy. */
export interface PackedSamples {
  ttftMs: Float64Array;
  tpotMs: Float64Array;
  latencyMs: Float64Array;
  quality: Float64Array | undefined;
  requests: number;
  errors: number;
  durationS: number;
  outputTokens: number;
}

/** One look: both versions' samples, the configuration, and the look (index, previous p-values). */
export type JudgeFn = (stable: PackedSamples, canary: PackedSamples, cfg: JudgeConfig, look: LookInfo) => Promise<Verdict>;

export function unpack(p: PackedSamples): MetricSamples {
  return {
    ttftMs: Array.from(p.ttftMs),
    tpotMs: Array.from(p.tpotMs),
    latencyMs: Array.from(p.latencyMs),
    quality: p.quality ? Array.from(p.quality) : undefined,
    requests: p.requests,
    errors: p.errors,
    durationS: p.durationS,
    outputTokens: p.outputTokens,
  };
}

/** The judge on this thread: the same verdict as in a worker, number for number. */
export const judgeInProcess: JudgeFn = (stable, canary, cfg, look) =>
  new Promise<Verdict>((resolve) => resolve(judgeCanary(unpack(stable), unpack(canary), cfg, look)));
