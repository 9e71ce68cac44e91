// The splitter: exact weighted proportions, stateless sticky hashing (monotone, replica-consistent,
// well distributed) and the precedence header → override → sticky → weighted.
import { describe, expect, it } from 'vitest';
import { buildRoute } from '../../../src/domain/route.js';
import type { RouteSnapshot, RouteSpec } from '../../../src/domain/route.js';
import { hash53, SplitState, stickyPoint, stickyVersion } from '../../../src/gateway/split.js';

const known = new Set(['stable', 'canary', 'c2', 'v1', 'v2', 'v3']);
function route(spec: Omit<RouteSpec, 'model'>, prev?: RouteSnapshot): RouteSnapshot {
  return buildRoute({ model: 'm', ...spec }, (prev?.revision ?? 0) + 1, known, 0, prev);
}
const keys = (n: number, prefix = 'user-') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('smooth weighted round-robin', () => {
  const cases: { weights: Record<string, number>; period: number; per: Record<string, number> }[] = [
    { weights: { stable: 0.95, canary: 0.05 }, period: 100, per: { stable: 95, canary: 5 } },
    { weights: { stable: 95, canary: 5 }, period: 100, per: { stable: 95, canary: 5 } },
    { weights: { stable: 0.99, canary: 0.01 }, period: 100, per: { stable: 99, canary: 1 } },
    { weights: { v1: 0.5, v2: 0.3, v3: 0.2 }, period: 10, per: { v1: 5, v2: 3, v3: 2 } },
    { weights: { v1: 1, v2: 1, v3: 1 }, period: 3, per: { v1: 1, v2: 1, v3: 1 } },
    { weights: { v1: 3, v2: 7, v3: 11 }, period: 21, per: { v1: 3, v2: 7, v3: 11 } },
    { weights: { stable: 1, canary: 0 }, period: 10, per: { stable: 10 } },
  ];
  for (const c of cases) {
    it(`${JSON.stringify(c.weights)} gives exactly ${JSON.stringify(c.per)} in every window of ${c.period}`, () => {
      const s = new SplitState(route({ weights: c.weights }), 'salt');
      for (let w = 0; w < 1000; w++) {
        const got: Record<string, number> = {};
        for (let i = 0; i < c.period; i++) {
          const v = s.nextWeighted();
          got[v] = (got[v] ?? 0) + 1;
        }
        expect(got).toEqual(c.per);
      }
    });
  }

  it('spreads the minority version evenly (smooth): 95/5 puts one canary request in each run of 20', () => {
    const s = new SplitState(route({ weights: { stable: 95, canary: 5 } }), 'salt');
    const seq = Array.from({ length: 100 }, () => s.nextWeighted());
    const at = seq.flatMap((v, i) => (v === 'canary' ? [i] : []));
    expect(at).toHaveLength(5);
    for (let k = 1; k < at.length; k++) expect(at[k]! - at[k - 1]!).toBe(20);
  });

  it('counts actual vs configured shares', () => {
    const s = new SplitState(route({ weights: { stable: 0.9, canary: 0.1 } }), 'salt');
    for (let i = 0; i < 50; i++) s.choose(undefined, undefined, undefined);
    expect(s.shares()).toEqual([
      { version: 'canary', configured: 0.1, actual: 0.1, count: 5 },
      { version: 'stable', configured: 0.9, actual: 0.9, count: 45 },
    ]);
  });
});

