// Routes: weight validation and normalisation, stable choice, sticky layout, served versions.
import { describe, expect, it } from 'vitest';
import { buildRoute, normaliseWeights, routeToSpec, RouteValidationError, servedVersions } from '../../../src/domain/route.js';
import type { RouteSpec } from '../../../src/domain/route.js';

const known = new Set(['v1', 'v2', 'v3', 'v4']);
const build = (spec: Omit<RouteSpec, 'model'>, prev?: ReturnType<typeof buildRoute>) =>
  buildRoute({ model: 'm', ...spec }, (prev?.revision ?? 0) + 1, known, 1000, prev);

describe('normaliseWeights', () => {
  it('keeps fractions that sum to 1 (within 1e-9)', () => {
    expect(normaliseWeights({ v1: 0.95, v2: 0.05 })).toEqual({ v1: 0.95, v2: 0.05 });
    expect(normaliseWeights({ v1: 0.1, v2: 0.2, v3: 0.7 + 5e-10 })).toBeTruthy();
  });

  it('normalises integers', () => {
    expect(normaliseWeights({ v1: 95, v2: 5 })).toEqual({ v1: 0.95, v2: 0.05 });
    expect(normaliseWeights({ v1: 1, v2: 1, v3: 2 })).toEqual({ v1: 0.25, v2: 0.25, v3: 0.5 });
    expect(normaliseWeights({ v1: 1, v2: 0 })).toEqual({ v1: 1, v2: 0 });
  });

  const bad: [string, Record<string, number>, RegExp][] = [
    ['negative', { v1: 1.2, v2: -0.2 }, /weight of v2 must not be negative/],
    ['NaN', { v1: NaN }, /weight of v1 must be a finite number, got NaN/],
    ['Infinity', { v1: Infinity, v2: 1 }, /weight of v1 must be a finite number/],
    ['fractions not summing to 1', { v1: 0.5, v2: 0.4 }, /must sum to 1 within 1e-9, got 0\.9/],
    ['fractions just outside the tolerance', { v1: 0.5, v2: 0.5 + 2e-9 }, /must sum to 1/],
    ['mixed integers and fractions', { v1: 1, v2: 0.5 }, /must sum to 1/],
    ['all zero', { v1: 0, v2: 0 }, /sum to 0/],
    ['empty', {}, /at least one version/],
    // regression: 1e308 + 1e308 is Infinity, each weight normalised to 0, and the route served nothing
    ['integers whose sum overflows', { v1: 1e308, v2: 1e308 }, /weights sum to Infinity, past the largest number/],
  ];
  for (const [name, w, msg] of bad) {
    it(`refuses ${name}`, () => {
      expect(() => normaliseWeights(w)).toThrow(RouteValidationError);
      expect(() => normaliseWeights(w)).toThrow(msg);
    });
  }

  it('keeps every positive weight positive when the sum is finite, however large', () => {
    const w = normaliseWeights({ v1: 1.7e308, v2: 1 });
    expect(w.v2).toBeGreaterThan(0);
    expect((w.v1 ?? 0) + (w.v2 ?? 0)).toBeCloseTo(1, 9);
  });

  it('refuses a weight that is not a number at all (from untyped input)', () => {
    expect(() => normaliseWeights({ v1: '1' as unknown as number })).toThrow(/weight of v1 must be a finite number/);
  });
});

