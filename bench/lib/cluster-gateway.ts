// bench:processes's gateway: the data plane of one model over one upstream, in one process or in N
// processes sharing one port through Node's cluster module (the primary hands out connections round-robin,
// or the kernel does with `policy: none`). Prints {"pids":[…]} once every process listens.
// Usage: node dist-bench/bench/lib/cluster-gateway.js '<json options>'
import cluster from 'node:cluster';
import { parseConfig } from '../../src/config/load.js';
import { DataPlane } from '../../src/gateway/dataplane.js';
import { createDataServer, startListening } from '../../src/gateway/server.js';
import { Telemetry } from '../../src/telemetry/telemetry.js';

export interface ClusterGatewayOptions {
  port: number;
  upstream: string;
  /** 1: the data plane in this process, no cluster module. */
  processes: number;
  policy: 'rr' | 'none';
}

/** One data plane serving `bench` (version v1, one worker at `upstream`) on `port`; resolves once listening. */
async function serve(o: ClusterGatewayOptions): Promise<() => Promise<void>> {
  const cfg = parseConfig({ models: [{ name: 'bench', versions: [{ id: 'v1' }] }] }).gateway;
  const dp = new DataPlane(cfg, new Telemetry({ windowMaxSamples: 1000, windowMaxAgeMs: 300_000 }));
  dp.addModel({ model: 'bench', versions: [{ id: 'v1', cardChecksum: 'card-v1' }], route: { model: 'bench', weights: { v1: 1 } } });
  dp.setWorkers('bench', 'v1', [{ id: 'w0', url: o.upstream }]);
  const srv = await startListening(createDataServer(dp), '127.0.0.1', o.port);
  return () => dp.close().then(() => srv.close());
}

function onStop(close: () => Promise<void>): void {
  const stop = (): void => void close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function main(o: ClusterGatewayOptions): Promise<void> {
  if (o.processes <= 1) {
    onStop(await serve(o));
    process.stdout.write(`${JSON.stringify({ pids: [process.pid] })}\n`);
    return;
  }
  if (cluster.isWorker) {
    onStop(await serve(o));
    process.send?.({ listening: process.pid });
    return;
  }
  cluster.schedulingPolicy = o.policy === 'rr' ? cluster.SCHED_RR : cluster.SCHED_NONE;
  const pids: number[] = [];
  const workers = Array.from({ length: o.processes }, () => cluster.fork({ GP_CLUSTER_GATEWAY: process.argv[2] ?? '{}' }));
  for (const w of workers) {
    w.on('message', (m: { listening?: number }) => {
      if (m.listening === undefined) return;
      pids.push(m.listening);
      if (pids.length === o.processes) process.stdout.write(`${JSON.stringify({ pids: [process.pid, ...pids] })}\n`);
    });
    w.on('exit', (code) => {
      if (code !== 0) process.stderr.write(`cluster-gateway: a worker exited with ${code}\n`);
    });
  }
  onStop(async () => {
    await Promise.all(workers.map((w) => new Promise<void>((r) => (w.isDead() ? r() : (w.once('exit', () => r()), w.kill('SIGTERM'))))));
  });
}

const opts = JSON.parse(process.env.GP_CLUSTER_GATEWAY ?? process.argv[2] ?? '{}') as ClusterGatewayOptions;
main(opts).catch((err: unknown) => {
  process.stderr.write(`cluster-gateway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
