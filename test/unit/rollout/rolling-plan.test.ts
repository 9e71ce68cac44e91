// The rolling update's arithmetic: budgets as Kubernetes resolves them, the growth order that keeps a
// prefill/decode ratio, and whole rollouts stepped through with every invariant checked at every step.
import { describe, expect, it } from 'vitest';
import {
  assertFeasible,
  dryRun,
  growthOrder,
  newShare,
  nextStep,
  parseBudget,
  ratioKept,
  resolveBudget,
  roleBudgets,
} from '../../../src/rollout/rolling-plan.js';
import type { RoleNow } from '../../../src/rollout/rolling-plan.js';
import { caught } from '../../helpers/errors.js';
import type { GlidepathError } from '../../../src/errors.js';

const codeOf = (fn: () => unknown) => caught(fn).code;

describe('budgets', () => {
  it('parses counts and percentages; anything else names the setting', () => {
    expect(parseBudget(1, 'max surge')).toEqual({ count: 1 });
    expect(parseBudget('0', 'max surge')).toEqual({ count: 0 });
    expect(parseBudget('25%', 'max surge')).toEqual({ percent: 25 });
    expect(parseBudget('12.5%', 'max surge')).toEqual({ percent: 12.5 });
    for (const bad of [-1, 1.5, '', '101%', '-5%', 'one', '5 %', null, {}]) {
      const e = caught(() => parseBudget(bad, 'max unavailable'));
      expect(e.code).toBe('invalid_rollout');
      expect(e.message).toMatch(/^max unavailable: expected a count of workers/);
    }
  });

  it('surge rounds up, unavailable rounds down (as a Deployment); an exact share is exact', () => {
    expect(resolveBudget({ percent: 25 }, 6, 'up')).toBe(2);
    expect(resolveBudget({ percent: 25 }, 6, 'down')).toBe(1);
    expect(resolveBudget({ percent: 10 }, 30, 'up')).toBe(3);
    expect(resolveBudget({ percent: 10 }, 30, 'down')).toBe(3);
    expect(resolveBudget({ count: 2 }, 30, 'down')).toBe(2);
  });

  it('per role; both zero for a role is an error naming it; unavailable never exceeds the role', () => {
    expect(roleBudgets({ prefill: 4, decode: 2 }, { count: 1 }, { count: 0 })).toEqual({
      prefill: { desired: 4, surge: 1, unavailable: 0 },
      decode: { desired: 2, surge: 1, unavailable: 0 },
    });
    expect(roleBudgets({ worker: 2 }, { count: 0 }, { count: 5 })).toEqual({ worker: { desired: 2, surge: 0, unavailable: 2 } });
    const e = caught(() => roleBudgets({ prefill: 4, decode: 2 }, { count: 0 }, { percent: 25 }));
    expect(e.code).toBe('invalid_rollout');
    expect(e.message).toMatch(/^role decode \(2 replicas\): max surge and max unavailable both come to 0 workers/);
    expect(codeOf(() => roleBudgets({ worker: 0 }, { count: 1 }, { count: 0 }))).toBe('invalid_rollout');
  });
});

describe('growth order', () => {
  it('one of each role first, then the role furthest behind its share; every prefix within one worker of the ratio', () => {
    const d = { prefill: 4, decode: 2 };
    const order = growthOrder(d);
    expect(order).toEqual(['prefill', 'decode', 'prefill', 'prefill', 'decode', 'prefill']);
    const counts: Record<string, number> = { prefill: 0, decode: 0 };
    for (const r of order) {
      counts[r] = (counts[r] as number) + 1;
      expect(ratioKept(counts, d)).toBe(true);
    }
    expect(growthOrder({ worker: 3 })).toEqual(['worker', 'worker', 'worker']);
    const big = { prefill: 7, decode: 3, encode: 2 };
    const c: Record<string, number> = { prefill: 0, decode: 0, encode: 0 };
    for (const r of growthOrder(big)) {
      c[r] = (c[r] as number) + 1;
      expect(ratioKept(c, big)).toBe(true);
    }
    expect(c).toEqual(big);
  });
});

interface Trace {
  steps: number;
  lines: string[];
}

