// Config keys of the weight cache and monitored rollback: defaults, normalisation, errors with paths.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig, parseConfigText } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';

const minimal = { models: [{ name: 'm', versions: [{ id: 'v1' }] }] };

describe('cache and monitor config', () => {
  it('defaults: cache under the data directory, monitor off with seed 000 interval', () => {
    const cfg = parseConfig(minimal);
    expect(cfg.cache).toEqual({ dir: path.join('.glidepath', 'cache'), maxVersions: 3, maxBytes: 1024 ** 4 });
    expect(cfg.models[0]?.monitor).toEqual({ enabled: false, maxErrorRate: 0.05, maxP99LatencyMs: 30_000, minRequests: 20, intervalMs: 5_000 });
  });

  it('relative cache and data directories resolve against the config file', () => {
    const yaml = [
      'server: { data_dir: state }',
      'cache: { max_versions: 5 }',
      'models:',
      '  - name: m',
      '    versions: [{ id: v1 }]',
      '    monitor: { enabled: true, max_error_rate: 0.01 }',
      '',
    ].join('\n');
    const cfg = parseConfigText(yaml, '/etc/glidepath/glidepath.yaml');
    expect(cfg.cache.dir).toBe('/etc/glidepath/state/cache');
    expect(cfg.cache.maxVersions).toBe(5);
    expect(cfg.models[0]?.monitor).toMatchObject({ enabled: true, maxErrorRate: 0.01, intervalMs: 5_000 });
    const own = parseConfigText(['cache: { dir: weights }', 'models: [{ name: m, versions: [{ id: v1 }] }]', ''].join('\n'), '/srv/gp/glidepath.yaml');
    expect(own.cache.dir).toBe('/srv/gp/weights');
  });

  it('bad values are reported with their paths, all at once', () => {
    let err: unknown;
    try {
      parseConfig({ cache: { max_versions: 0, extra: 1 }, models: [{ name: 'm', versions: [{ id: 'v1' }], monitor: { max_error_rate: 2, interval_ms: -1 } }] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const paths = (err as ConfigError).issues.map((i) => i.path).sort();
    expect(paths).toEqual(['cache.extra', 'cache.max_versions', 'models[0].monitor.interval_ms', 'models[0].monitor.max_error_rate']);
  });
});
