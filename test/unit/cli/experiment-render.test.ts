// Regression: `experiment analyze`'s table printed raw arrays and JSON (`hl_ci [-16.10000000000001,
// -4.3999999999999915]`, `welch {"t":-3.5544741526090955,…}`). The analysis is rendered with
// sensible precision: intervals as [lo, hi], p-values, the verdict in words.
import { describe, expect, it } from 'vitest';
import { renderExperiment } from '../../../src/cli/experiment/index.js';

type View = Parameters<typeof renderExperiment>[0];

/** The analysis as the admin API sends it (an analyzeExperiment result through JSON). */
const ANALYZED = JSON.parse(
  '{"status":"analyzed","n_a":60,"n_b":55,"mean_a":126.04333333333334,"mean_b":115.93454545454544,"std_a":15.391053605047523,"std_b":15.08980791893333,"median_a":126.65,"median_b":114.8,"p_value":0.001210494155011843,"p_value_sequential":0.04311873018031966,"p_value_decision":0.04311873018031966,"alpha":0.05,"significant":true,"decision":"b_better","effect_size":-0.6629653252117068,"effect_size_seed":-0.6632551520748063,"win_rate":0.3246969696969697,"hl_shift":-10.099999999999994,"hl_ci":[-16.10000000000001,-4.3999999999999915],"hl_conf_level":0.95,"welch":{"t":-3.5544741526090955,"df":112.47914958785549,"p":0.0005550165682015424},"samples_needed_for_power":36,"samples_needed_sequential":72,"additional_samples_needed":17,"min_detectable_effect":10.108787878787894,"method":"msprt","at":1}',
) as NonNullable<View['result']>;
const view = (result: View['result'], extra: Partial<View> = {}): View => ({
  id: 'exp-1',
  model: 'chat',
  a: 'v1',
  b: 'v2',
  split: 0.5,
  metric: 'latency',
  phase: 'running',
  stopped_reason: null,
  result,
  ...extra,
});

describe("experiment analyze's table prints raw arrays and JSON", () => {
  it('renders both versions, then the verdict, p-values, the interval as [lo, hi] and the samples needed', () => {
    expect(renderExperiment(view(ANALYZED))).toBe(
      [
        'exp-1  chat: A=v1 vs B=v2 on latency, 50% to B  RUNNING',
        '      N   MEAN ms  MEDIAN ms  STD ms',
        'A v1  60  126.0    126.7      15.39',
        'B v2  55  115.9    114.8      15.09',
        '',
        'decision      B (v2) is better: lower latency, significant at α 0.05',
        'p-value       0.043 always-valid (mSPRT; 0.0012 for a single look)',
        'shift B − A   -10.1 ms [-16.1, -4.4] (Hodges-Lehmann, 95 % interval)',
        "effect size   d -0.66 (Cohen's; seed 001's formula -0.66)",
        'win rate      P(B > A) 0.32',
        'Welch t-test  t -3.55, df 112, p 0.00056',
        'samples       72 per version to detect 10.11 ms with the configured power (36 for a single look): 17 more',
        '',
      ].join('\n'),
    );
  });

  it('no JSON, no field names, no raw floats', () => {
    const text = renderExperiment(view(ANALYZED));
    expect(text).not.toMatch(/[{}"]/);
    expect(text).not.toMatch(/\d{6,}/);
    expect(text).not.toMatch(/_/); // no field names such as hl_ci or p_value_sequential
  });

  it('a fixed-sample quality experiment: no unit, A better, a tiny p-value floored, enough samples', () => {
    const r = {
      ...ANALYZED,
      method: 'fixed',
      decision: 'a_better',
      p_value: 3e-9,
      p_value_sequential: 3e-9,
      hl_shift: -0.0712,
      hl_ci: [-0.1, -0.04],
      additional_samples_needed: 0,
      min_detectable_effect: 0.05,
    } as NonNullable<View['result']>;
    const text = renderExperiment(view(r, { metric: 'quality' }));
    expect(text).toMatch(/^\s+N\s+MEAN\s+MEDIAN\s+STD$/m);
    expect(text).toContain('decision      A (v1) is better: higher quality, significant at α 0.05\n');
    expect(text).toContain('p-value       < 0.0001 (Mann-Whitney, a single look)\n');
    expect(text).toContain('shift B − A   -0.0712 [-0.1, -0.04] (Hodges-Lehmann, 95 % interval)\n');
    expect(text).toContain('samples       36 per version to detect 0.05 with the configured power: enough already\n');
  });

  it('too few samples: the verdict says so and what is still needed, without a row of dashes', () => {
    const r = JSON.parse(
      JSON.stringify({
        ...ANALYZED,
        status: 'insufficient_data',
        decision: 'insufficient_data',
        n_a: 10,
        n_b: 9,
        p_value: NaN,
        p_value_sequential: NaN,
        effect_size: NaN,
        win_rate: NaN,
        hl_shift: NaN,
        hl_ci: [NaN, NaN],
        welch: { t: NaN, df: NaN, p: NaN },
        additional_samples_needed: 63,
      }),
    ) as NonNullable<View['result']>;
    const text = renderExperiment(view(r));
    expect(text.split('\n').slice(5)).toEqual([
      'decision  not enough samples to analyse yet (10 and 9 so far)',
      'samples   72 per version to detect 10.11 ms with the configured power (36 for a single look): 63 more',
      '',
    ]);
  });

  it('before any analysis it says how to get one', () => {
    expect(renderExperiment(view(null))).toBe('exp-1  chat: A=v1 vs B=v2 on latency, 50% to B  RUNNING\nno analysis yet: run `glidepath experiment analyze`\n');
  });
});
