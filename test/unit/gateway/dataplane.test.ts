// DataPlane's control surface: routes are validated and swapped whole (a bad one leaves the old in
// force), pools and workers, readiness. No HTTP here.
import { afterEach, describe, expect, it } from 'vitest';
import { GlidepathError } from '../../../src/errors.js';
import { DataPlane } from '../../../src/gateway/dataplane.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';
import { defaultGatewayConfig } from '../../helpers/gateway.js';

const planes: DataPlane[] = [];
afterEach(async () => {
  while (planes.length) await planes.pop()!.close();
});

function plane(): DataPlane {
  const dp = new DataPlane(defaultGatewayConfig(), new Telemetry({ windowMaxSamples: 100, windowMaxAgeMs: 60_000 }));
  planes.push(dp);
  dp.addModel({
    model: 'm',
    versions: [
      { id: 'v1', cardChecksum: 'c1' },
      { id: 'v2', cardChecksum: 'c1' },
      { id: 'v3', cardChecksum: 'c1' },
    ],
    route: { model: 'm', weights: { v1: 1 } },
  });
  // ports nobody listens on: nothing here sends a request
  dp.setWorkers('m', 'v1', [{ id: 'a', url: 'http://127.0.0.1:9' }]);
  dp.setWorkers('m', 'v2', [{ id: 'b', url: 'http://127.0.0.1:9' }]);
  return dp;
}

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GlidepathError);
    return (err as GlidepathError).code;
  }
  throw new Error('expected an error');
}

