// Pickers, table-driven with exact pick sequences. The expected sequences were computed by an
// independent Python implementation of mulberry32, the power-of-two-choices rule (weighted draws, load
// per unit of weight) and smooth weighted round-robin, not by this code.
import { describe, expect, it } from 'vitest';
import { createPicker, PowerOfTwoPicker, RoundRobinPicker } from '../../../src/gateway/pick.js';
import { mulberry32 } from '../../../src/domain/random.js';
import type { Pickable } from '../../../src/gateway/pick.js';

interface W extends Pickable {
  id: string;
}

const NOW = 1000;

/** Workers at health weights (and trial budgets): the rest as `workers`. */
function weighted(ids: string[], outstanding: number[], weight: number[], budget?: number[]): W[] {
  return workers(ids, outstanding).map((w, k) => ({ ...w, weight: weight[k]!, budget: budget?.[k] ?? Infinity }));
}

function workers(ids: string[], outstanding: number[], ejectedUntil?: number[], routable?: boolean[]): W[] {
  return ids.map((id, k) => ({
    id,
    outstanding: outstanding[k]!,
    ejectedUntil: ejectedUntil?.[k] ?? 0,
    routable: routable?.[k] ?? true,
    weight: 1,
    budget: Infinity,
  }));
}

function run(
  picker: { pick: (ws: readonly W[], now: number, ex?: ReadonlySet<W>) => W | undefined },
  ws: W[],
  n: number,
  exclude?: string[],
): (string | undefined)[] {
  const ex = exclude ? new Set(ws.filter((w) => exclude.includes(w.id))) : undefined;
  const out: (string | undefined)[] = [];
  for (let i = 0; i < n; i++) out.push(picker.pick(ws, NOW, ex)?.id);
  return out;
}

describe('mulberry32', () => {
  it('matches the reference generator', () => {
    const r1 = mulberry32(1);
    expect([r1(), r1(), r1()]).toEqual([0.6270739405881613, 0.002735721180215478, 0.5274470399599522]);
    const r42 = mulberry32(42);
    expect([r42(), r42(), r42(), r42(), r42()]).toEqual([0.6011037519201636, 0.44829055899754167, 0.8524657934904099, 0.6697340414393693, 0.17481389874592423]);
  });
});

describe('PowerOfTwoPicker: exact sequences for a seeded mulberry32', () => {
  const table: { name: string; seed: number; ws: () => W[]; exclude?: string[]; expected: (string | undefined)[] }[] = [
    {
      name: 'all idle: first sampled wins ties',
      seed: 42,
      ws: () => workers(['a', 'b', 'c', 'd'], [0, 0, 0, 0]),
      expected: ['c', 'd', 'a', 'b', 'd', 'a', 'c', 'a', 'c', 'a'],
    },
    {
      name: 'loaded: the less loaded of the two wins',
      seed: 42,
      ws: () => workers(['a', 'b', 'c', 'd'], [5, 1, 3, 0]),
      expected: ['b', 'd', 'c', 'b', 'd', 'd', 'c', 'c', 'b', 'c'],
    },
    {
      name: 'ejected and unroutable workers are skipped',
      seed: 7,
      ws: () => workers(['a', 'b', 'c', 'd', 'e'], [0, 2, 0, 1, 3], [0, 5000, 0, 0, 0], [true, true, true, false, true]),
      expected: ['a', 'c', 'c', 'c', 'c', 'a', 'c', 'a', 'a', 'a'],
    },
    {
      name: 'excluded workers are skipped',
      seed: 123,
      ws: () => workers(['a', 'b', 'c'], [0, 0, 0]),
      exclude: ['a'],
      expected: ['c', 'b', 'b', 'c', 'c', 'c', 'b', 'c'],
    },
    { name: 'one eligible: always it', seed: 1, ws: () => workers(['a', 'b'], [0, 0], [0, 5000]), expected: ['a', 'a', 'a', 'a'] },
    {
      name: 'eight workers with mixed load',
      seed: 2024,
      ws: () => workers(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], [3, 1, 4, 1, 5, 9, 2, 6]),
      expected: ['g', 'e', 'e', 'b', 'd', 'g', 'd', 'd', 'b', 'a', 'g', 'c'],
    },
    { name: 'none eligible', seed: 1, ws: () => workers(['a', 'b'], [0, 0], [5000, 5000]), expected: [undefined, undefined] },
    { name: 'empty pool', seed: 1, ws: () => [], expected: [undefined] },
    {
      name: 'a suspicious worker (weight 0.5) is drawn half as often and wins only at half the load per weight',
      seed: 42,
      ws: () => weighted(['a', 'b', 'c', 'd'], [0, 0, 0, 0], [1, 0.5, 1, 1]),
      expected: ['c', 'd', 'a', 'a', 'd', 'a', 'd', 'a', 'c', 'a', 'd', 'c'],
    },
    {
      name: 'the same, loaded',
      seed: 42,
      ws: () => weighted(['a', 'b', 'c', 'd'], [2, 1, 2, 3], [1, 0.5, 1, 1]),
      expected: ['c', 'c', 'a', 'a', 'b', 'a', 'a', 'a', 'c', 'a', 'a', 'c'],
    },
    {
      name: 'weight 0 (unhealthy, a spare) is never picked',
      seed: 7,
      ws: () => weighted(['a', 'b', 'c'], [0, 0, 0], [1, 0, 1]),
      expected: ['a', 'c', 'c', 'a', 'c', 'a', 'c', 'a'],
    },
    {
      name: 'a half-open trial (weight 0.1, budget 2) gets a trickle and stops at its budget',
      seed: 5,
      ws: () => weighted(['a', 'b', 'c'], [0, 0, 0], [1, 1, 0.1], [Infinity, Infinity, 2]),
      expected: [
        ...['b', 'a', 'a', 'b', 'b', 'b', 'b', 'a', 'b', 'b', 'a', 'b', 'a', 'a', 'a', 'b', 'a', 'a', 'a', 'b'],
        ...['b', 'b', 'b', 'a', 'b', 'b', 'a', 'a', 'b', 'c', 'a', 'a', 'a', 'b', 'a', 'a', 'c', 'b', 'b', 'b'],
      ],
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      expect(run(new PowerOfTwoPicker(mulberry32(c.seed)), c.ws(), c.expected.length, c.exclude)).toEqual(c.expected);
    });
  }

  it('a spent trial budget takes the worker out (weight 0)', () => {
    const ws = weighted(['a', 'c'], [0, 0], [1, 0.1], [Infinity, 2]);
    run(new PowerOfTwoPicker(mulberry32(5)), ws, 40);
    expect(ws[1]).toMatchObject({ weight: 0, budget: 0 });
  });

  it('under steady load a half-weight worker takes half the traffic of a healthy one', () => {
    // requests end in arrival order 16 picks later; 20,000 picks
    const ws = weighted(['a', 'b', 'c', 'd'], [0, 0, 0, 0], [1, 0.5, 1, 1]);
    const p = new PowerOfTwoPicker(mulberry32(3));
    const inflight: W[] = [];
    const n = new Map<string, number>();
    for (let k = 0; k < 20_000; k++) {
      const w = p.pick(ws, NOW) as W;
      n.set(w.id, (n.get(w.id) ?? 0) + 1);
      w.outstanding++;
      inflight.push(w);
      if (inflight.length > 16) inflight.shift()!.outstanding--;
    }
    // the reference implementation's shares for this seed: a .285, b .144, c .286, d .284
    expect((n.get('b') ?? 0) / 20_000).toBeCloseTo(0.144, 3);
    expect((n.get('a') ?? 0) / 20_000).toBeCloseTo(0.285, 3);
  });

  it('an ejection that has expired counts as eligible again', () => {
    const ws = workers(['a', 'b'], [0, 0], [NOW, NOW + 1]);
    expect(new PowerOfTwoPicker(mulberry32(1)).pick(ws, NOW)?.id).toBe('a');
    expect(run(new PowerOfTwoPicker(mulberry32(1)), workers(['a', 'b'], [1, 0], [NOW, 0]), 3)).toEqual(['b', 'b', 'b']);
  });

  it('never picks the most loaded of several workers when two are sampled (p2c property)', () => {
    const ws = workers(['a', 'b', 'c'], [0, 0, 100]);
    const picks = run(new PowerOfTwoPicker(mulberry32(99)), ws, 500);
    expect(picks).not.toContain('c');
  });
});

