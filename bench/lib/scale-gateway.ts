// bench:scale's gateway process: a data plane holding the routing state of M models (versions, workers,
// adapters) over the given worker endpoints, with its front server; reports what building it, publishing a
// route and holding it cost, then serves until stopped.
// Usage: node --expose-gc dist-bench/bench/lib/scale-gateway.js '<json options>' → one JSON line on stdout.
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../../src/config/load.js';
import { DataPlane } from '../../src/gateway/dataplane.js';
import { createDataServer, startListening } from '../../src/gateway/server.js';
import { Telemetry } from '../../src/telemetry/telemetry.js';
import { quantileSorted } from '../../src/domain/quantile.js';

export interface ScaleGatewayOptions {
  port: number;
  /** Worker base URLs; worker k of the whole fleet gets endpoints[k % endpoints.length]. */
  endpoints: string[];
  models: number;
  /** Versions per model, the first at weight 1 − 0.1 × (versions − 1), each other one at 0.1. */
  versions: number;
  workersPerVersion: number;
  adaptersPerModel: number;
  /** Route publishes timed (setRoute on the last model, weights alternating). */
  publishes: number;
}

/** What the process measured before serving (the benchmark parses it from stdout). */
export interface ScaleGatewayReport {
  port: number;
  models: number;
  workers: number;
  adapters: number;
  /** ms to add every model, its workers, its route and its adapters. */
  buildMs: number;
  /** One route publish (setRoute), ms. */
  publishMs: { p50: number; p99: number; max: number };
  /** After a full collection, with the routing state built and nothing served yet. */
  heapUsedMiB: number;
  rssMiB: number;
}

function modelName(i: number): string {
  return `m${i}`;
}

function weights(versions: number, flip: boolean): Record<string, number> {
  const w: Record<string, number> = {};
  const minor = versions > 1 ? 0.1 : 0;
  for (let v = 0; v < versions; v++) w[`v${v + 1}`] = v === 0 ? 1 - minor * (versions - 1) : minor;
  // a publish that changes something: the first two versions trade places
  if (flip && versions > 1) [w.v1, w.v2] = [w.v2 as number, w.v1 as number];
  return w;
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) {
    g();
    g();
  }
}

async function main(o: ScaleGatewayOptions): Promise<void> {
  const cfg = parseConfig({ models: [{ name: 'm', versions: [{ id: 'v1' }] }] }).gateway;
  const telemetry = new Telemetry({ windowMaxSamples: 1000, windowMaxAgeMs: 300_000 });
  const dp = new DataPlane(cfg, telemetry);
  let k = 0;
  const t0 = performance.now();
  for (let m = 0; m < o.models; m++) {
    const model = modelName(m);
    const ids = Array.from({ length: o.versions }, (_, v) => `v${v + 1}`);
    dp.addModel({ model, versions: ids.map((id) => ({ id, cardChecksum: `card-${id}` })), route: { model, weights: { v1: 1 } } });
    for (const id of ids) {
      dp.setWorkers(
        model,
        id,
        Array.from({ length: o.workersPerVersion }, (_, w) => ({ id: `${model}-${id}-w${w}`, url: o.endpoints[k++ % o.endpoints.length] as string })),
      );
    }
    dp.setRoute({ model, weights: weights(o.versions, false) });
    dp.setAdapters(
      model,
      Array.from({ length: o.adaptersPerModel }, (_, a) => ({
        name: `${model}-lora${a}`,
        model,
        source: `/loras/${model}/${a}`,
        servedAs: `${model}-lora${a}`,
      })),
    );
  }
  const buildMs = performance.now() - t0;
  const last = modelName(o.models - 1);
  const times: number[] = [];
  for (let i = 0; i < o.publishes; i++) {
    const s = performance.now();
    dp.setRoute({ model: last, weights: weights(o.versions, i % 2 === 0) });
    times.push(performance.now() - s);
  }
  dp.setRoute({ model: last, weights: weights(o.versions, false) });
  times.sort((a, b) => a - b);
  gc();
  const mem = process.memoryUsage();
  const srv = await startListening(createDataServer(dp), '127.0.0.1', o.port);
  const report: ScaleGatewayReport = {
    port: srv.port,
    models: o.models,
    workers: k,
    adapters: o.models * o.adaptersPerModel,
    buildMs,
    publishMs: { p50: quantileSorted(times, 0.5), p99: quantileSorted(times, 0.99), max: times[times.length - 1] ?? NaN },
    heapUsedMiB: mem.heapUsed / 2 ** 20,
    rssMiB: mem.rss / 2 ** 20,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  const stop = (): void => {
    void dp.close().then(() => srv.close().then(() => process.exit(0)));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main(JSON.parse(process.argv[2] ?? '{}') as ScaleGatewayOptions).catch((err: unknown) => {
  process.stderr.write(`scale-gateway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
