// The adapter registry over a real data plane and an in-memory store: registrations never lose one
// another, and one the config has since given to a model or an adapter is set aside at boot, said,
// never fatal.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { AdapterRegistry } from '../../../src/control/adapters.js';
import type { AdapterHost } from '../../../src/control/adapters.js';
import { DataPlane } from '../../../src/gateway/dataplane.js';
import { Telemetry } from '../../../src/telemetry/telemetry.js';

/** `unfinished`: the scopes (adapter names) the store has an unfinished rollout of. */
function host(models: Record<string, unknown>[], stored: Record<string, unknown> = {}, unfinished: string[] = []): AdapterHost {
  const cfg = parseConfig({ models });
  const dp = new DataPlane(cfg.gateway, new Telemetry(cfg.telemetry));
  for (const m of cfg.models) dp.addModel({ model: m.name, versions: [{ id: 'v1', cardChecksum: 'c' }], route: { model: m.name, weights: { v1: 1 } } });
  const settings = new Map<string, unknown>(Object.entries(stored));
  const active = unfinished.map((model) => ({ id: `adapter-canary-of-${model}`, model }));
  return {
    cfg,
    dp,
    store: {
      getSetting: (k: string) => Promise.resolve(structuredClone(settings.get(k))),
      setSetting: (k: string, v: unknown) => Promise.resolve(void settings.set(k, structuredClone(v))),
      listActiveRollouts: () => Promise.resolve(active),
    } as unknown as AdapterHost['store'],
    exclusive: (_k, fn) => fn(),
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

  it('a canary promotes a config adapter though an API registration of its name is set aside (regression: "listed twice", half done)', async () => {
    const h = host([{ name: 'm', versions: [{ id: 'v1' }], adapters: [{ name: 'sql', source: '/a/sql' }] }], {
      'adapters.registered': {
        m: [
          { name: 'sql', source: '/old' },
          { name: 'ok', source: '/ok' },
        ],
      },
    });
    const r = new AdapterRegistry(h);
    await r.restore();
    await r.promote('m', 'sql', { name: 'sql', model: 'm', source: '/a/sql-2', version: '2', servedAs: 'sql--2' });
    expect(h.dp.adapters.get('sql')).toMatchObject({ source: '/a/sql-2', servedAs: 'sql--2' });
    expect(await h.store.getSetting('adapters.promoted')).toMatchObject({ sql: { model: 'm', servedAs: 'sql--2', replaces: '/a/sql' } });
    // and registering another adapter still works beside the set-aside entry
    await r.register('m', { name: 'legal', source: '/l' }, { name: 'op' });
    expect(h.dp.adapters.list().map((a) => a.name)).toEqual(['sql', 'ok', 'legal']);
    // a restart: the promotion holds while the config still names what it replaced
    const again = new AdapterRegistry(h);
    await again.restore();
    expect(h.dp.adapters.get('sql')).toMatchObject({ servedAs: 'sql--2', version: '2' });
  });

  it('an adapter with an unfinished canary is neither registered again nor removed; a name with "--" is refused, in the API and the config', async () => {
    const h = host([{ name: 'm', versions: [{ id: 'v1' }] }], { 'adapters.registered': { m: [{ name: 'sql', source: '/a/sql' }] } }, ['sql']);
    const r = new AdapterRegistry(h);
    await r.restore();
    await expect(r.register('m', { name: 'sql', source: '/b' }, { name: 'op' })).rejects.toMatchObject({ code: 'rollout_in_progress' });
    await expect(r.remove('m', 'sql', { name: 'op' })).rejects.toMatchObject({ code: 'rollout_in_progress' });
    await expect(r.register('m', { name: 'a--b', source: '/b' }, { name: 'op' })).rejects.toMatchObject({ code: 'invalid_body', message: /no "--"/ });
    expect(() => parseConfig({ models: [{ name: 'm', versions: [{ id: 'v1' }], adapters: [{ name: 'x--1', source: '/x' }] }] })).toThrow(/without "--"/);
  });
});
