// Passive signals, pure: what an attempt that ended in an error means for its worker's health (by
// its error code; every code not listed — the gateway's own aborts for a drain or an unhealthy
// worker, the client's doing — is not the worker's fault), and which workers of a pool are time-to-
// first-token outliers (a throttled GPU shows there before any probe).
import type { HealthConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import type { WorkerFault } from '../telemetry/telemetry.js';
import type { PassiveFailureReason } from './machine.js';
import type { Tracked } from './tracked.js';

export const FAULTS: Partial<Record<WorkerFault['code'], PassiveFailureReason>> = {
  upstream_connect_failed: 'reset',
  upstream_closed: 'reset',
  upstream_stream_broken: 'reset',
  upstream_truncated: 'reset',
  upstream_error: 'error',
  upstream_invalid_json: 'error',
  upstream_response_too_large: 'error',
  upstream_malformed_stream: 'error',
  upstream_timeout: 'timeout',
  upstream_idle_timeout: 'stall',
};

/**
 * The workers of one version's pool (serving, taking traffic) whose TTFT average is `ttftOutlierFactor`
 * × the pool's median and more than `latencyFloorMs` above it, with why; once at least two have served
 * `ttftMinRequests` since the last verdict. Every worker judged starts a fresh count.
 */
export function ttftOutliers(pool: readonly Tracked[], cfg: Pick<HealthConfig, 'ttftOutlierFactor' | 'latencyFloorMs'>): { t: Tracked; detail: string }[] {
  const ready = pool.filter((t) => t.ttft.count >= DEFAULTS.health.ttftMinRequests);
  if (ready.length < 2) return [];
  const emas = ready.map((t) => t.ttft.ema).sort((a, b) => a - b);
  const median = emas[Math.floor((emas.length - 1) / 2)] as number;
  const out: { t: Tracked; detail: string }[] = [];
  for (const t of ready) {
    const ema = t.ttft.ema;
    t.ttft.reset();
    if (ema > cfg.ttftOutlierFactor * median && ema - median > cfg.latencyFloorMs)
      out.push({ t, detail: `time to first token ${ema.toFixed(0)} ms on average, ${(ema / median).toFixed(1)}× its pool's median ${median.toFixed(0)} ms` });
  }
  return out;
}
