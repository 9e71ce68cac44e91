// Per-rollout sample accumulators fed by telemetry records and judge scores: the cumulative stream
// the sequential canary judge looks at again and again.
import type { MetricSamples } from '../analysis/judge.js';
import type { PackedSamples } from '../analysis/judge-packed.js';
import type { RequestRecord } from '../telemetry/record.js';
import { isVersionError } from '../telemetry/record.js';

/** A growable Float64 array with a hard cap (the analysis needs raw samples; memory stays bounded). */
class Series {
  private buf = new Float64Array(256);
  length = 0;
  constructor(private readonly cap: number) {}
  push(v: number): void {
    if (!Number.isFinite(v) || this.length >= this.cap) return;
    if (this.length === this.buf.length) {
      const next = new Float64Array(Math.min(this.cap, this.buf.length * 2));
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = v;
  }
  toArray(): number[] {
    return Array.from(this.buf.subarray(0, this.length));
  }
  /** A copy of the values (one memcpy): transferable to a worker. */
  copy(): Float64Array {
    return this.buf.slice(0, this.length);
  }
}

export class VersionSamples {
  readonly ttft: Series;
  readonly tpot: Series;
  readonly latency: Series;
  readonly quality: Series;
  requests = 0;
  errors = 0;
  outputTokens = 0;
  busyS = 0;
  constructor(cap: number) {
    this.ttft = new Series(cap);
    this.tpot = new Series(cap);
    this.latency = new Series(cap);
    this.quality = new Series(cap);
  }
  add(r: RequestRecord): void {
    // client errors (4xx, hang-ups) say nothing about the version
    if (r.status >= 400 && r.status < 500) return;
    this.requests++;
    if (isVersionError(r)) {
      this.errors++;
      return;
    }
    this.ttft.push(r.ttftMs);
    this.tpot.push(r.tpotMs);
    this.latency.push(r.latencyMs);
    this.outputTokens += r.completionTokens;
    this.busyS += r.latencyMs / 1000;
  }
  toMetricSamples(): MetricSamples {
    return {
      ttftMs: this.ttft.toArray(),
      tpotMs: this.tpot.toArray(),
      latencyMs: this.latency.toArray(),
      requests: this.requests,
      errors: this.errors,
      durationS: this.busyS,
      outputTokens: this.outputTokens,
      quality: this.quality.length > 0 ? this.quality.toArray() : undefined,
    };
  }

  /** The same samples packed for the judge (src/analysis/judge-packed.ts). */
  pack(): PackedSamples {
    return {
      ttftMs: this.ttft.copy(),
      tpotMs: this.tpot.copy(),
      latencyMs: this.latency.copy(),
      quality: this.quality.length > 0 ? this.quality.copy() : undefined,
      requests: this.requests,
      errors: this.errors,
      durationS: this.busyS,
      outputTokens: this.outputTokens,
    };
  }
}

/** Samples of two versions of one model since a point in time — or, `by: 'adapter'`, of two versions of one of its LoRA adapters (by the name each is served as). */
export class PairSamples {
  readonly a: VersionSamples;
  readonly b: VersionSamples;
  constructor(
    readonly model: string,
    readonly versionA: string,
    readonly versionB: string,
    cap: number,
    /** B's first records are left out (a canary's cold start); `skippedB` counts them. */
    private readonly skipB = 0,
    /** What tells A from B in a record: its model's version, or its adapter's served name (over every version of the model). */
    private readonly by: 'version' | 'adapter' = 'version',
  ) {
    this.a = new VersionSamples(cap);
    this.b = new VersionSamples(cap);
  }
  skippedB = 0;
  record(r: RequestRecord): void {
    if (r.model !== this.model) return;
    const key = this.by === 'version' ? r.version : r.adapter;
    // shadow traffic measures the candidate too (it is real work on its workers)
    if (key === this.versionA) this.a.add(r);
    else if (key === this.versionB) {
      if (this.skippedB < this.skipB) this.skippedB++;
      else this.b.add(r);
    }
  }
  quality(version: string, score: number): void {
    if (version === this.versionA) this.a.quality.push(score);
    else if (version === this.versionB) this.b.quality.push(score);
  }
}

/** Route weights with every version of `current` kept at 0 (instant rollback, header previews) and `set` on top. */
export function reweighted(current: Readonly<Record<string, number>>, set: Readonly<Record<string, number>>): Record<string, number> {
  return { ...Object.fromEntries(Object.keys(current).map((k) => [k, 0])), ...set };
}