describe('buildRoute', () => {
  it('builds a frozen snapshot with candidates first and stable last', () => {
    const r = build({ weights: { v1: 0.9, v2: 0.1 } });
    expect(r.stable).toBe('v1');
    expect(r.versions).toEqual([
      { id: 'v2', weight: 0.1 },
      { id: 'v1', weight: 0.9 },
    ]);
    expect(r.stickyBounds).toEqual([0.1]);
    expect(r.revision).toBe(1);
    expect(r.createdAt).toBe(1000);
    expect(Object.isFrozen(r)).toBe(true);
    expect(Object.isFrozen(r.versions)).toBe(true);
    expect(Object.isFrozen(r.versions[0])).toBe(true);
  });

  it('defaults stable to the largest weight, first listed on ties', () => {
    expect(build({ weights: { v1: 1, v2: 3 } }).stable).toBe('v2');
    expect(build({ weights: { v2: 1, v1: 1 } }).stable).toBe('v2');
  });

  it('refuses an unknown version, a stable not in the weights, a bad override or shadow', () => {
    expect(() => build({ weights: { v1: 1, v9: 0 } })).toThrow(/unknown version "v9" for model m/);
    expect(() => build({ weights: { v1: 1 }, stable: 'v2' })).toThrow(/stable version "v2" is not in the route's weights/);
    expect(() => build({ weights: { v1: 1 }, overrides: { beta: 'v9' } })).toThrow(/override "beta" names unknown version "v9"/);
    expect(() => build({ weights: { v1: 1 }, shadow: { version: 'v9', share: 0.1 } })).toThrow(/shadow names unknown version/);
    expect(() => build({ weights: { v1: 1 }, shadow: { version: 'v2', share: 1.5 } })).toThrow(/shadow share must be in \[0,1\]/);
    expect(() => build({ weights: { v1: 1 }, shadow: { version: 'v2', share: NaN } })).toThrow(/shadow share/);
    expect(() => build({ weights: { v1: -1 } })).toThrow(RouteValidationError);
  });

  it('keeps the candidates in the previous route order; new ones go after, by id', () => {
    const r1 = build({ weights: { v1: 0.9, v3: 0.05, v2: 0.05 } });
    expect(r1.versions.map((v) => v.id)).toEqual(['v2', 'v3', 'v1']);
    const r2 = build({ weights: { v1: 0.8, v4: 0.05, v3: 0.1, v2: 0.05 } }, r1);
    expect(r2.versions.map((v) => v.id)).toEqual(['v2', 'v3', 'v4', 'v1']);
    expect(r2.stickyBounds[0]).toBeCloseTo(0.05, 12);
    expect(r2.stickyBounds[1]).toBeCloseTo(0.15, 12);
    expect(r2.stickyBounds[2]).toBeCloseTo(0.2, 12);
    expect(r2.revision).toBe(2);
  });

  it('keeps the previous stable when a growing candidate overtakes it (regression: the stable flipped at 50% and reshuffled sticky users out of the canary)', () => {
    const r1 = build({ weights: { v1: 0.95, v2: 0.05 } });
    const r2 = build({ weights: { v1: 0.4, v2: 0.6 } }, r1);
    expect(r2.stable).toBe('v1');
    expect(r2.versions.map((v) => v.id)).toEqual(['v2', 'v1']);
    expect(r2.stickyBounds).toEqual([0.6]);
    // the previous stable is dropped from the route or set to 0: the largest takes over (everyone
    // is on v2 either way, so nobody moves)
    expect(build({ weights: { v2: 1 } }, r2).stable).toBe('v2');
    expect(build({ weights: { v1: 0, v2: 1 } }, r2).stable).toBe('v2');
    // an explicit stable always wins
    expect(build({ weights: { v1: 0.4, v2: 0.6 }, stable: 'v2' }, r1).stable).toBe('v2');
  });

  it('round-trips through routeToSpec', () => {
    const r = build({ weights: { v1: 3, v2: 1 }, overrides: { beta: 'v3' }, stickySalt: 's', shadow: { version: 'v4', share: 0.2 } });
    const again = buildRoute(routeToSpec(r), 2, known, 1000, r);
    expect(again.versions).toEqual(r.versions);
    expect(again.overrides).toEqual(r.overrides);
    expect(again.stickySalt).toBe('s');
    expect(again.shadow).toEqual({ version: 'v4', share: 0.2 });
    expect(again.stable).toBe('v1');
  });

  it('servedVersions: weighted, override targets and shadow; not zero-weight ones', () => {
    const r = build({ weights: { v1: 1, v2: 0 }, overrides: { beta: 'v3' }, shadow: { version: 'v4', share: 0.1 } });
    expect([...servedVersions(r)].sort()).toEqual(['v1', 'v3', 'v4']);
    const noShadow = build({ weights: { v1: 1 }, shadow: { version: 'v4', share: 0 } });
    expect([...servedVersions(noShadow)]).toEqual(['v1']);
  });
});
