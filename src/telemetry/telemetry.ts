// Where request records go: per-version sliding windows, Prometheus, and subscribers (analysis, experiments).
import type { ErrorCode } from '../errors.js';
import type { RequestRecord } from './record.js';
import { isVersionError } from './record.js';
import { SlidingWindow } from './window.js';
import type { WindowStats, MetricSamples } from './window.js';
import { GatewayMetrics } from './metrics.js';
import type { VersionMetrics } from './metrics.js';
import { createLogger } from './log.js';
import type { Logger } from './log.js';

export type RecordListener = (r: RequestRecord) => void;

/** One attempt on a worker that ended in an error, with its code: the passive health signal (src/health/passive.ts says which codes are the worker's fault). */
export interface WorkerFault {
  model: string;
  version: string;
  worker: string;
  code: ErrorCode;
  at: number;
}
export type FaultListener = (f: WorkerFault) => void;

/** Everything recorded about one (model, version), resolved once and held by its pool. */
export interface VersionTelemetry {
  readonly model: string;
  readonly version: string;
  readonly window: SlidingWindow;
  readonly metrics: VersionMetrics;
}

export class Telemetry {
  readonly metrics = new GatewayMetrics();
  /** The process's operational log (see log.ts). */
  readonly log: Logger;
  private readonly versions = new Map<string, VersionTelemetry>();
  private listeners: RecordListener[] = [];
  private faultListeners: FaultListener[] = [];
  private readonly windowMaxSamples: number;
  private readonly windowMaxAgeMs: number;

  constructor(opts: { windowMaxSamples: number; windowMaxAgeMs: number; log?: Logger }) {
    this.windowMaxSamples = opts.windowMaxSamples;
    this.windowMaxAgeMs = opts.windowMaxAgeMs;
    this.log = opts.log ?? createLogger();
  }

  forVersion(model: string, version: string): VersionTelemetry {
    const key = `${model}\u0000${version}`;
    let vt = this.versions.get(key);
    if (!vt) {
      vt = {
        model,
        version,
        window: new SlidingWindow(this.windowMaxSamples, this.windowMaxAgeMs),
        metrics: this.metrics.forVersion(model, version),
      };
      this.versions.set(key, vt);
    }
    return vt;
  }

  /** Hot path: O(1) window push, cached-label Prometheus updates, then subscribers. */
  record(vt: VersionTelemetry, r: RequestRecord): void {
    vt.window.push(r);
    const m = vt.metrics;
    m.code(r.status).inc();
    if (isVersionError(r)) m.versionErrors.inc();
    // NaN (no token, fewer than two) is not observed
    m.ttft.observe(r.ttftMs / 1000);
    m.tpot.observe(r.tpotMs / 1000);
    m.duration.observe(r.latencyMs / 1000);
    if (r.promptTokens > 0) m.promptTokens.inc(r.promptTokens);
    if (r.completionTokens > 0) m.completionTokens.inc(r.completionTokens);
    this.notify(r);
  }

  /**
   * A record of a request another replica served (cluster mode): into the version's window and to the
   * subscribers, so the canary judge, the monitor and the experiments see the whole cluster's traffic;
   * not into this process's Prometheus series (that replica exports its own).
   */
  ingest(r: RequestRecord): void {
    this.forVersion(r.model, r.version).window.push(r);
    this.notify(r);
  }

  private notify(r: RequestRecord): void {
    const ls = this.listeners;
    for (let i = 0; i < ls.length; i++) {
      try {
        (ls[i] as RecordListener)(r);
      } catch {
        // one subscriber's bug must not starve the others (analysis, experiments) of records
      }
    }
  }

  /** Subscribe to every record; returns the unsubscribe function. Listeners must be fast and never throw. */
  subscribe(fn: RecordListener): () => void {
    this.listeners = [...this.listeners, fn];
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  /**
   * A worker failed one attempt of a request (whether or not the request then succeeded elsewhere).
   * Error paths only; the record of the request says how it ended for the client.
   */
  workerFault(model: string, version: string, worker: string, code: ErrorCode): void {
    const f: WorkerFault = { model, version, worker, code, at: Date.now() };
    for (const l of this.faultListeners) {
      try {
        l(f);
      } catch {
        // as for records: one subscriber's bug starves no other
      }
    }
  }

  /** Subscribe to every worker fault; returns the unsubscribe function. */
  subscribeFaults(fn: FaultListener): () => void {
    this.faultListeners = [...this.faultListeners, fn];
    return () => {
      this.faultListeners = this.faultListeners.filter((l) => l !== fn);
    };
  }

  stats(model: string, version: string, now?: number): WindowStats {
    return this.forVersion(model, version).window.stats(now);
  }

  samples(model: string, version: string, now?: number): MetricSamples {
    return this.forVersion(model, version).window.samples(now);
  }

  /** Quality score for a version (from the LLM judge or user feedback). */
  recordQuality(model: string, version: string, score: number, at = Date.now()): void {
    this.forVersion(model, version).window.pushQuality(score, at);
  }

  resetWindow(model: string, version: string): void {
    this.forVersion(model, version).window.clear();
  }
}
