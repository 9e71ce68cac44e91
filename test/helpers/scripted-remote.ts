// A remote metric source (Prometheus's place behind the telemetry port) whose answers the test sets:
// each version's reading, each engine's tokens, or a failure; it logs every read. For the controllers'
// tests over the fake ports; the real source is tested against an HTTP server and a real Prometheus.
import { NO_READING } from '../../src/analysis/binned.js';
import { GlidepathError } from '../../src/errors.js';
import type { RemoteMetrics, VersionReading } from '../../src/telemetry/prometheus-source.js';

export class ScriptedRemote implements RemoteMetrics {
  readonly where = 'scripted source';
  /** While set, every read fails with metrics_source_unreachable and this message. */
  down: string | undefined;
  /** Readings by `model/version`. */
  readonly byVersion = new Map<string, VersionReading>();
  /** Completion tokens by engine scrape target (`host:port`). */
  readonly tokens = new Map<string, number>();
  readonly reads: { model: string; versions: readonly string[]; from: number; to: number }[] = [];
  readonly tokenReads: { instances: readonly string[]; from: number; to: number }[] = [];

  constructor(readonly monitorWindowMs = 300_000) {}

  read(model: string, versions: readonly string[], from: number, to: number): Promise<Map<string, VersionReading>> {
    this.reads.push({ model, versions, from, to });
    if (this.down !== undefined) return Promise.reject(new GlidepathError('metrics_source_unreachable', this.down));
    return Promise.resolve(new Map(versions.map((v) => [v, this.byVersion.get(`${model}/${v}`) ?? NO_READING])));
  }

  engineTokens(instances: readonly string[], from: number, to: number): Promise<Map<string, number>> {
    this.tokenReads.push({ instances, from, to });
    if (this.down !== undefined) return Promise.reject(new GlidepathError('metrics_source_unreachable', this.down));
    return Promise.resolve(new Map(instances.flatMap((i) => (this.tokens.has(i) ? [[i, this.tokens.get(i) as number] as const] : []))));
  }
}
