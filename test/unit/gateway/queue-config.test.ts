// gateway.worker_queue_max and gateway.queue_timeout_ms: defaults, YAML names, errors with paths.
import { describe, expect, it } from 'vitest';
import { parseConfig, parseConfigText } from '../../../src/config/load.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { ConfigError } from '../../../src/errors.js';

const minimal = { models: [{ name: 'm', versions: [{ id: 'v1' }] }] };

describe('worker queue config', () => {
  it('defaults come from DEFAULTS.gateway', () => {
    const g = parseConfig(minimal).gateway;
    expect([g.workerQueueMax, g.queueTimeoutMs]).toEqual([DEFAULTS.gateway.workerQueueMax, DEFAULTS.gateway.queueTimeoutMs]);
    expect([g.workerQueueMax, g.queueTimeoutMs]).toEqual([256, 30_000]);
  });

  it('snake_case in YAML, camelCase in GatewayConfig; 0 waiting requests is allowed', () => {
    const g = parseConfigText(['gateway: { worker_queue_max: 0, queue_timeout_ms: 5000 }', 'models: [{ name: m, versions: [{ id: v1 }] }]', ''].join('\n')).gateway;
    expect([g.workerQueueMax, g.queueTimeoutMs]).toEqual([0, 5000]);
  });

  it('bad values are reported with their paths, all at once', () => {
    let err: unknown;
    try {
      parseConfig({ gateway: { worker_queue_max: -1, queue_timeout_ms: 0 }, ...minimal });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues;
    expect(issues.map((i) => i.path).sort()).toEqual(['gateway.queue_timeout_ms', 'gateway.worker_queue_max']);
    expect(issues.find((i) => i.path === 'gateway.worker_queue_max')?.message).toBe('expected a non-negative integer, got -1');
  });
});
