// What the staged rollouts judged by the sequential canary judge share, whatever they move (a
// version's route weights, an adapter's share of its requests): the live record each controller
// keeps, one look of the judge recorded in the state with the step it decides, and a tick over the
// running ones, each under its lock.
import { judgeInProcess } from '../analysis/judge-packed.js';
import type { JudgeFn, PackedSamples } from '../analysis/judge-packed.js';
import { judgeConfig, sourceDownVerdict } from '../analysis/judge.js';
import type { JudgeConfig, Verdict } from '../analysis/judge.js';
import { DEFAULTS } from '../defaults.js';
import type { CanarySettings } from '../config/types.js';
import { decide, judgeOverrides, summarizeVerdict } from './canary-state.js';
import type { StagedFields, Step } from './canary-state.js';
import type { ControllerPorts } from './ports.js';
import type { RolloutState } from './rollout-record.js';
import type { PairSamples } from './samples.js';
import { restoreSaved } from './rollout-writes.js';
import type { Saved } from './rollout-writes.js';

/** Both versions' samples of a look read elsewhere than the live record stream (Prometheus); rejects when the source does not answer. */
export type RemoteLook = (now: number) => Promise<{ a: PackedSamples; b: PackedSamples }>;

/** A running staged rollout as its controller keeps it. */
export interface StagedLive<S extends StagedFields & RolloutState> extends Saved<S> {
  samples: PairSamples;
  judge: JudgeConfig;
  busy: boolean;
  /** Sample count at the last look: an unchanged stream is not judged again. */
  seen: number;
  /** Where a look reads both versions instead of `samples` (their quality scores excepted); undefined: `samples`. */
  remote?: RemoteLook | undefined;
}

/** A staged rollout's live record as it starts or resumes: its samples begin now, judged by the model's canary settings. */
export function stagedLive<S extends StagedFields & RolloutState>(
  state: S,
  revision: number,
  samples: PairSamples,
  settings: CanarySettings | undefined,
): StagedLive<S> {
  return {
    state,
    samples,
    judge: judgeConfig(judgeOverrides(settings)),
    revision,
    busy: false,
    seen: -1,
    saving: Promise.resolve(),
    saved: structuredClone(state),
  };
}

/**
 * One look of the judge at the cumulative samples, recorded in the state (the look's index, the
 * always-valid p-values, the verdict: kept when it decides something), and the step it decides;
 * undefined when nothing new came and the stage still holds (the verdict could not change).
 */
export async function takeLook<S extends StagedFields & RolloutState>(
  l: StagedLive<S>,
  now: number,
  judge: JudgeFn | undefined,
): Promise<{ verdict: Verdict; step: Step; sourceError?: Error | undefined } | undefined> {
  const s = l.state;
  const look = { index: s.look, previous: s.previous };
  let verdict: Verdict;
  let sourceError: Error | undefined;
  if (l.remote !== undefined) {
    // the source's counts move without a record here (other replicas' traffic): every tick looks
    let read: { a: PackedSamples; b: PackedSamples } | undefined;
    try {
      read = await l.remote(now);
    } catch (err) {
      sourceError = err as Error;
    }
    verdict = read
      ? await (judge ?? judgeInProcess)(read.a, read.b, l.judge, look)
      : sourceDownVerdict(l.judge, look, `no data: the metric source did not answer (${sourceError?.message ?? 'unknown error'})`);
  } else {
    const seen = l.samples.a.requests + l.samples.b.requests + l.samples.a.quality.length + l.samples.b.quality.length;
    if (seen === l.seen && now - s.stageStartedAt < s.stageDurationMs) return undefined;
    l.seen = seen;
    verdict = await (judge ?? judgeInProcess)(l.samples.a.pack(), l.samples.b.pack(), l.judge, look);
  }
  s.look++;
  s.previous = verdict.sequentialPValues;
  const step = decide(s, verdict, now);
  s.last = summarizeVerdict(verdict, s, now, step.kind !== 'none');
  s.message = step.kind === 'none' ? step.why : undefined;
  if (step.kind !== 'none') {
    s.verdicts.push(s.last);
    if (s.verdicts.length > DEFAULTS.rollout.maxVerdicts) s.verdicts.splice(0, s.verdicts.length - DEFAULTS.rollout.maxVerdicts);
  }
  return { verdict, step, sourceError };
}

const running = (s: StagedFields) => s.phase === 'progressing' || s.phase === 'paused';

/**
 * One reconcile pass: `fn` for each rollout still running and not busy with a previous pass, under
 * the lock `key` names (re-checked there: an abort or a promotion queued ahead may have ended it,
 * `isLive` says whether its controller still tracks it); a failure goes to `onError`.
 */
export async function tickRunning<S extends StagedFields & RolloutState, L extends StagedLive<S>>(
  lives: Iterable<L>,
  ports: Pick<ControllerPorts, 'exclusive'>,
  key: (l: L) => string,
  isLive: (l: L) => boolean,
  fn: (l: L) => Promise<void>,
  onError: (l: L, err: Error) => Promise<void>,
): Promise<void> {
  for (const l of [...lives]) {
    if (l.busy || !running(l.state)) continue;
    l.busy = true;
    try {
      await ports.exclusive(key(l), async () => {
        if (isLive(l) && running(l.state)) await fn(l);
      });
    } catch (err) {
      // a write that failed: act on what the store has, as a restart would, and look again at once
      if (restoreSaved(l)) l.seen = -1;
      await onError(l, err as Error);
    } finally {
      l.busy = false;
    }
  }
}

/** What a staged rollout does on each decided step (its own: a version's route weights, an adapter's share). */
export interface StagedActions<L> {
  /** The stage moved on (index and start already set): traffic follows, said and saved. */
  advanced(l: L, why: string): Promise<void>;
  promote(l: L, why: string): Promise<void>;
  /** Paused for a human (the reason already set). */
  pause(l: L, reason: string): Promise<void>;
  rollback(l: L, reason: string): Promise<void>;
}

/** Carry out a step of the decision rule: the state's stage moves here, the rest is the rollout's own. */
export async function applyStep<S extends StagedFields & RolloutState, L extends StagedLive<S>>(
  l: L,
  step: Step,
  why: string,
  now: number,
  a: StagedActions<L>,
): Promise<void> {
  switch (step.kind) {
    case 'none':
      return;
    case 'advance':
      l.state.stageIndex = step.to;
      l.state.stageStartedAt = now;
      return a.advanced(l, why);
    case 'promote':
      return a.promote(l, why || 'every stage passed');
    case 'pause':
      l.state.pausedReason = step.reason;
      return a.pause(l, step.reason);
    case 'rollback':
      return a.rollback(l, step.reason);
  }
}
