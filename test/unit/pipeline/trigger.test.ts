// The rollback trigger language: parsing, error positions, normalised form, evaluation.
import { describe, expect, it } from 'vitest';
import { TriggerError, evaluateTrigger, formatTrigger, parseTrigger } from '../../../src/rollout/pipeline/trigger.js';

function err(src: string): string {
  try {
    parseTrigger(src);
  } catch (e) {
    expect(e).toBeInstanceOf(TriggerError);
    return (e as Error).message;
  }
  throw new Error(`parsed: ${src}`);
}

const norm = (s: string) => formatTrigger(parseTrigger(s));

describe('trigger parsing', () => {
  it("parses seed 000's trigger and prints it in normal form", () => {
    expect(norm('error_rate > 0.001 OR p99_latency > 500ms')).toBe('error_rate > 0.001 OR p99_latency > 500ms');
    expect(parseTrigger('error_rate > 0.001 OR p99_latency > 500ms')).toEqual({
      kind: 'or',
      left: { kind: 'cmp', scope: 'active', metric: 'error_rate', op: '>', value: 0.001, column: 1 },
      right: { kind: 'cmp', scope: 'active', metric: 'p99_latency', op: '>', value: 500, column: 23 },
    });
  });

  it('converts units to ms and fractions', () => {
    expect(norm('p99_latency > 0.5s')).toBe('p99_latency > 500ms');
    expect(norm('p99_ttft >= 1.5 s')).toBe('p99_ttft >= 1500ms');
    expect(norm('p99_tpot > 50')).toBe('p99_tpot > 50ms');
    expect(norm('error_rate > 0.1%')).toBe('error_rate > 0.001');
    expect(norm('error_rate > 0.3%')).toBe('error_rate > 0.003');
    expect(norm('requests < 1e3')).toBe('requests < 1000');
  });

  it('AND binds tighter than OR; NOT tightest; parentheses only where needed', () => {
    expect(norm('error_rate > 0.01 or p99_latency > 1s and requests >= 100')).toBe('error_rate > 0.01 OR p99_latency > 1000ms AND requests >= 100');
    expect(norm('(error_rate > 0.01 OR p99_latency > 1s) AND requests >= 100')).toBe('(error_rate > 0.01 OR p99_latency > 1000ms) AND requests >= 100');
    expect(norm('NOT (requests < 10 OR requests > 20)')).toBe('NOT (requests < 10 OR requests > 20)');
    expect(norm('not not requests == 3')).toBe('NOT NOT requests == 3');
    expect(norm('((p50_latency != 2))')).toBe('p50_latency != 2ms');
  });

  it('reads canary./stable. prefixes', () => {
    expect(norm('canary.error_rate > 0.02 AND stable.error_rate < 0.01')).toBe('canary.error_rate > 0.02 AND stable.error_rate < 0.01');
  });

  it('names the column of every error', () => {
    expect(err('error_rate > OR p99_latency > 500ms')).toBe(`column 14: expected a number after '>', got "OR"`);
    expect(err('error_rate >')).toBe(`column 13: expected a number after '>', got the end of the expression`);
    expect(err('eror_rate > 1')).toBe(
      'column 1: unknown metric "eror_rate"; expected one of error_rate, p99_latency, p50_latency, p99_ttft, p99_tpot, requests',
    );
    expect(err('canary.p98_latency > 1')).toBe(
      'column 8: unknown metric "p98_latency"; expected one of error_rate, p99_latency, p50_latency, p99_ttft, p99_tpot, requests',
    );
    expect(err('canry.p99_latency > 1')).toBe('column 1: unknown prefix "canry."; expected "canary." or "stable."');
    expect(err('error_rate 5')).toBe('column 12: expected a comparison operator (>, >=, <, <=, ==, !=) after error_rate, got "5"');
    expect(err('error_rate = 5')).toBe('column 12: "=" is not an operator; write "==" to compare for equality');
    expect(err('error_rate > 5 && requests > 1')).toBe('column 16: "&&" is not an operator here; write AND');
    expect(err('error_rate > 5ms')).toBe(
      'column 15: unit ms does not apply to error_rate; units for error_rate: % (or a fraction such as 0.001 without a unit)',
    );
    expect(err('p99_latency > 5%')).toBe('column 16: unit % does not apply to p99_latency; units for p99_latency: ms or s (no unit means ms)');
    expect(err('p99_latency > 5min')).toBe('column 16: unknown unit "min" after 5; units for p99_latency: ms or s (no unit means ms)');
    expect(err('requests > 5s')).toBe('column 13: unit s does not apply to requests; units for requests: none (a count)');
    expect(err('(error_rate > 1')).toBe('column 16: expected ")" to close the "(" at column 1, got the end of the expression');
    expect(err('error_rate > 1)')).toBe('column 15: unexpected ")" with no "(" to close');
    expect(err('error_rate > 1 requests > 2')).toBe('column 16: expected AND, OR or the end of the expression, got "requests"');
    expect(err('error_rate > 1 AND')).toBe(
      'column 19: expected a metric (error_rate, p99_latency, p50_latency, p99_ttft, p99_tpot, requests), got the end of the expression',
    );
    expect(err('   ')).toBe('column 1: empty expression; expected a comparison such as "error_rate > 0.001"');
    expect(err('error_rate > 1 # comment')).toBe('column 16: unexpected character "#"');
    expect(err('error_rate > 0.001 OR p99_latency >')).toBe(`column 36: expected a number after '>', got the end of the expression`);
  });
});