describe('RoundRobinPicker: exact sequences', () => {
  const table: { name: string; ws: () => W[]; exclude?: string[]; expected: (string | undefined)[] }[] = [
    { name: 'in list order', ws: () => workers(['a', 'b', 'c'], [9, 0, 0]), expected: ['a', 'b', 'c', 'a', 'b', 'c', 'a'] },
    { name: 'skips ejected', ws: () => workers(['a', 'b', 'c'], [0, 0, 0], [0, 5000, 0]), expected: ['a', 'c', 'a', 'c', 'a'] },
    { name: 'skips unroutable', ws: () => workers(['a', 'b', 'c', 'd'], [0, 0, 0, 0], undefined, [false, true, true, false]), expected: ['b', 'c', 'b', 'c'] },
    { name: 'skips excluded', ws: () => workers(['a', 'b', 'c'], [0, 0, 0]), exclude: ['c'], expected: ['a', 'b', 'a', 'b'] },
    { name: 'none eligible', ws: () => workers(['a'], [0], undefined, [false]), expected: [undefined, undefined] },
    { name: 'empty pool', ws: () => [], expected: [undefined] },
    {
      name: 'smooth weighted: a half-weight worker every other turn, evenly spread',
      ws: () => weighted(['a', 'b', 'c'], [0, 0, 0], [1, 0.5, 1]),
      expected: ['a', 'c', 'b', 'a', 'c', 'a', 'c', 'b', 'a', 'c'],
    },
    {
      name: 'smooth weighted: a trial budget of one',
      ws: () => weighted(['a', 'b'], [0, 0], [1, 0.25], [Infinity, 1]),
      expected: ['a', 'a', 'b', 'a', 'a', 'a', 'a', 'a', 'a', 'a'],
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      expect(run(new RoundRobinPicker(), c.ws(), c.expected.length, c.exclude)).toEqual(c.expected);
    });
  }

  it('continues after the last pick when the pool shrinks or grows', () => {
    const rr = new RoundRobinPicker();
    const abc = workers(['a', 'b', 'c'], [0, 0, 0]);
    expect(run(rr, abc, 2)).toEqual(['a', 'b']);
    const ab = abc.slice(0, 2);
    expect(run(rr, ab, 3)).toEqual(['a', 'b', 'a']);
    const abcd = [...abc, ...workers(['d'], [0])];
    expect(run(rr, abcd, 4)).toEqual(['b', 'c', 'd', 'a']);
  });
});

describe('createPicker', () => {
  it('builds the configured kind', () => {
    expect(createPicker('p2c').name).toBe('p2c');
    expect(createPicker('round_robin').name).toBe('round_robin');
  });
});
