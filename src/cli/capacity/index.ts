// `glidepath capacity`: a model's degradation level, its capacity against what it must serve, and each routed worker's measured worth and request slots.
import type { Command } from 'commander';
import { modelPath, out, resolveModel, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import type { CapacityView } from '../../api/types.js';

const n = (x: number | null, digits = 0): string => (x === null ? '-' : x.toFixed(digits));

export function register(program: Command): void {
  withCommon(
    program
      .command('capacity')
      .description(
        "a model's degradation level, healthy capacity against what it must serve, and each worker's measured tokens/s, engine load and request slots",
      ),
    { model: 'one' },
  ).action(async (o: CommonOptions) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const c = await s.client.get<CapacityView>(modelPath(model, '/capacity'));
    if (s.json) return printJson(c);
    if (c.level === null) return out(`${c.model}: no degradation configured (docs/resilience.md): every request is admitted`);
    out(
      `${c.model}: degradation level ${c.level}, capacity ${n(c.capacity_tokens_per_s)} of ${n(c.required_tokens_per_s)} tokens/s required (ratio ${n(c.ratio, 2)})`,
    );
    if (c.workers.length === 0) return out('no routed worker is healthy');
    out(
      table(
        ['WORKER', 'VERSION', 'WEIGHT', 'WORTH_TOK/S', 'MEASURED', 'TOK/S', 'RUNNING', 'WAITING', 'KV', 'SATURATED', 'SLOTS', 'IN_FLIGHT', 'QUEUED', 'ERROR'],
        c.workers.map((w) => [
          w.worker,
          w.version,
          String(w.weight),
          n(w.capacity_tokens_per_s),
          w.measured ? 'yes' : 'no',
          n(w.tokens_per_s),
          n(w.running),
          n(w.waiting),
          w.kv_usage === null ? '-' : `${Math.round(w.kv_usage * 100)}%`,
          w.saturated === null ? '-' : w.saturated ? 'yes' : 'no',
          w.slots.shared === w.slots.limit ? String(w.slots.limit) : `${w.slots.limit} (${w.slots.shared} below the top tier)`,
          String(w.slots.busy),
          String(w.slots.queued),
          w.error ?? '',
        ]),
      ),
    );
  });
}
