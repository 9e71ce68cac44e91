// The worker health state machine, pure: sequences of observations → states, breaker and routing weight.
import { describe, expect, it } from 'vitest';
import { isTrial, newHealth, routingWeight, step } from '../../../src/health/machine.js';
import type { MachineSettings, Observation, WorkerHealth } from '../../../src/health/machine.js';

const S: MachineSettings = {
  failureThreshold: 3,
  healthyAfter: 2,
  recoveryTimeoutMs: 60_000,
  recoveryTimeoutMaxMs: 600_000,
  halfOpenProbes: 2,
  halfOpenRequests: 3,
  deadAfterFailedRecoveries: 2,
  baselineAlpha: 0.1,
};

const pass: Observation = { kind: 'probe_pass', latencyMs: 20 };
const timeout: Observation = { kind: 'probe_fail', reason: 'timeout', detail: 't' };
const mismatch: Observation = { kind: 'probe_fail', reason: 'token_mismatch', detail: 'm' };
const slow: Observation = { kind: 'probe_fail', reason: 'latency_spike', detail: 's' };
const ok: Observation = { kind: 'traffic_ok' };
const err: Observation = { kind: 'traffic_fail', reason: 'error', detail: '5xx', rateTripped: false };
const tick: Observation = { kind: 'tick' };

/** Run observations at the given times; the states after each, as `state/breaker/weight`. */
function run(start: WorkerHealth, seq: [number, Observation][], settings = S, admitAfter = 3): { h: WorkerHealth; trace: string[] } {
  let h = start;
  const trace: string[] = [];
  for (const [now, o] of seq) {
    h = step(h, o, { now, settings, admitAfter });
    trace.push(`${h.state}/${h.breaker}/${routingWeight(h, 0.1)}`);
  }
  return { h, trace };
}

