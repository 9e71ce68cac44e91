// The configuration is frozen at load (deepFreeze in src/config/load.ts), and its types say so: a
// write is a compile error (the @ts-expect-error lines below fail `npm run typecheck` if a type loses
// its readonly) and, at run time, a TypeError in strict mode.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';

describe('the configuration is read-only, in its types and at run time', () => {
  const cfg = parseConfig({
    models: [{ name: 'm', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } }], route: { weights: { v1: 1 } } }],
  });

  it('refuses writes at every depth', () => {
    expect(() => {
      // @ts-expect-error the config types are readonly
      cfg.gateway.maxRetries = 9;
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error arrays too
      cfg.models[0]!.versions[1] = cfg.models[0]!.versions[0]!;
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error and records
      cfg.models[0]!.route.weights.v1 = 0.5;
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error and a version's own fields
      cfg.models[0]!.versions[0]!.replicas = 3;
    }).toThrow(TypeError);
    expect(cfg.gateway.maxRetries).not.toBe(9);
  });
});
