// Whose turn it is on a group of time-shared GPUs (docs/multi-model.md#temporal-sharing): the
// awake model keeps them while nobody else waits; a sleeping model whose requests wait gets them
// when the awake one is idle or of a lower priority, or — between equals — when the awake one has
// had its turn or the waiting requests would otherwise run out of time. A model of a higher
// priority is interrupted only when idle. Pure: the controller (time-share.ts) measures and acts.
import type { Priority } from '../config/types.js';

const RANK: Record<Priority, number> = { critical: 0, high: 1, standard: 2, batch: 3 };

export interface AwakeModel {
  model: string;
  priority: Priority;
  /** When it got the GPUs. */
  since: number;
  /** Its requests in flight on its workers. */
  inflight: number;
  /** When it last had a request (arrived or finished). */
  lastActivityAt: number;
  /** A rollout of it is in progress (the id): its turn does not end meanwhile. */
  rollout?: string | undefined;
}

export interface WaitingModel {
  model: string;
  priority: Priority;
  /** Requests held for it now. */
  held: number;
  /** When its oldest held request arrived. */
  heldSince: number;
}

export interface TurnSettings {
  minActiveMs: number;
  idleMs: number;
  maxWaitMs: number;
  /** What a switch is expected to take (the last one measured; before any, the estimate from the models' sizes). */
  switchMs: number;
}

export type Turn =
  | { kind: 'stay'; why: string }
  /** Switch now. */
  | { kind: 'switch'; to: string; why: string }
  /** Nothing now; look again at `at` (sooner if a request ends or arrives). */
  | { kind: 'wait'; at: number; to: string; why: string };

/** The model whose requests wait that goes next: the highest priority, then the longest waiting. */
export function nextInLine(waiting: readonly WaitingModel[]): WaitingModel | undefined {
  return [...waiting]
    .filter((w) => w.held > 0)
    .sort((a, b) => RANK[a.priority] - RANK[b.priority] || a.heldSince - b.heldSince || a.model.localeCompare(b.model))[0];
}

export function decideTurn(now: number, awake: AwakeModel | undefined, waiting: readonly WaitingModel[], s: TurnSettings): Turn {
  const next = nextInLine(waiting);
  if (next === undefined) return { kind: 'stay', why: 'no request waits for a sleeping model' };
  const waited = now - next.heldSince;
  if (awake === undefined) return { kind: 'switch', to: next.model, why: `nothing is awake; ${next.held} request(s) of ${next.model} wait` };
  if (awake.rollout !== undefined)
    return { kind: 'stay', why: `a rollout of ${awake.model} is in progress (${awake.rollout}): its turn lasts until it ends; ${next.model} waits` };
  const idleFor = now - awake.lastActivityAt;
  if (awake.inflight === 0 && idleFor >= s.idleMs)
    return { kind: 'switch', to: next.model, why: `${awake.model} has been idle ${Math.round(idleFor)} ms; ${next.held} request(s) of ${next.model} wait` };
  if (RANK[next.priority] < RANK[awake.priority])
    return { kind: 'switch', to: next.model, why: `${next.model} (${next.priority}) outranks ${awake.model} (${awake.priority})` };
  const idleAt = awake.inflight === 0 ? awake.lastActivityAt + s.idleMs : Number.POSITIVE_INFINITY;
  if (RANK[awake.priority] < RANK[next.priority])
    return {
      kind: 'wait',
      at: idleAt,
      to: next.model,
      why: `${awake.model} (${awake.priority}) outranks ${next.model} (${next.priority}): ${next.model} waits until ${awake.model} is idle ${s.idleMs} ms`,
    };
  const turn = now - awake.since;
  if (turn >= s.minActiveMs)
    return {
      kind: 'switch',
      to: next.model,
      why: `${awake.model} has had its turn (${Math.round(turn)} ms ≥ ${s.minActiveMs}); ${next.model}'s oldest request has waited ${Math.round(waited)} ms`,
    };
  // the waiting requests must be served before they time out: the switch starts while there is time for it
  const deadline = next.heldSince + s.maxWaitMs - s.switchMs;
  if (now >= deadline)
    return {
      kind: 'switch',
      to: next.model,
      why: `${next.model}'s oldest request would wait past max_wait (${s.maxWaitMs} ms) with a switch of ~${Math.round(s.switchMs)} ms`,
    };
  const at = Math.min(awake.since + s.minActiveMs, deadline, idleAt);
  return { kind: 'wait', at, to: next.model, why: `${awake.model}'s turn runs until ${new Date(at).toISOString()} unless it goes idle; ${next.model} waits` };
}
