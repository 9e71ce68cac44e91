// `metrics_source:` in glidepath.yaml: local by default, Prometheus with its documented defaults, and
// every refusal naming its field.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { DEFAULTS } from '../../../src/defaults.js';
import { configIssues } from '../../helpers/config-issues.js';

const models = [{ name: 'chat', versions: [{ id: 'v1', provider: { kind: 'sim' } }] }];

const issues = (metrics_source: unknown) => configIssues({ models, metrics_source });

describe('metrics_source config', () => {
  it('is local when absent', () => {
    expect(parseConfig({ models }).metricsSource).toEqual({ kind: 'local' });
    expect(parseConfig({ models, metrics_source: { kind: 'local' } }).metricsSource).toEqual({ kind: 'local' });
  });

  it('prometheus: the URL without its trailing slash, the defaults of DEFAULTS.metricsSource', () => {
    const c = parseConfig({ models, metrics_source: { kind: 'prometheus', url: 'http://prom:9090/' } });
    const D = DEFAULTS.metricsSource;
    expect(c.metricsSource).toEqual({
      kind: 'prometheus',
      url: 'http://prom:9090',
      timeoutMs: D.timeoutMs,
      maxResponseBytes: D.maxResponseBytes,
      monitorWindowMs: D.monitorWindowMs,
      maxWindowMs: D.maxWindowMs,
      labels: {},
      bearerTokenEnv: undefined,
      basicAuth: undefined,
    });
  });

  it('prometheus: every setting given', () => {
    const c = parseConfig({
      models,
      metrics_source: {
        kind: 'prometheus',
        url: 'https://prom.example/prefix',
        timeout_ms: 900,
        max_response_bytes: 65_536,
        monitor_window_ms: 60_000,
        max_window_ms: 3_600_000,
        labels: { job: 'glidepath', cluster: 'eu-1' },
        basic_auth: { username: 'glide', password_env: 'PROM_PASSWORD' },
      },
    });
    expect(c.metricsSource).toMatchObject({
      url: 'https://prom.example/prefix',
      timeoutMs: 900,
      maxResponseBytes: 65_536,
      monitorWindowMs: 60_000,
      maxWindowMs: 3_600_000,
      labels: { job: 'glidepath', cluster: 'eu-1' },
      basicAuth: { username: 'glide', passwordEnv: 'PROM_PASSWORD' },
    });
  });

  it('refuses a bad kind, a missing or bad URL, bad numbers and labels, naming the field', () => {
    expect(issues({ kind: 'graphite' })).toEqual([
      { path: 'metrics_source.kind', message: expect.stringContaining('"local" or "prometheus", got "graphite"') as unknown },
    ]);
    expect(issues({ kind: 'prometheus' })).toEqual([{ path: 'metrics_source.url', message: 'required' }]);
    expect(issues({ kind: 'prometheus', url: 'ftp://x' })).toEqual([{ path: 'metrics_source.url', message: 'expected an http(s) URL, got "ftp://x"' }]);
    expect(issues({ kind: 'prometheus', url: 'http://p:9090', timeout_ms: 0, max_window_ms: 1.5 })).toEqual([
      { path: 'metrics_source.timeout_ms', message: 'expected a positive integer, got 0' },
      { path: 'metrics_source.max_window_ms', message: 'expected a positive integer, got 1.5' },
    ]);
    expect(issues({ kind: 'prometheus', url: 'http://p:9090', labels: { job: 'x', version: 'x', 'bad-name': 'y' } })).toEqual([
      {
        path: 'metrics_source.labels',
        message: `label "version" is set by Glidepath's own queries (__name__, model, version, le, code, kind); expected a Prometheus label name, got "bad-name"`,
      },
    ]);
    expect(issues({ kind: 'local', url: 'http://p:9090' })[0]?.path).toBe('metrics_source.url');
  });

  it('refuses a token in the file and two kinds of auth at once', () => {
    expect(issues({ kind: 'prometheus', url: 'http://p:9090', bearer_token: 'secret' })[0]?.message).toContain('bearer_token');
    expect(issues({ kind: 'prometheus', url: 'http://p:9090', bearer_token_env: 'TOKEN', basic_auth: { username: 'u', password_env: 'P' } })).toEqual([
      { path: 'metrics_source.basic_auth', message: 'set bearer_token_env or basic_auth, not both' },
    ]);
    expect(issues({ kind: 'prometheus', url: 'http://p:9090', bearer_token_env: 'not a name' })).toEqual([
      { path: 'metrics_source.bearer_token_env', message: 'expected an environment variable name, got "not a name"' },
    ]);
  });
});
