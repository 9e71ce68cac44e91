// The adapter registry over a real data plane and an in-memory store: registrations never lose one
// another, and one the config has since given to a model or an adapter is set aside at boot, said,
// never fatal.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { AdapterRegistry } from '../../../src/control/adapters.js';
import type { AdapterHost } from '../../../src/control/adapters.js';
import { DataPlane } from '../../../src/gateway/dataplane.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';

function host(models: Record<string, unknown>[], stored: Record<string, unknown> = {}): AdapterHost {
  const cfg = parseConfig({ models });
  const dp = new DataPlane(cfg.gateway, new Telemetry(cfg.telemetry));
  for (const m of cfg.models) dp.addModel({ model: m.name, versions: [{ id: 'v1', cardChecksum: 'c' }], route: { model: m.name, weights: { v1: 1 } } });
  const settings = new Map<string, unknown>(Object.entries(stored));
  return {
    cfg,
    dp,
    store: {
      getSetting: (k: string) => Promise.resolve(structuredClone(settings.get(k))),
      setSetting: (k: string, v: unknown) => Promise.resolve(void settings.set(k, structuredClone(v))),
    } as unknown as AdapterHost['store'],
    modelConfig: (name: string) =>
      cfg.models.find((m) => m.name === name) ??
      (() => {
        throw new Error(`no model ${name}`);
      })(),
    audited: (_a, _b, _c, _d, fn) => fn(),
  };
}

describe('AdapterRegistry', () => {
  it('registrations made at once are all kept (each reads the list the one before wrote)', async () => {
    const h = host([{ name: 'm', versions: [{ id: 'v1' }] }]);
    const r = new AdapterRegistry(h);
    await Promise.all(['a1', 'a2', 'a3'].map((name) => r.register('m', { name, source: `/a/${name}` }, { name: 'op' })));
    expect(
      r
        .list('m')
        .map((a) => a.name)
        .sort(),
    ).toEqual(['a1', 'a2', 'a3']);
    expect(((await h.store.getSetting('adapters.registered')) as { m: unknown[] }).m).toHaveLength(3);
  });

  it('at boot, one registered through the API whose name the config now gives an adapter or a model is set aside and said', async () => {
    const h = host(
      [
        { name: 'm', versions: [{ id: 'v1' }], adapters: [{ name: 'sql', source: '/a/sql' }] },
        { name: 'legal', versions: [{ id: 'v1' }] },
      ],
      {
        'adapters.registered': {
          m: [
            { name: 'sql', source: '/old' },
            { name: 'legal', source: '/x' },
            { name: 'ok', source: '/ok' },
          ],
        },
      },
    );
    const said: string[] = [];
    await new AdapterRegistry(h).restore((why) => said.push(why));
    expect(h.dp.adapters.list().map((a) => `${a.name} ${a.source}`)).toEqual(['sql /a/sql', 'ok /ok']);
    expect(said).toHaveLength(2);
  });
});