describe('worker health machine', () => {
  const table: { name: string; start?: 'healthy' | 'pending'; seq: [number, Observation][]; expected: string[] }[] = [
    {
      name: 'one hard failure → SUSPICIOUS at half weight; three → UNHEALTHY, breaker open, weight 0',
      seq: [
        [1, timeout],
        [2, timeout],
        [3, timeout],
      ],
      expected: ['suspicious/closed/0.5', 'suspicious/closed/0.5', 'unhealthy/open/0'],
    },
    {
      name: 'SUSPICIOUS comes back after healthy_after passes in a row, not one (a flapping worker does not oscillate)',
      seq: [
        [1, timeout],
        [2, pass],
        [3, timeout],
        [4, pass],
        [5, pass],
      ],
      expected: ['suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5', 'healthy/closed/1'],
    },
    {
      name: 'a probe answering wrong tokens is silent corruption: DRAINING at once, then DEAD, never recovered',
      seq: [
        [1, mismatch],
        [2, { kind: 'drained' }],
        [3, pass],
      ],
      expected: ['draining/open/0', 'dead/open/0', 'dead/open/0'],
    },
    {
      name: 'a latency spike is soft: SUSPICIOUS (weight halved), never unhealthy, however many',
      seq: [
        [1, slow],
        [2, slow],
        [3, slow],
        [4, slow],
      ],
      expected: ['suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5'],
    },
    {
      name: 'open → half-open after the recovery timeout; probes, then a trickle of real traffic closes it',
      seq: [
        [0, timeout],
        [0, timeout],
        [0, timeout],
        [59_999, tick],
        [60_000, tick],
        [60_001, pass],
        [60_002, pass],
        [60_003, ok],
        [60_004, ok],
        [60_005, ok],
      ],
      expected: [
        'suspicious/closed/0.5',
        'suspicious/closed/0.5',
        'unhealthy/open/0',
        'unhealthy/open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0.1',
        'unhealthy/half_open/0.1',
        'unhealthy/half_open/0.1',
        'healthy/closed/1',
      ],
    },
    {
      name: 'a failed recovery reopens with the timeout doubled; the second gives it up (DRAINING → DEAD)',
      seq: [
        [0, timeout],
        [0, timeout],
        [0, timeout],
        [60_000, tick],
        [60_001, timeout],
        [179_000, tick],
        [180_001, tick],
        [180_002, timeout],
      ],
      expected: [
        'suspicious/closed/0.5',
        'suspicious/closed/0.5',
        'unhealthy/open/0',
        'unhealthy/half_open/0',
        'unhealthy/open/0',
        'unhealthy/open/0',
        'unhealthy/half_open/0',
        'draining/open/0',
      ],
    },
    {
      name: 'a trial request that fails is a failed recovery',
      seq: [
        [0, timeout],
        [0, timeout],
        [0, timeout],
        [60_000, tick],
        [60_001, pass],
        [60_002, pass],
        [60_003, err],
      ],
      expected: [
        'suspicious/closed/0.5',
        'suspicious/closed/0.5',
        'unhealthy/open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0.1',
        'unhealthy/open/0',
      ],
    },
    {
      name: 'a trial with no traffic closes after as many passing probes again',
      seq: [
        [0, timeout],
        [0, timeout],
        [0, timeout],
        [60_000, tick],
        [60_001, pass],
        [60_002, pass],
        [90_000, pass],
        [120_000, pass],
      ],
      expected: [
        'suspicious/closed/0.5',
        'suspicious/closed/0.5',
        'unhealthy/open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0',
        'unhealthy/half_open/0.1',
        'unhealthy/half_open/0.1',
        'healthy/closed/1',
      ],
    },
    {
      name: 'failed requests change nothing alone; a success ends their run, so no breaker',
      seq: [
        [1, err],
        [2, err],
        [3, ok],
        [4, err],
        [5, err],
      ],
      expected: ['healthy/closed/1', 'healthy/closed/1', 'healthy/closed/1', 'healthy/closed/1', 'healthy/closed/1'],
    },
    {
      name: 'three failed requests in a row open the breaker (a crash, a hang)',
      seq: [
        [1, err],
        [2, err],
        [3, err],
      ],
      expected: ['healthy/closed/1', 'healthy/closed/1', 'unhealthy/open/0'],
    },
    {
      name: 'a failure rate over the window opens the breaker without three in a row',
      seq: [
        [1, err],
        [2, { kind: 'traffic_fail', reason: 'error', detail: '5xx', rateTripped: true }],
      ],
      expected: ['healthy/closed/1', 'unhealthy/open/0'],
    },
    {
      name: 'failed probes add up until the worker is HEALTHY again: a flapping worker opens its breaker on the third',
      seq: [
        [1, timeout],
        [2, pass],
        [3, timeout],
        [4, pass],
        [5, timeout],
      ],
      expected: ['suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5', 'suspicious/closed/0.5', 'unhealthy/open/0'],
    },
    {
      name: 'a process exit is DEAD at once',
      seq: [[1, { kind: 'exited', detail: 'SIGKILL' }]],
      expected: ['dead/open/0'],
    },
    {
      name: 'PENDING takes no traffic until every prompt of the set passed once in a row',
      start: 'pending',
      seq: [
        [1, pass],
        [2, pass],
        [3, pass],
      ],
      expected: ['pending/closed/0', 'pending/closed/0', 'healthy/closed/1'],
    },
    {
      name: 'PENDING that cannot pass its probes is DEAD after the failure threshold (to be replaced again)',
      start: 'pending',
      seq: [
        [1, timeout],
        [2, timeout],
        [3, timeout],
      ],
      expected: ['pending/closed/0', 'pending/closed/0', 'dead/open/0'],
    },
    {
      name: 'PENDING answering wrong tokens is DEAD at once',
      start: 'pending',
      seq: [[1, mismatch]],
      expected: ['dead/open/0'],
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      expect(run(newHealth(c.start ?? 'healthy', 0), c.seq).trace).toEqual(c.expected);
    });
  }

  it('the trial budget counts down with each successful request', () => {
    const { h } = run(newHealth('healthy', 0), [
      [0, timeout],
      [0, timeout],
      [0, timeout],
      [60_000, tick],
      [60_001, pass],
      [60_002, pass],
      [60_003, ok],
    ]);
    expect(isTrial(h)).toBe(true);
    expect(h.trialLeft).toBe(2);
  });

  it('an observation that changes nothing returns the same object (nothing to persist or route)', () => {
    const h = newHealth('healthy', 0);
    expect(step(h, ok, { now: 1, settings: S, admitAfter: 1 })).toBe(h);
    expect(step(h, tick, { now: 1, settings: S, admitAfter: 1 })).toBe(h);
  });

  it('the baseline is an EMA of passing probes (seed 004: alpha 0.1)', () => {
    let h = newHealth('healthy', 0);
    h = step(h, { kind: 'probe_pass', latencyMs: 100 }, { now: 1, settings: S, admitAfter: 1 });
    h = step(h, { kind: 'probe_pass', latencyMs: 200 }, { now: 2, settings: S, admitAfter: 1 });
    expect(h.baselineMs).toBeCloseTo(110, 10);
  });

  it('with dead_after infinite (a fixed endpoint) failed recoveries only back off, capped', () => {
    const inf = { ...S, deadAfterFailedRecoveries: Infinity };
    let h = newHealth('healthy', 0);
    let now = 0;
    for (let i = 0; i < 3; i++) h = step(h, timeout, { now, settings: inf, admitAfter: 1 });
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      waits.push((h.openUntil as number) - now);
      now = h.openUntil as number;
      h = step(h, tick, { now, settings: inf, admitAfter: 1 });
      h = step(h, timeout, { now, settings: inf, admitAfter: 1 });
    }
    expect(h.state).toBe('unhealthy');
    expect(waits).toEqual([60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
  });
});