/**
 * A whole rollout with every started worker ready by the next step: at every step the invariants
 * hold — each role at most desired + surge workers, at least desired − unavailable serving, both
 * pools' ratios within one worker, a pool with traffic never missing a role.
 */
function roll(
  desired: Record<string, number>,
  surge: string | number,
  unavailable: string | number,
  partition = 0,
  /** How many of a role's starting workers are ready at the next step (default: all). */
  readies: (starting: number) => number = (n) => n,
): Trace {
  const budgets = roleBudgets(desired, parseBudget(surge, 'surge'), parseBudget(unavailable, 'unavailable'));
  const roles = Object.keys(desired);
  const now: Record<string, RoleNow> = Object.fromEntries(roles.map((r) => [r, { old: desired[r] as number, ready: 0, starting: 0 }]));
  const lines: string[] = [];
  for (let step = 0; step < 400; step++) {
    // what started earlier is ready now (all of it, or as many as `readies` says)
    for (const r of roles) {
      const c = now[r] as RoleNow;
      const n = Math.min(c.starting, readies(c.starting));
      c.ready += n;
      c.starting -= n;
    }
    const s = nextStep(now, budgets, partition);
    for (const r of roles) {
      const c = now[r] as RoleNow;
      c.old -= s.stop[r] as number;
      c.starting += s.start[r] as number;
      const b = budgets[r]!;
      expect(c.old + c.ready + c.starting, `${r} total at step ${step}`).toBeLessThanOrEqual(b.desired + b.surge);
      expect(c.old + c.ready, `${r} serving at step ${step}`).toBeGreaterThanOrEqual(b.desired - b.unavailable);
    }
    const oldCounts = Object.fromEntries(roles.map((r) => [r, (now[r] as RoleNow).old]));
    const newCounts = Object.fromEntries(roles.map((r) => [r, (now[r] as RoleNow).ready + (now[r] as RoleNow).starting]));
    expect(ratioKept(oldCounts, desired), `old pool ratio at step ${step}`).toBe(true);
    expect(ratioKept(newCounts, desired), `new pool ratio at step ${step}`).toBe(true);
    const share = newShare(now, desired);
    // a pool that takes traffic has every role: the old one is whole in its roles or empty (a
    // downtime the budgets allowed), and the new one takes traffic only with every role ready
    const oldRoles = roles.filter((r) => (now[r] as RoleNow).old > 0).length;
    expect(oldRoles === 0 || oldRoles === roles.length, `old pool roles at step ${step}`).toBe(true);
    if (share > 0) expect(roles.every((r) => (now[r] as RoleNow).ready > 0)).toBe(true);
    lines.push(
      `${step}: ${roles.map((r) => `${r} old ${(now[r] as RoleNow).old} new ${(now[r] as RoleNow).ready}+${(now[r] as RoleNow).starting}`).join(', ')} → new share ${share.toFixed(2)}`,
    );
    if (s.done) return { steps: step, lines };
    if (s.waiting !== undefined && roles.every((r) => (now[r] as RoleNow).starting === 0)) {
      lines.push(`stopped: ${s.waiting}`);
      return { steps: step, lines };
    }
  }
  throw new Error(`never finished:\n${lines.join('\n')}`);
}

interface RandomUpdate {
  desired: Record<string, number>;
  surge: string | number;
  unavailable: string | number;
  /** The generator's next draw below n (for what a test adds: readiness, a partition). */
  rand: (n: number) => number;
}

/** `n` seeded random fleets (one to three roles of 1–8 replicas) and budgets (counts 0–3, or 0–100 %). */
function* randomUpdates(seed: number, n: number): Generator<RandomUpdate> {
  let x = seed;
  const rand = (k: number) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x >>> 8) % k;
  };
  const budget = () => (rand(2) === 0 ? rand(4) : `${[0, 10, 25, 50, 100][rand(5)]}%`);
  for (let i = 0; i < n; i++) {
    const names = ['prefill', 'decode', 'encode'].slice(0, 1 + rand(3));
    yield { desired: Object.fromEntries(names.map((r) => [r, 1 + rand(8)])), surge: budget(), unavailable: budget(), rand };
  }
}

