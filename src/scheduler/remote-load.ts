// A model's load as the scheduler judges it, read from a remote metric source (Prometheus,
// `metrics_source`) instead of this process's records: every gateway replica's requests, TTFT and
// TPOT histograms of the versions its route names over the scheduler's window, and what each serving
// worker generated from its engine's own `vllm:generation_tokens_total` as Prometheus scraped it. The
// same numbers as src/scheduler/window.ts, at the histograms' resolution (docs/cluster.md).
import { binnedQuantile } from '../analysis/binned.js';
import { quantileSorted } from '../domain/quantile.js';
import type { WorkerInfo } from '../rollout/ports.js';
import { mergeReadings } from '../telemetry/prometheus-source.js';
import type { RemoteMetrics } from '../telemetry/prometheus-source.js';
import type { LoadStats } from './window.js';

/** The scrape target of a worker: its URL's host:port, as a static or discovered scrape config names it. */
export function instanceOf(w: Pick<WorkerInfo, 'url'>): string {
  try {
    return new URL(w.url).host;
  } catch {
    return w.url;
  }
}

export async function remoteLoad(
  remote: RemoteMetrics,
  q: { model: string; versions: readonly string[]; serving: readonly WorkerInfo[]; now: number; windowMs: number; idleAfterMs: number },
): Promise<LoadStats> {
  const { now, windowMs } = q;
  const from = now - windowMs;
  const byInstance = new Map(q.serving.map((w) => [instanceOf(w), w]));
  const [readings, tokens] = await Promise.all([remote.read(q.model, q.versions, from, now), remote.engineTokens([...byInstance.keys()], from, now)]);
  const r = mergeReadings([...readings.values()]);
  const s = windowMs / 1000;
  // what one worker generated over the time it served in the window (a worker started since: from its start)
  const rates = [...tokens]
    .filter(([i, n]) => n > 0 && byInstance.has(i))
    .map(([i, n]) => n / (Math.max(1, now - Math.max(from, byInstance.get(i)?.startedAt ?? from)) / 1000))
    .sort((a, b) => a - b);
  const succeeded = r.requests - r.errors;
  let lastAt = r.requests > 0 ? now : Number.NEGATIVE_INFINITY;
  if (r.requests === 0 && q.idleAfterMs > windowMs) {
    // quiet over the window: had it a request within the idle time? (then it is not idle yet)
    const longer = mergeReadings([...(await remote.read(q.model, q.versions, now - q.idleAfterMs, now)).values()]);
    lastAt = longer.requests > 0 ? from : Number.NEGATIVE_INFINITY;
  }
  return {
    ttftP99Ms: binnedQuantile(r.ttft, 0.99) * 1000,
    tpotP99Ms: binnedQuantile(r.tpot, 0.99) * 1000,
    rps: r.requests / s,
    samples: r.requests,
    inFlight: r.busyS / s,
    tokensPerS: r.outputTokens / s,
    tokensPerRequest: succeeded > 0 && r.outputTokens > 0 ? r.outputTokens / succeeded : Number.NaN,
    workerTokensPerS: quantileSorted(rates, 0.5),
    lastAt,
  };
}
