// Admin route: a model's capacity and degradation — its level, what it must serve, and each routed worker's measured worth and request slots.
import type { CapacityView } from '../types.js';
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { AdminContext } from './context.js';
import { modelOf } from './context.js';

const num = (x: number): number | null => (Number.isFinite(x) ? x : null);

export function capacityRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    get(
      '/models/:model/capacity',
      {
        role: 'viewer',
        summary: "the model's degradation level, capacity against what it must serve, and each routed worker's measured worth and request slots",
      },
      (c): CapacityView => {
        const model = modelOf(cp, c);
        const st = cp.dp.models.get(model);
        const adm = st?.admission;
        const capacity = adm?.capacity;
        const required = cp.modelConfig(model).degradation?.requiredTokensPerS ?? null;
        return {
          model,
          level: capacity === undefined ? null : (adm?.level ?? null),
          ratio: capacity === undefined ? null : (adm?.ratio ?? null),
          required_tokens_per_s: required,
          capacity_tokens_per_s: capacity?.total() ?? null,
          workers: (capacity?.workers() ?? []).map((w) => {
            const l = w.load;
            const up = st?.pools.get(w.version)?.workers.find((x) => x.id === w.worker)?.upstream;
            return {
              version: w.version,
              worker: w.worker,
              weight: w.weight,
              capacity_tokens_per_s: w.capacityTokensPerS,
              measured: w.measured,
              tokens_per_s: l ? num(l.tokensPerS) : null,
              running: l ? num(l.running) : null,
              waiting: l ? num(l.waiting) : null,
              kv_usage: l ? num(l.kvUsage) : null,
              saturated: l && l.at > 0 && l.error === undefined ? l.saturated : null,
              measured_at: l && l.at > 0 ? l.at : null,
              error: l?.error ?? null,
              slots: { limit: up?.limit ?? 0, shared: up?.sharedLimit ?? 0, busy: up?.busy ?? 0, queued: up?.queued ?? 0 },
            };
          }),
        };
      },
    ),
  ];
}