/** Why the update is refused up front (always `invalid_rollout`: never half-way), or undefined when it may run. */
function refusal(c: RandomUpdate, partition = 0): string | undefined {
  try {
    assertFeasible(roleBudgets(c.desired, parseBudget(c.surge, 'surge'), parseBudget(c.unavailable, 'unavailable')), partition);
    return undefined;
  } catch (err) {
    expect((err as GlidepathError).code).toBe('invalid_rollout');
    return (err as Error).message;
  }
}

describe('a whole rollout, step by step', () => {
  it('4 prefill + 2 decode, surge 1, unavailable 0 (the defaults): capacity never drops, the ratio is kept, it ends with the new pool alone', () => {
    const t = roll({ prefill: 4, decode: 2 }, 1, 0);
    expect(t.lines.at(-1)).toMatch(/prefill old 0 new 4\+0, decode old 0 new 2\+0 → new share 1\.00$/);
  });

  it('no spare GPUs: surge 0, unavailable 1 — an old worker goes before each new one starts', () => {
    const t = roll({ prefill: 4, decode: 2 }, 0, 1);
    expect(t.lines[0]).toMatch(/^0: prefill old 3 new 0\+1, decode old 1 new 0\+1/);
    expect(t.lines.at(-1)).toMatch(/new share 1\.00$/);
  });

  it('percentages, one role, several roles, large budgets', () => {
    for (const [d, s, u] of [
      [{ worker: 8 }, '25%', '0%'],
      [{ worker: 8 }, '0%', '25%'],
      [{ worker: 1 }, 1, 0],
      [{ worker: 1 }, 0, 1],
      [{ prefill: 7, decode: 3 }, '50%', '20%'],
      [{ prefill: 6, decode: 6 }, 3, 3],
      [{ prefill: 3, decode: 1, encode: 2 }, 1, 1],
    ] as const) {
      const t = roll({ ...d }, s, u);
      expect(t.lines.at(-1), JSON.stringify([d, s, u])).toMatch(/new share 1\.00$/);
    }
  });

  it('1000 seeded random fleets and budgets: every rollout ends with the new pool alone, the invariants held at every step', () => {
    let ran = 0;
    let stuck = 0;
    for (const c of randomUpdates(42, 1000)) {
      const refused = refusal(c);
      if (refused !== undefined) {
        if (refused.includes('would get stuck')) stuck++;
        continue;
      }
      const t = roll(c.desired, c.surge, c.unavailable);
      expect(t.lines.at(-1), JSON.stringify(c)).toMatch(/new share 1\.00$/);
      ran++;
    }
    // the plans refused as stuck are few: what surge 0 with small roles beside a large one cannot do
    expect(ran).toBeGreaterThan(500);
    expect(ran).toBeGreaterThan(20 * stuck);
  });

  it('a plan that would get stuck is refused before anything starts, saying where', () => {
    const budgets = roleBudgets({ prefill: 2, decode: 7, encode: 2 }, { count: 0 }, { count: 1 });
    expect(dryRun(budgets).stuck).toMatch(/^at step \d+ \(/);
    const e = caught(() => assertFeasible(budgets));
    expect(e.code).toBe('invalid_rollout');
    expect(e.message).toMatch(/would get stuck at step \d+ \(prefill 1 old, 1 new; decode 1 old, 5 new; encode 1 old, 1 new\)/);
    expect(e.message).toMatch(/allow more surge/);
    // one more worker of surge and it goes through
    expect(dryRun(roleBudgets({ prefill: 2, decode: 7, encode: 2 }, { count: 1 }, { count: 1 })).stuck).toBeUndefined();
    // and a single worker of a role with no surge is refused outright
    expect(caught(() => roleBudgets({ prefill: 1, decode: 3 }, { count: 0 }, { count: 1 })).message).toMatch(/role prefill has 1 replica and max surge 0/);
  });

  it('1,000 more with slow readiness (a starting worker ready with probability ½ per step) and partitions: each ends with the new pool alone, or paused at its partition with a whole old pool', () => {
    let ran = 0;
    for (const c of randomUpdates(7, 1000)) {
      const partition = c.rand(3) === 0 ? c.rand(4) : 0;
      if (refusal(c, partition) !== undefined) continue;
      const readies = (n: number) => {
        let k = 0;
        for (let j = 0; j < n; j++) if (c.rand(2) === 0) k++;
        return k;
      };
      const t = roll(c.desired, c.surge, c.unavailable, partition, readies);
      const last = t.lines.at(-1) ?? '';
      const ok = /new share 1\.00$/.test(last) || (partition > 0 && last.startsWith('stopped: paused at the partition'));
      expect(ok, `${JSON.stringify([c, partition])}: ${last}`).toBe(true);
      ran++;
    }
    expect(ran).toBeGreaterThan(500);
  });

  it('review cases: a partition below the roles keeps one of each; failed new workers do not deadlock; several roles never all go dark', () => {
    const pd = roleBudgets({ prefill: 4, decode: 2 }, { count: 1 }, { count: 0 });
    expect(dryRun(pd, 1).stuck).toBeUndefined();
    expect(roll({ prefill: 4, decode: 2 }, 1, 0, 1).lines.at(-1)).toBe('stopped: paused at the partition: 2 old worker(s) left');
    // a new pool thrown off its ratio (workers that failed and were removed) can still grow
    const b = roleBudgets({ prefill: 5, decode: 4, encode: 7 }, { count: 1 }, { percent: 25 });
    const s = nextStep({ prefill: { old: 2, ready: 4, starting: 0 }, decode: { old: 1, ready: 4, starting: 0 }, encode: { old: 4, ready: 2, starting: 0 } }, b);
    expect(Object.values(s.start).reduce((x, y) => x + y, 0) + Object.values(s.stop).reduce((x, y) => x + y, 0)).toBeGreaterThan(0);
    // one prefill worker, its replacement still starting: the old pool is not stopped whole, whatever
    // unavailability the budget allows (without a prefill nothing serves)
    const one = roleBudgets({ prefill: 1, decode: 4 }, { count: 1 }, { count: 2 });
    const t = nextStep({ prefill: { old: 1, ready: 0, starting: 1 }, decode: { old: 1, ready: 4, starting: 0 } }, one);
    expect(t.stop).toEqual({ prefill: 0, decode: 0 });
  });

  it('a partition stops with that many old workers left, still serving, and the ratio kept', () => {
    const t = roll({ prefill: 4, decode: 2 }, 1, 0, 2);
    expect(t.lines.at(-1)).toBe('stopped: paused at the partition: 2 old worker(s) left');
    expect(t.lines.at(-2)).toMatch(/prefill old 1 new 4\+0, decode old 1 new 2\+0/);
  });

  it('waits for readiness: nothing moves while the new workers start', () => {
    const budgets = roleBudgets({ worker: 4 }, { count: 1 }, { count: 0 });
    const s = nextStep({ worker: { old: 4, ready: 0, starting: 1 } }, budgets);
    expect(s).toEqual({ start: { worker: 0 }, stop: { worker: 0 }, done: false, waiting: 'waiting for 1 new worker(s) to be ready' });
  });

  it('the route follows ready capacity: a pool counts by its scarcest role; a pool missing a role serves nothing', () => {
    const d = { prefill: 4, decode: 2 };
    expect(newShare({ prefill: { old: 4, ready: 0, starting: 1 }, decode: { old: 2, ready: 0, starting: 1 } }, d)).toBe(0);
    expect(newShare({ prefill: { old: 4, ready: 1, starting: 0 }, decode: { old: 2, ready: 0, starting: 1 } }, d)).toBe(0);
    // old: min(3/4, 2/2) = 0.75; new: min(1/4, 1/2) = 0.25
    expect(newShare({ prefill: { old: 3, ready: 1, starting: 0 }, decode: { old: 2, ready: 1, starting: 0 } }, d)).toBeCloseTo(0.25, 10);
    expect(newShare({ prefill: { old: 0, ready: 4, starting: 0 }, decode: { old: 0, ready: 2, starting: 0 } }, d)).toBe(1);
    expect(newShare({ worker: { old: 3, ready: 1, starting: 0 } }, { worker: 4 })).toBeCloseTo(0.25, 10);
  });
});
