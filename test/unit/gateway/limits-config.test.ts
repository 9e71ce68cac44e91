// What bounds clients and waits in glidepath.yaml: gateway.worker_queue_max, queue_timeout_ms, send_timeout_ms and the limits section — defaults, YAML names, errors with paths.
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
    const g = parseConfigText(
      ['gateway: { worker_queue_max: 0, queue_timeout_ms: 5000 }', 'models: [{ name: m, versions: [{ id: v1 }] }]', ''].join('\n'),
    ).gateway;
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

describe('send timeout and admission config', () => {
  it('defaults: a 60 s send timeout; data plane ceiling auto and per-client limits off; the admin API generous', () => {
    const c = parseConfig(minimal);
    expect(c.gateway.sendTimeoutMs).toBe(60_000);
    expect(c.limits.dataPlane).toEqual({ maxConnections: 0, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 });
    expect(c.limits.admin).toEqual({ maxConnections: 256, perClientConnections: 64, perClientRps: 100, perClientBurst: 200 });
  });

  it('a rate without a burst gets the rate rounded up as its burst (at least 1)', () => {
    const c = parseConfigText(
      [
        'gateway: { send_timeout_ms: 0 }',
        'limits: { data_plane: { per_client_requests_per_s: 2.5 }, admin: { per_client_requests_per_s: 0.2, per_client_burst: 0 } }',
        'models: [{ name: m, versions: [{ id: v1 }] }]',
        '',
      ].join('\n'),
    );
    expect(c.gateway.sendTimeoutMs).toBe(0);
    expect(c.limits.dataPlane).toMatchObject({ perClientRps: 2.5, perClientBurst: 3 });
    expect(c.limits.admin).toMatchObject({ perClientRps: 0.2, perClientBurst: 1 });
  });

  it('bad values and unknown keys are reported with their paths, all at once', () => {
    let err: unknown;
    try {
      parseConfig({
        gateway: { send_timeout_ms: -5 },
        limits: { data_plane: { max_connections: 1.5, per_client_requests_per_s: -1 }, admin: { per_client_burst: 'x', nope: 1 } },
        ...minimal,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const paths = (err as ConfigError).issues.map((i) => i.path).sort();
    expect(paths).toEqual([
      'gateway.send_timeout_ms',
      'limits.admin.nope',
      'limits.admin.per_client_burst',
      'limits.data_plane.max_connections',
      'limits.data_plane.per_client_requests_per_s',
    ]);
    expect((err as ConfigError).issues.find((i) => i.path === 'limits.admin.nope')?.message).toBe('unknown key "nope"');
  });
});
