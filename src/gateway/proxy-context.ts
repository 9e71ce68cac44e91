// What every proxied request shares (the gateway's config, telemetry, metrics and picker) and the
// record it leaves when it ends (src/telemetry/record.ts: windows, Prometheus, subscribers).
import type { GatewayConfig } from '../config/types.js';
import type { ErrorCode } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import type { RequestRecord } from '../telemetry/record.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import type { LocalResourceReporter } from './local.js';
import type { Picker } from './pick.js';
import type { VersionPool, Worker } from './pool.js';
import type { ParsedRequest } from './request.js';
import type { SseMeter } from './sse.js';

export interface ProxyContext {
  readonly cfg: GatewayConfig;
  readonly telemetry: Telemetry;
  readonly metrics: GatewayMetrics;
  readonly picker: Picker;
  /** Told when the gateway's own resources ran out (rate-limiting is its business); undefined: not reported. */
  readonly onLocalResourceError?: LocalResourceReporter | undefined;
}

/** What a proxied request knows of itself when it ends (ProxyRequest's own fields: nothing is copied). */
export interface Attempted {
  readonly pool: VersionPool;
  readonly req: ParsedRequest;
  readonly worker: Worker | undefined;
  readonly meter: SseMeter | undefined;
  /** Attempts made (one more than the retries). */
  readonly attempts: number;
  /** ms waited for a connection to a worker, all attempts together. */
  readonly queueMs: number;
  /** performance.now() and Date.now() of its arrival. */
  readonly startedAt: number;
  readonly at: number;
  /** A LoRA adapter's request: the name the engine serves it under. */
  readonly adapterAs: string | undefined;
}

/** The request's record, from what it knows of itself and how it ended. */
export function recordOf(
  r: Attempted,
  status: number,
  errorCode: ErrorCode | undefined,
  latencyMs: number,
  promptTokens: number,
  completionTokens: number,
): RequestRecord {
  const m = r.meter;
  return {
    model: r.pool.model,
    version: r.pool.version,
    worker: r.worker?.id ?? '',
    status,
    errorCode,
    stream: r.req.stream,
    ttftMs: m ? m.ttft(r.startedAt) : NaN,
    tpotMs: m ? m.tpot() : NaN,
    itlMs: m ? m.itl : [],
    latencyMs,
    promptTokens,
    completionTokens,
    queueMs: r.queueMs,
    at: r.at,
    retries: r.attempts > 0 ? r.attempts - 1 : 0,
    shadow: false,
    adapter: r.adapterAs,
  };
}
