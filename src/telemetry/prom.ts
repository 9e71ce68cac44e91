// Array-backed Prometheus histograms and counters for hot paths, rendered through prom-client's registry.
//
// prom-client's own observe()/inc() validate and hash the label set on every call (~0.4 µs each,
// six of them per gateway request); these keep one child per label set, resolved once by the
// caller, whose update is a bucket search and two additions. prom-client still owns the text
// format: a family registers itself as a metric whose get() lists its samples at scrape time.
import type { Metric, Registry } from 'prom-client';

type LabelValues = Record<string, string | number>;

interface Sample {
  metricName?: string;
  labels: LabelValues;
  value: number;
}

interface Snapshot {
  name: string;
  help: string;
  type: 'histogram' | 'counter';
  aggregator: 'sum';
  values: Sample[];
}

export interface FamilyOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
  registers: readonly Registry[];
}

/** One label set's histogram. */
export class HistogramChild {
  /** Per-bucket (not cumulative) counts; observations above the last bound only count in +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  private readonly bounds: Float64Array;

  constructor(bounds: Float64Array) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }

  /** Record `n` observations of `v` (NaN is ignored: nothing was measured). */
  observe(v: number, n = 1): void {
    if (v !== v) return;
    this.sum += v * n;
    this.count += n;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= (b[i] as number)) {
        this.counts[i] = (this.counts[i] as number) + n;
        return;
      }
    }
  }
}

/** One label set's counter. */
export class CounterChild {
  value = 0;

  /** Add `n` (default 1); negative or NaN amounts are refused, as Prometheus counters only grow. */
  inc(n = 1): void {
    if (!(n >= 0)) throw new RangeError(`counter increment must be >= 0, got ${n}`);
    this.value += n;
  }
}

abstract class Family<C> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum' as const;
  readonly labelNames: readonly string[];
  private readonly children = new Map<string, { labels: LabelValues; child: C }>();

  constructor(opts: FamilyOptions) {
    this.name = opts.name;
    this.help = opts.help;
    this.labelNames = opts.labelNames;
    // prom-client formats any registered object with name, help, type and get(); its Metric type is a
    // class these families do not extend, hence the cast
    for (const r of opts.registers) r.registerMetric(this as unknown as Metric);
  }

  protected abstract create(): C;

  /** The child for these label values (in labelNames order): look it up once, keep it. */
  labels(...values: string[]): C {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name}: expected ${this.labelNames.length} label values (${this.labelNames.join(', ')}), got ${values.length}`);
    const key = values.join('\u0000');
    let e = this.children.get(key);
    if (e === undefined) {
      const labels: LabelValues = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i] as string));
      e = { labels, child: this.create() };
      this.children.set(key, e);
    }
    return e.child;
  }

  protected entries(): IterableIterator<{ labels: LabelValues; child: C }> {
    return this.children.values();
  }
}

export class ArrayHistogram extends Family<HistogramChild> {
  readonly type = 'histogram' as const;
  private readonly bounds: Float64Array;

  constructor(opts: FamilyOptions & { buckets: readonly number[] }) {
    super(opts);
    const b = [...opts.buckets].sort((x, y) => x - y);
    if (b.length === 0 || b.some((x) => !Number.isFinite(x))) throw new Error(`${opts.name}: buckets must be finite numbers`);
    this.bounds = Float64Array.from(b);
  }

  protected create(): HistogramChild {
    return new HistogramChild(this.bounds);
  }

  get(): Snapshot {
    const values: Sample[] = [];
    for (const { labels, child } of this.entries()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += child.counts[i] as number;
        values.push({ metricName: `${this.name}_bucket`, labels: { le: this.bounds[i] as number, ...labels }, value: acc });
      }
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: child.count });
      values.push({ metricName: `${this.name}_sum`, labels, value: child.sum });
      values.push({ metricName: `${this.name}_count`, labels, value: child.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

export class ArrayCounter extends Family<CounterChild> {
  readonly type = 'counter' as const;

  protected create(): CounterChild {
    return new CounterChild();
  }

  get(): Snapshot {
    const values: Sample[] = [];
    for (const { labels, child } of this.entries()) values.push({ labels, value: child.value });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