describe('trigger evaluation', () => {
  const seed = parseTrigger('error_rate > 0.001 OR p99_latency > 500ms');

  it('fires when either side is over, and says which', () => {
    const e = evaluateTrigger(seed, { active: { error_rate: 0.002, p99_latency: 120, requests: 1000 } });
    expect(e.fired).toBe(true);
    expect(e.summary).toBe('fired: error_rate > 0.001 (measured 0.002)');
    expect(e.checks).toEqual([
      { expr: 'error_rate > 0.001', value: 0.002, result: true },
      { expr: 'p99_latency > 500ms', value: 120, result: false },
    ]);
    expect(evaluateTrigger(seed, { active: { error_rate: 0, p99_latency: 501 } }).fired).toBe(true);
  });

  it('does not fire at the threshold or below', () => {
    const e = evaluateTrigger(seed, { active: { error_rate: 0.001, p99_latency: 500 } });
    expect(e).toMatchObject({ fired: false, result: false, summary: 'not fired' });
  });

  it('no data is unknown, never fires, and says why', () => {
    const e = evaluateTrigger(seed, { active: { error_rate: null, p99_latency: NaN, requests: 0 } });
    expect(e.fired).toBe(false);
    expect(e.result).toBe('unknown');
    expect(e.summary).toBe('not fired, no data: error_rate > 0.001 (no data for error_rate); p99_latency > 500ms (no data for p99_latency)');
    expect(evaluateTrigger(parseTrigger('canary.error_rate > 0.01'), { active: { error_rate: 0.5 } }).checks[0]).toEqual({
      expr: 'canary.error_rate > 0.01',
      value: null,
      result: 'unknown',
      reason: 'no canary version to measure',
    });
  });

  it('uses three-valued logic: NOT of no data stays unknown; a known side decides AND/OR', () => {
    const noData = { active: { requests: 0 } };
    expect(evaluateTrigger(parseTrigger('NOT p99_latency < 100'), noData).fired).toBe(false);
    expect(evaluateTrigger(parseTrigger('p99_latency > 100 OR requests == 0'), noData).fired).toBe(true);
    expect(evaluateTrigger(parseTrigger('p99_latency > 100 AND requests > 5'), noData).result).toBe(false);
    expect(evaluateTrigger(parseTrigger('p99_latency > 100 AND requests == 0'), noData).result).toBe('unknown');
  });

  it('compares canary with stable scopes separately', () => {
    const t = parseTrigger('canary.p99_ttft > 400 AND stable.p99_ttft < 400');
    expect(evaluateTrigger(t, { canary: { p99_ttft: 450 }, stable: { p99_ttft: 300 } }).fired).toBe(true);
    expect(evaluateTrigger(t, { canary: { p99_ttft: 450 }, stable: { p99_ttft: 450 } }).fired).toBe(false);
  });

  it('supports every operator', () => {
    const at = (src: string) => evaluateTrigger(parseTrigger(src), { active: { requests: 10 } }).fired;
    expect([at('requests > 10'), at('requests >= 10'), at('requests < 10'), at('requests <= 10'), at('requests == 10'), at('requests != 10')]).toEqual([
      false,
      true,
      false,
      true,
      true,
      false,
    ]);
  });
});
