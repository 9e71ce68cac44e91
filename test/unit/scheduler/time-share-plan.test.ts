// Whose turn it is on time-shared GPUs: nobody waits → stay; an idle or outranked awake model gives
// way at once; between equals, the turn (min_active_ms) or the waiting requests' deadline decides;
// an awake model of a higher priority is interrupted only when idle; a rollout holds the turn.
import { describe, expect, it } from 'vitest';
import { decideTurn, nextInLine } from '../../../src/scheduler/time-share-plan.js';
import type { AwakeModel, WaitingModel } from '../../../src/scheduler/time-share-plan.js';

const S = { minActiveMs: 10_000, idleMs: 2_000, maxWaitMs: 30_000, switchMs: 3_000 };
const awake = (o: Partial<AwakeModel> = {}): AwakeModel => ({ model: 'a', priority: 'standard', since: 0, inflight: 1, lastActivityAt: 0, ...o });
const waiting = (o: Partial<WaitingModel> = {}): WaitingModel => ({ model: 'b', priority: 'standard', held: 1, heldSince: 1_000, ...o });

describe('decideTurn', () => {
  it('stays while nobody waits', () => {
    expect(decideTurn(5_000, awake(), [], S)).toMatchObject({ kind: 'stay' });
    expect(decideTurn(5_000, awake(), [waiting({ held: 0 })], S)).toMatchObject({ kind: 'stay' });
  });

  it('switches at once when nothing is awake', () => {
    expect(decideTurn(5_000, undefined, [waiting()], S)).toMatchObject({ kind: 'switch', to: 'b' });
  });

  it('switches from an awake model idle for idle_ms, not from one with requests in flight', () => {
    expect(decideTurn(5_000, awake({ inflight: 0, lastActivityAt: 3_000 }), [waiting()], S)).toMatchObject({ kind: 'switch', to: 'b' });
    expect(decideTurn(5_000, awake({ inflight: 0, lastActivityAt: 3_500 }), [waiting()], S)).toEqual({
      kind: 'wait',
      at: 5_500,
      to: 'b',
      why: expect.stringContaining('turn') as unknown,
    });
    expect(decideTurn(5_000, awake({ inflight: 1, lastActivityAt: 0 }), [waiting()], S)).toMatchObject({ kind: 'wait', at: 10_000 });
  });

  it('between equals: the turn ends after min_active_ms', () => {
    const t = decideTurn(10_000, awake(), [waiting()], S);
    expect(t).toMatchObject({ kind: 'switch', to: 'b' });
    expect(t.why).toContain('has had its turn');
  });

  it('between equals: the waiting requests are served before max_wait, the switch included', () => {
    const s = { ...S, minActiveMs: 29_000 };
    // held since 1 000: a switch of 3 000 must start by 28 000
    expect(decideTurn(27_999, awake(), [waiting()], s)).toMatchObject({ kind: 'wait', at: 28_000 });
    expect(decideTurn(28_000, awake(), [waiting()], s)).toMatchObject({ kind: 'switch', to: 'b', why: expect.stringContaining('max_wait') as unknown });
  });

  it('a waiting model of a higher priority takes the GPUs at once', () => {
    expect(decideTurn(1_000, awake({ priority: 'batch' }), [waiting({ priority: 'high' })], S)).toMatchObject({ kind: 'switch', to: 'b' });
  });

  it('an awake model of a higher priority is interrupted only when idle: not by its turn, not by a deadline', () => {
    const busy = awake({ priority: 'critical' });
    const t = decideTurn(60_000, busy, [waiting({ priority: 'batch' })], S);
    expect(t).toMatchObject({ kind: 'wait', at: Number.POSITIVE_INFINITY });
    expect(t.why).toContain('outranks');
    expect(decideTurn(60_000, awake({ priority: 'critical', inflight: 0, lastActivityAt: 50_000 }), [waiting({ priority: 'batch' })], S)).toMatchObject({
      kind: 'switch',
    });
  });

  it('a rollout of the awake model holds its turn', () => {
    expect(decideTurn(60_000, awake({ rollout: 'r-1', inflight: 0 }), [waiting()], S)).toMatchObject({
      kind: 'stay',
      why: expect.stringContaining('r-1') as unknown,
    });
  });
});

describe('nextInLine', () => {
  it('the highest priority first, then the longest waiting', () => {
    const w = [
      waiting({ model: 'x', priority: 'batch', heldSince: 0 }),
      waiting({ model: 'y', priority: 'high', heldSince: 500 }),
      waiting({ model: 'z', priority: 'high', heldSince: 400 }),
      waiting({ model: 'q', priority: 'critical', held: 0 }),
    ];
    expect(nextInLine(w)?.model).toBe('z');
  });
});
