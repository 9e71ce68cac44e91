// What the admin API shows of the GPU inventory and of a model's route, mapped field by field from
// the camelCase the inventory and the data plane keep. The route's `weights` and `overrides` are
// keyed by version id and by category: data, copied as they are.
import type { RouteSnapshot } from '../domain/route.js';
import type { GpuView } from '../fleet/inventory.js';
import type { GpuEntryView, RouteChangeView, RouteShareView, RouteView } from './types.js';

export function gpuEntryView(g: GpuView): GpuEntryView {
  return {
    id: g.id,
    memory_gb: g.memoryGb,
    holder: g.holder ? { model: g.holder.model, version: g.holder.versionId, worker: g.holder.workerId ?? null } : null,
  };
}

function routeFields(r: RouteSnapshot): Omit<RouteView, 'shares'> {
  return {
    model: r.model,
    revision: r.revision,
    weights: Object.fromEntries(r.versions.map((v) => [v.id, v.weight])),
    stable: r.stable,
    overrides: { ...r.overrides },
    sticky_salt: r.stickySalt ?? null,
    shadow: r.shadow ? { version: r.shadow.version, share: r.shadow.share } : null,
  };
}

/** The route in force with its configured vs actual shares (the data plane's split counts). */
export function routeView(r: RouteSnapshot, shares: readonly RouteShareView[]): RouteView {
  return { ...routeFields(r), shares: shares.map((s) => ({ version: s.version, configured: s.configured, actual: s.actual, count: s.count })) };
}

export function routeChangeView(r: RouteSnapshot, switchMs: number): RouteChangeView {
  return { ...routeFields(r), switch_ms: switchMs };
}