describe('sticky hashing', () => {
  it('hash53 is a fixed function (changing it would move every sticky user)', () => {
    expect(hash53('')).toBe(3338908027751811);
    expect(hash53('a')).toBe(7929297801672961);
    expect(hash53('glidepath\u0000user-1')).toBe(hash53('glidepath\u0000user-1'));
    expect(hash53('x', 1)).not.toBe(hash53('x', 2));
  });

  it('stickyPoint lands in [0,1)', () => {
    for (const k of keys(2000)) {
      const u = stickyPoint('s', k);
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
    }
  });

  it('raising a canary from 5% to 10% only moves users into it', () => {
    const r5 = route({ weights: { stable: 0.95, canary: 0.05 } });
    const r10 = route({ weights: { stable: 0.9, canary: 0.1 } }, r5);
    const s5 = new SplitState(r5, 'salt');
    const s10 = new SplitState(r10, 'salt');
    let moved = 0;
    for (const k of keys(10_000)) {
      const a = s5.choose(undefined, undefined, k).version;
      const b = s10.choose(undefined, undefined, k).version;
      if (a === 'canary') expect(b).toBe('canary');
      if (a !== b) {
        expect([a, b]).toEqual(['stable', 'canary']);
        moved++;
      }
    }
    // about 5% of users moved (binomial: sd ≈ 0.2%)
    expect(moved / 10_000).toBeGreaterThan(0.04);
    expect(moved / 10_000).toBeLessThan(0.06);
  });

  it('is monotone all the way from 0% to 100%, through 50% (the stable does not flip)', () => {
    const steps = [0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 0.99, 1];
    let prev: RouteSnapshot | undefined = route({ weights: { stable: 1, canary: 0 } });
    let prevAssign = keys(5000).map(() => 'stable');
    for (const w of steps) {
      const r: RouteSnapshot = route({ weights: { stable: 1 - w, canary: w } }, prev);
      const s = new SplitState(r, 'salt');
      const assign = keys(5000).map((k) => s.choose(undefined, undefined, k).version);
      assign.forEach((v, i) => {
        if (prevAssign[i] === 'canary') expect(v, `step ${w}`).toBe('canary');
      });
      prevAssign = assign;
      prev = r;
    }
    expect(prevAssign.every((v) => v === 'canary')).toBe(true);
  });

  it('at weight 0 everyone is back on stable', () => {
    const r10 = route({ weights: { stable: 0.9, canary: 0.1 } });
    const r0 = route({ weights: { stable: 1, canary: 0 } }, r10);
    const s = new SplitState(r0, 'salt');
    for (const k of keys(10_000)) expect(s.choose(undefined, undefined, k).version).toBe('stable');
  });

  it('two replicas built from the same route and salt agree on every key', () => {
    const r = route({ weights: { stable: 0.8, canary: 0.15, c2: 0.05 } });
    const a = new SplitState(r, 'salt');
    // a second replica builds its own snapshot from the same spec
    const b = new SplitState(route({ weights: { canary: 0.15, stable: 0.8, c2: 0.05 } }), 'salt');
    for (const k of keys(10_000)) expect(b.choose(undefined, undefined, k).version).toBe(a.choose(undefined, undefined, k).version);
  });

  it('a different salt gives a different assignment; the route salt wins over the default', () => {
    const r = route({ weights: { stable: 0.5, canary: 0.5 } });
    const a = new SplitState(r, 'salt-a');
    const b = new SplitState(r, 'salt-b');
    const differ = keys(1000).filter((k) => a.choose(undefined, undefined, k).version !== b.choose(undefined, undefined, k).version).length;
    expect(differ).toBeGreaterThan(300);
    const withSalt = route({ weights: { stable: 0.5, canary: 0.5 }, stickySalt: 'salt-b' });
    const c = new SplitState(withSalt, 'salt-a');
    for (const k of keys(1000)) expect(c.choose(undefined, undefined, k).version).toBe(b.choose(undefined, undefined, k).version);
  });

  it('distributes 100k keys within tolerance of the weights', () => {
    const r = route({ weights: { stable: 0.85, canary: 0.1, c2: 0.05 } });
    const s = new SplitState(r, 'glidepath');
    const n = 100_000;
    for (const k of keys(n, 'session:')) s.choose(undefined, undefined, k);
    for (const v of r.versions) {
      // 4 standard deviations of a binomial share
      const sd = Math.sqrt((v.weight * (1 - v.weight)) / n);
      expect(Math.abs((s.counts.get(v.id) ?? 0) / n - v.weight), v.id).toBeLessThan(4 * sd);
    }
  });

  it('stickyVersion maps points to the candidate intervals, stable taking the rest', () => {
    const r = route({ weights: { stable: 0.8, canary: 0.15, c2: 0.05 } });
    // candidates sorted by id: c2 [0, 0.05), canary [0.05, 0.2)
    expect(r.versions.map((v) => v.id)).toEqual(['c2', 'canary', 'stable']);
    expect(stickyVersion(r, 0)).toBe('c2');
    expect(stickyVersion(r, 0.0499)).toBe('c2');
    expect(stickyVersion(r, 0.05)).toBe('canary');
    expect(stickyVersion(r, 0.1999)).toBe('canary');
    expect(stickyVersion(r, 0.2)).toBe('stable');
    expect(stickyVersion(r, 0.99999)).toBe('stable');
  });
});

describe('precedence', () => {
  const r = route({ weights: { stable: 0.9, canary: 0.1 }, overrides: { beta: 'v3', internal: 'canary' } });

  it('explicit header beats override, sticky and weights', () => {
    const s = new SplitState(r, 'salt');
    expect(s.choose('stable', 'beta', 'user-1')).toEqual({ version: 'stable', reason: 'header' });
  });

  it('override beats sticky and weights; an unknown category falls through', () => {
    const s = new SplitState(r, 'salt');
    expect(s.choose(undefined, 'beta', 'user-1')).toEqual({ version: 'v3', reason: 'override' });
    expect(s.choose(undefined, 'nope', 'user-1').reason).toBe('sticky');
    // inherited object keys are not categories
    expect(s.choose(undefined, 'constructor', undefined).reason).toBe('weighted');
  });

  it('sticky beats weights; an empty key is no key', () => {
    const s = new SplitState(r, 'salt');
    expect(s.choose(undefined, undefined, 'user-1').reason).toBe('sticky');
    expect(s.choose(undefined, undefined, '').reason).toBe('weighted');
    expect(s.choose(undefined, undefined, undefined).reason).toBe('weighted');
  });

  it('counts every choice, whatever the reason', () => {
    const s = new SplitState(r, 'salt');
    s.choose('canary', undefined, undefined);
    s.choose(undefined, 'beta', undefined);
    expect(s.counts.get('canary')).toBe(1);
    expect(s.counts.get('v3')).toBe(1);
  });
});
