// The simulator's fault names, camelCase ↔ snake_case, as the config pipeline and /admin/faults use them.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { fromSnakeFaults, toSnakeFaults } from '../../../src/config/sim-faults.js';

describe('sim faults', () => {
  it('glidepath.yaml names faults in snake_case; the config carries them in camelCase', () => {
    const cfg = parseConfig({
      models: [
        {
          name: 'm',
          versions: [
            {
              id: 'v1',
              provider: {
                kind: 'sim',
                sim: { faults: { error_rate: 0.2, error_status: 503, crash_after_tokens: 7, hang: false, latency_multiplier: 1.5, corrupt: true } },
              },
            },
          ],
        },
      ],
    });
    const p = cfg.models[0]!.versions[0]!.provider;
    expect(p.kind === 'sim' && p.sim.faults).toEqual({
      errorRate: 0.2,
      errorStatus: 503,
      crashAfterTokens: 7,
      hang: false,
      latencyMultiplier: 1.5,
      corrupt: true,
    });
  });

  it('converts both ways without losing a fault, leaving unset ones out', () => {
    const all = { errorRate: 0.5, errorStatus: 500, crashAfterTokens: 3, hang: true, latencyMultiplier: 2, corrupt: false, processExit: true };
    expect(fromSnakeFaults(toSnakeFaults(all))).toEqual(all);
    expect(toSnakeFaults({ processExit: false })).toEqual({ process_exit: false });
    expect(fromSnakeFaults({})).toEqual({});
  });
});
