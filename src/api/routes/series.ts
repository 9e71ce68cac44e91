// Admin routes: what the dashboard charts — a model's sampled series (route weights, rates, TTFT and
// TPOT p50/p99 per version), their live stream (SSE, one sample a second), and the running canary's
// two latency distributions.
import type { RouteDef } from '../router.js';
import { get } from '../router.js';
import type { EcdfPairView, SeriesRecorder, SeriesSampleView, SeriesView } from '../series.js';
import { ecdfPair } from '../series.js';
import type { AdminContext } from './context.js';
import { eventStream, modelOf } from './context.js';

/** GET …/canary/distributions: the canary's and the stable version's live samples, per metric. */
export interface CanaryDistributionsView {
  id: string;
  stable: string;
  canary: string;
  metrics: { ttft_ms: EcdfPairView; tpot_ms: EcdfPairView; latency_ms: EcdfPairView };
}

export function seriesRoutes({ cp, controllers }: AdminContext, series: SeriesRecorder): RouteDef[] {
  return [
    get(
      '/models/:model/series',
      { role: 'viewer', summary: "the model's sampled series (route weights; per version rates, error rate, TTFT and TPOT p50/p99), oldest first" },
      (c): SeriesView => series.history(modelOf(cp, c)),
    ),
    get(
      '/series/stream',
      { role: 'viewer', summary: 'server-sent events: one `sample` of every model each interval (the dashboard charts)', raw: true },
      (c) => {
        eventStream(c.res, { behind: 'drop', retryMs: series.intervalMs }, (send) =>
          series.subscribe((s: SeriesSampleView) => send(`event: sample\ndata: ${JSON.stringify(s)}\n\n`)),
        );
      },
    ),
    get(
      '/models/:model/canary/distributions',
      { role: 'viewer', summary: "the running (or last, id=…) canary's two versions' live TTFT, TPOT and latency samples as ECDFs on a shared grid" },
      async (c): Promise<CanaryDistributionsView> => {
        const m = modelOf(cp, c);
        const s = await controllers.canary.get(m, c.query.get('id') ?? undefined);
        const a = cp.dp.telemetry.samples(m, s.stable);
        const b = cp.dp.telemetry.samples(m, s.canary);
        return {
          id: s.id,
          stable: s.stable,
          canary: s.canary,
          metrics: { ttft_ms: ecdfPair(a.ttftMs, b.ttftMs), tpot_ms: ecdfPair(a.tpotMs, b.tpotMs), latency_ms: ecdfPair(a.latencyMs, b.latencyMs) },
        };
      },
    ),
  ];
}
