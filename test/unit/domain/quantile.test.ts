// The one quantile (src/domain/quantile.ts): NumPy's linear method, computed as NumPy does. The
// values below are numpy.quantile's, printed with repr; test/unit/analysis/stats-reference.test.ts
// checks larger seeded sets from test/fixtures/stats.
import { describe, expect, it } from 'vitest';
import { quantileSorted } from '../../../src/domain/quantile.js';

describe('quantileSorted', () => {
  it.each([
    [[15, 20, 35, 40, 50], 0.5, 35],
    [[15, 20, 35, 40, 50], 0.9, 46],
    [[15, 20, 35, 40, 50], 0.99, 49.6],
    [[1, 2], 0.9, 1.9],
    [[1, 2, 3, 4], 0.99, 3.9699999999999998],
    [[0.1, 0.2, 0.3], 0.7, 0.24],
    [[1, 1, 2, 2, 2, 9], 0.95, 7.25],
  ])("%j at %d is numpy.quantile's %d", (x, q, expected) => {
    expect(quantileSorted(x, q)).toBe(expected);
  });

  it('one sample is every quantile, the ends are the minimum and maximum, nothing is NaN', () => {
    expect(quantileSorted([3.5], 0.99)).toBe(3.5);
    expect(quantileSorted([1, 2, 3], 0)).toBe(1);
    expect(quantileSorted([1, 2, 3], 1)).toBe(3);
    expect(quantileSorted([], 0.5)).toBeNaN();
    expect(quantileSorted(Float64Array.from([2, 4]), 0.5)).toBe(3);
  });
});
