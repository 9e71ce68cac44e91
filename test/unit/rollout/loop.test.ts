// The reconcile loop's deferred work (`later`): it starts on time, is tracked like any background
// work once started, and is dropped when the loop stops first.
import { describe, expect, it } from 'vitest';
import { ReconcileLoop } from '../../../src/rollout/loop.js';
import { FakeClock } from '../../helpers/fake-ports.js';

describe('ReconcileLoop.later', () => {
  it('starts the work after its delay, tracked by whenIdle, its failure reported', async () => {
    const clock = new FakeClock();
    const failed: string[] = [];
    const loop = new ReconcileLoop(
      clock,
      1_000,
      () => undefined,
      (what, err) => failed.push(`${what}: ${(err as Error).message}`),
    );
    loop.start();
    const ran: number[] = [];
    let release!: () => void;
    loop.later(100, 'replacing w1', () => {
      ran.push(clock.now());
      return new Promise<void>((r) => (release = r));
    });
    loop.later(50, 'failing', () => Promise.reject(new Error('no GPU')));
    await clock.advance(99, () => loop.whenIdle());
    expect(ran).toEqual([]);
    expect(failed).toEqual(['failing: no GPU']);
    await clock.advance(1);
    expect(ran).toEqual([1_000_100]);
    let idle = false;
    const waited = loop.whenIdle().then(() => (idle = true));
    await Promise.resolve();
    expect(idle).toBe(false);
    release();
    await waited;
    loop.stop();
  });

  it('drops work still waiting when the loop stops', async () => {
    const clock = new FakeClock();
    const loop = new ReconcileLoop(clock, 1_000, () => undefined);
    loop.start();
    let ran = false;
    loop.later(100, 'replacing w1', () => Promise.resolve((ran = true)));
    loop.stop();
    expect(clock.pending()).toEqual([]);
    await clock.advance(1_000);
    expect(ran).toBe(false);
  });
});