describe('setRoute', () => {
  it('swaps the route whole and bumps the revision', () => {
    const dp = plane();
    const before = dp.model('m').split;
    const r = dp.setRoute({ model: 'm', weights: { v1: 95, v2: 5 } });
    expect(r.revision).toBe(2);
    expect(dp.model('m').route).toBe(r);
    expect(dp.model('m').split).not.toBe(before);
    expect(r.versions.map((v) => [v.id, v.weight])).toEqual([
      ['v2', 0.05],
      ['v1', 0.95],
    ]);
  });

  const bad: [string, Record<string, number>, string, RegExp][] = [
    ['negative weight', { v1: 1.5, v2: -0.5 }, 'invalid_route', /must not be negative/],
    ['NaN weight', { v1: NaN }, 'invalid_route', /finite/],
    ['fractions not summing to 1', { v1: 0.5, v2: 0.2 }, 'invalid_route', /sum to 1/],
    ['unknown version', { v1: 0.5, v9: 0.5 }, 'invalid_route', /unknown version "v9"/],
    ['no weight at all', { v1: 0 }, 'invalid_route', /sum to 0/],
    ['weight on a version without workers', { v1: 0.5, v3: 0.5 }, 'route_no_workers', /v3/],
  ];
  for (const [name, weights, code, msg] of bad) {
    it(`refuses ${name} and keeps the old route`, () => {
      const dp = plane();
      const old = dp.setRoute({ model: 'm', weights: { v1: 0.9, v2: 0.1 } });
      const oldSplit = dp.model('m').split;
      let err: unknown;
      try {
        dp.setRoute({ model: 'm', weights });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(GlidepathError);
      expect((err as GlidepathError).code).toBe(code);
      expect((err as GlidepathError).status).toBe(400);
      expect((err as Error).message).toMatch(msg);
      expect(dp.model('m').route).toBe(old);
      expect(dp.model('m').split).toBe(oldSplit);
    });
  }

  it('refuses a stable that is not in the weights', () => {
    const dp = plane();
    expect(codeOf(() => dp.setRoute({ model: 'm', weights: { v1: 1 }, stable: 'v2' }))).toBe('invalid_route');
  });

  it('compare-and-set on the revision', () => {
    const dp = plane();
    expect(codeOf(() => dp.setRoute({ model: 'm', weights: { v2: 1 } }, 7))).toBe('route_revision_conflict');
    expect(dp.model('m').route.revision).toBe(1);
    expect(dp.setRoute({ model: 'm', weights: { v2: 1 } }, 1).revision).toBe(2);
  });

  it('publishes the weights to /metrics and zeroes versions that left the route', async () => {
    const dp = plane();
    dp.setRoute({ model: 'm', weights: { v1: 0.75, v2: 0.25 } });
    dp.setRoute({ model: 'm', weights: { v1: 1 } });
    const text = await dp.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_route_weight{model="m",version="v1"} 1');
    expect(text).toContain('glidepath_route_weight{model="m",version="v2"} 0');
    expect(text).toContain('glidepath_route_revision{model="m"} 3');
  });

  it('restoreRoute keeps the persisted revision and zeroes the weights it replaced (regression: stale gauge)', async () => {
    const dp = plane();
    expect(dp.restoreRoute({ model: 'm', weights: { v2: 1 } }, 41).revision).toBe(41);
    const text = await dp.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_route_weight{model="m",version="v2"} 1');
    expect(text).toContain('glidepath_route_weight{model="m",version="v1"} 0');
    expect(text).toContain('glidepath_route_revision{model="m"} 41');
  });

  it('publishes worker_up for routable workers and drops removed ones', async () => {
    const dp = plane();
    let text = await dp.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_worker_up{model="m",version="v1",worker="a"} 1');
    dp.setWorkerRoutable('m', 'v1', 'a', false);
    text = await dp.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_worker_up{model="m",version="v1",worker="a"} 0');
    dp.setWorkers('m', 'v1', [{ id: 'c', url: 'http://127.0.0.1:9' }]);
    text = await dp.telemetry.metrics.registry.metrics();
    expect(text).not.toContain('worker="a"');
    expect(text).toContain('glidepath_worker_up{model="m",version="v1",worker="c"} 1');
  });

  it('unknown model → 404 model_not_found', () => {
    const dp = plane();
    expect(codeOf(() => dp.setRoute({ model: 'nope', weights: { v1: 1 } }))).toBe('model_not_found');
  });
});

describe('models, versions and workers', () => {
  it('refuses a second registration of a model, and a bad first route', () => {
    const dp = plane();
    expect(codeOf(() => dp.addModel({ model: 'm', versions: [], route: { model: 'm', weights: { v1: 1 } } }))).toBe('model_exists');
    expect(codeOf(() => dp.addModel({ model: 'n', versions: [{ id: 'x', cardChecksum: 'c' }], route: { model: 'n', weights: { y: 1 } } }))).toBe(
      'invalid_route',
    );
    expect(dp.models.has('n')).toBe(false);
  });

  it('addVersion refuses a different card checksum for a known version', () => {
    const dp = plane();
    dp.addVersion('m', 'v1', 'c1');
    expect(codeOf(() => dp.addVersion('m', 'v1', 'other'))).toBe('card_mismatch');
    dp.addVersion('m', 'v4', 'c2');
    expect(dp.pool('m', 'v4').cardChecksum).toBe('c2');
  });

  it('setWorkers keeps workers that stay (same id and URL) and replaces the others', () => {
    const dp = plane();
    const a = dp.pool('m', 'v1').workers[0]!;
    a.outstanding = 3;
    dp.setWorkers('m', 'v1', [
      { id: 'a', url: 'http://127.0.0.1:9' },
      { id: 'c', url: 'http://127.0.0.1:10' },
    ]);
    expect(dp.pool('m', 'v1').workers[0]).toBe(a);
    expect(dp.pool('m', 'v1').workers[0]!.outstanding).toBe(3);
    dp.setWorkers('m', 'v1', [{ id: 'a', url: 'http://127.0.0.1:11' }]);
    expect(dp.pool('m', 'v1').workers[0]).not.toBe(a);
    expect(a.routable).toBe(false);
  });

  it('setWorkers refuses a bad URL, an empty or duplicate id, and then changes nothing (regression: a TypeError escaped)', () => {
    const dp = plane();
    const before = dp.pool('m', 'v1').workers;
    const bad: [string, { id: string; url: string }[], RegExp][] = [
      ['not a URL', [{ id: 'x', url: 'not a url' }], /worker x has URL "not a url"/],
      ['not http', [{ id: 'x', url: 'ftp://h:1' }], /ftp:\/\/h:1/],
      ['empty id', [{ id: '', url: 'http://127.0.0.1:9' }], /non-empty id/],
      [
        'duplicate id',
        [
          { id: 'x', url: 'http://127.0.0.1:9' },
          { id: 'x', url: 'http://127.0.0.1:10' },
        ],
        /listed twice/,
      ],
      [
        'good then bad',
        [
          { id: 'ok', url: 'http://127.0.0.1:9' },
          { id: 'y', url: '://' },
        ],
        /worker y/,
      ],
    ];
    for (const [name, specs, msg] of bad) {
      let err: unknown;
      try {
        dp.setWorkers('m', 'v1', specs);
      } catch (e) {
        err = e;
      }
      expect(err, name).toBeInstanceOf(GlidepathError);
      expect((err as GlidepathError).code).toBe('invalid_worker');
      expect((err as Error).message).toMatch(msg);
      expect(dp.pool('m', 'v1').workers).toBe(before);
    }
  });

  it('removeVersion is refused while the route names the version', async () => {
    const dp = plane();
    await expect(dp.removeVersion('m', 'v1')).rejects.toMatchObject({ code: 'version_in_route' });
    dp.setRoute({ model: 'm', weights: { v2: 1 } });
    await dp.removeVersion('m', 'v1');
    expect(codeOf(() => dp.pool('m', 'v1'))).toBe('version_not_found');
  });

  it('ready: every model needs a routable worker for a weighted version', () => {
    const dp = plane();
    expect(dp.ready()).toEqual({ ready: true, problems: [] });
    dp.setWorkerRoutable('m', 'v1', 'a', false);
    expect(dp.ready().ready).toBe(false);
    expect(dp.ready().problems[0]).toMatch(/^m:/);
    dp.setWorkerRoutable('m', 'v1', 'a', true);
    dp.pool('m', 'v1').workers[0]!.ejectedUntil = Date.now() + 60_000;
    expect(dp.ready().ready).toBe(false);
    expect(codeOf(() => dp.setWorkerRoutable('m', 'v1', 'zz', true))).toBe('worker_not_found');
  });

  it('an empty data plane is not ready', async () => {
    const dp = new DataPlane(defaultGatewayConfig(), new Telemetry({ windowMaxSamples: 10, windowMaxAgeMs: 1000 }));
    expect(dp.ready()).toEqual({ ready: false, problems: ['no models'] });
    await dp.close();
  });
});
