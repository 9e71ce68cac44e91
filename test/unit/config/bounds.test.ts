// The config's upper bounds (a review of input validation): durations no timer can keep (past 2^31 - 1
// ms Node fires after 1 ms), periods past a day, sticky salts that are empty or long, canary stage
// lists past 20 — each refused with its path; the largest values allowed are taken.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { configIssues } from '../../helpers/config-issues.js';

const model = (o: Record<string, unknown> = {}) => ({ name: 'm', versions: [{ id: 'v1' }], ...o });

describe('durations', () => {
  // regression: models[].monitor.interval_ms had no upper bound: above 2^31 - 1 the monitor looked every ms
  it('refuses a monitor interval past a day, and a timeout past what a timer waits, naming each key', () => {
    expect(
      configIssues({
        models: [model({ monitor: { interval_ms: 3_000_000_000 }, health: { timeout_ms: 2 ** 31 } })],
        gateway: { first_token_timeout_ms: 2 ** 31, send_timeout_ms: 2 ** 40 },
        scheduler: { interval_ms: 86_400_001 },
      }),
    ).toEqual([
      { path: 'gateway.first_token_timeout_ms', message: 'expected at most 2147483647 ms (~24.8 days, the longest a timer waits), got 2147483648' },
      { path: 'gateway.send_timeout_ms', message: 'expected at most 2147483647 ms (~24.8 days, the longest a timer waits), got 1099511627776' },
      { path: 'scheduler.interval_ms', message: 'expected at most 86400000 ms (a day), got 86400001' },
      { path: 'models[0].health.timeout_ms', message: 'expected at most 2147483647 ms (~24.8 days, the longest a timer waits), got 2147483648' },
      { path: 'models[0].monitor.interval_ms', message: 'expected at most 86400000 ms (a day), got 3000000000' },
    ]);
  });

  it('refuses a simulated time, a rolling limit past a week and an etcd lease past a day', () => {
    const got = configIssues({
      models: [model({ versions: [{ id: 'v1', provider: { kind: 'sim', sim: { load_time_ms: 1e12 } } }], rolling: { step_timeout_ms: 8 * 86_400_000 } })],
      store: { kind: 'etcd', endpoints: ['http://127.0.0.1:2379'], lease_ttl_s: 86_401 },
    });
    expect(got).toContainEqual({ path: 'models[0].versions[0].provider.sim.load_time_ms', message: expect.stringMatching(/^expected at most 2147483647 ms/) });
    expect(got).toContainEqual({ path: 'models[0].rolling.step_timeout_ms', message: 'expected at most 604800000 ms (7 days), got 691200000' });
    expect(got).toContainEqual({ path: 'store.lease_ttl_s', message: 'expected at most 86400 s (a day), got 86401' });
  });

  it('takes the largest allowed', () => {
    const c = parseConfig({ models: [model({ monitor: { interval_ms: 86_400_000 } })], gateway: { request_timeout_ms: 2_147_483_647 } });
    expect(c.models[0]?.monitor?.intervalMs).toBe(86_400_000);
    expect(c.gateway.requestTimeoutMs).toBe(2_147_483_647);
  });
});

describe('sticky salts and canary stages', () => {
  // the admin API took "" and megabyte salts for a route while the config refused an empty gateway salt: both now agree
  it('refuses an empty or over-long sticky salt, the gateway’s and a route’s', () => {
    expect(configIssues({ models: [model({ route: { weights: { v1: 1 }, sticky_salt: '' } })], gateway: { sticky_salt: 'x'.repeat(257) } })).toEqual([
      { path: 'gateway.sticky_salt', message: 'expected a sticky salt of at most 256 characters, got 257 characters' },
      { path: 'models[0].route.sticky_salt', message: 'expected a non-empty sticky salt, got ""' },
    ]);
    expect(parseConfig({ models: [model({ route: { weights: { v1: 1 }, sticky_salt: 's'.repeat(256) } })] }).models[0]?.route.stickySalt).toHaveLength(256);
  });

  it('caps a canary at 20 stages, as the admin API does', () => {
    const stages = Array.from({ length: 21 }, (_, i) => (i + 1) * 4.75);
    expect(configIssues({ models: [model({ canary: { stages } })] })).toEqual([
      { path: 'models[0].canary.stages', message: 'expected at most 20 stages, got a list' },
    ]);
  });
});
