// bench:scale's models part, what it keeps and how it reads: the rows of each round, the medians per cell, the
// CPU of each cell against the one-model cell of the same round (paired: the machine's speed moves between
// minutes, and a ratio taken within one round cancels it), and the Markdown with the targets (issue 18).
import { quantileSorted } from '../../src/domain/quantile.js';
import type { ScaleGatewayReport } from './scale-gateway.js';

/** `dataplane`: bench/lib/scale-gateway.ts (the data plane alone); `up`: a whole `glidepath up` (control plane, health, scheduler) over static endpoints. */
export type Kind = 'dataplane' | 'up';
export type GatewayKey = `${Kind} ${'one' | 'many'}`;

export interface Row {
  cell: string;
  round: number;
  rps: number;
  cpuPerReqUs: number;
  /** cpuPerReqUs less the gateway's idle CPU over the same window (what the requests cost). */
  netCpuPerReqUs: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
  /** The gateway's open descriptors at the cell's end (client and upstream connections, listeners, files). */
  fds: number;
}

export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length === 0 ? NaN : quantileSorted(s, 0.5);
}

export function f(n: number, d = 1): string {
  return Number.isFinite(n) ? n.toFixed(d) : '–';
}

/** The models part's results as scale.json keeps them (so that a run of the other part can write them again). */
export interface ModelsData {
  runAt: string;
  node: string;
  cpus: string;
  models: number;
  workersPerVersion: number;
  adaptersPerModel: number;
  durationMs: number;
  warmupMs: number;
  repeats: number;
  connections: number;
  cells: Med[];
  gateways: Partial<Record<GatewayKey, ScaleGatewayReport>>;
  rssAfterMiB: Partial<Record<GatewayKey, number>>;
  /** Each gateway's CPU with no traffic (ms per s, over idleMs); absent in results from before it was measured. */
  idleMs?: number;
  idleCpuMsPerS?: Partial<Record<GatewayKey, number>>;
}

export interface Med {
  cell: string;
  gateway: GatewayKey;
  rps: number;
  cpuPerReqUs: number;
  netCpuPerReqUs?: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
  fds: number;
  rounds: { rps: number; cpuPerReqUs: number; netCpuPerReqUs?: number; fds: number }[];
}

/** Each cell's medians over its rounds (rounds in order: round i of every cell ran in the same rotation). */
export function summarize(cells: { name: string; gateway: GatewayKey }[], rows: Row[]): Med[] {
  return cells.map((c): Med => {
    const rs = rows.filter((r) => r.cell === c.name).sort((a, b) => a.round - b.round);
    return {
      cell: c.name,
      gateway: c.gateway,
      rps: median(rs.map((r) => r.rps)),
      cpuPerReqUs: median(rs.map((r) => r.cpuPerReqUs)),
      netCpuPerReqUs: median(rs.map((r) => r.netCpuPerReqUs)),
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      requests: rs.reduce((a, r) => a + r.requests, 0),
      fds: Math.max(...rs.map((r) => r.fds)),
      rounds: rs.map((r) => ({ rps: r.rps, cpuPerReqUs: r.cpuPerReqUs, netCpuPerReqUs: r.netCpuPerReqUs, fds: r.fds })),
    };
  });
}

/** Per round, a cell's net CPU per request over its base cell's in the same round (gross where net is not known). */
export function pairedRatios(m: Med, base: Med): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(m.rounds.length, base.rounds.length); i++) {
    const a = m.rounds[i] as Med['rounds'][number];
    const b = base.rounds[i] as Med['rounds'][number];
    out.push((a.netCpuPerReqUs ?? a.cpuPerReqUs) / (b.netCpuPerReqUs ?? b.cpuPerReqUs));
  }
  return out;
}

export function modelsMarkdown(data: ModelsData): { lines: string[]; checks: [string, boolean, string][] } {
  const med = data.cells;
  const gw = data.gateways;
  const rss = data.rssAfterMiB;
  /** The one-model cell of the same kind of gateway. */
  const baseOf = (m: Med): Med => med.find((x) => x.gateway === `${m.gateway.split(' ')[0] as Kind} one`) as Med;
  const many = gw['dataplane many'] ?? gw['up many'];
  const lines: string[] = [
    '# Scale: the routing state of many models',
    '',
    `Run ${data.runAt} on ${data.cpus}, Node ${data.node}. Gateways holding 1 model or ${data.models} models; each model has versions v1 (weight 0.9) and v2 (0.1) of ${data.workersPerVersion} workers each and ${data.adaptersPerModel} LoRA adapters (${data.models * 2 * data.workersPerVersion} workers and ${data.models * data.adaptersPerModel} adapters in all), every worker on one simulator at zero delay (they share its endpoint). \`dataplane\`: a data plane and its front alone (\`bench/lib/scale-gateway.ts\`); \`up\`: a whole \`glidepath up\` over static endpoints (control plane, health probes, scheduler). Small non-streaming requests (16 tokens) from ${data.connections} connections of a load generator in its own process; ${data.durationMs} ms measured after ${data.warmupMs} ms warm-up per cell, ${data.repeats} rounds interleaved in rotated order; rates and CPU are medians over the rounds; CPU is the gateway process's utime + stime over the measured window. *Paired*: per round, the cell's net CPU per request over the one-model cell's in the same round (the machine's speed moves between minutes; a ratio within one round cancels most of it), median and range over the rounds: the targets are judged on it. Open descriptors: the gateway's, at the end of a cell (client and upstream connections, listeners, files; the highest over the rounds).`,
    '',
    '| cell | req/s | gateway CPU µs/request (rounds) | vs one model | net of idle CPU: µs/request | net vs one model | paired: net vs one model, median (range) | p50 ms | p99 ms | open descriptors after | errors |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const net = (m: Med): number => m.netCpuPerReqUs ?? NaN;
  const vs = (a: number, b: number): string => `${f(a - b, 1)} µs (${f(100 * (a / b - 1), 1)} %)`;
  const pct = (r: number): string => `${r >= 1 ? '+' : ''}${f(100 * (r - 1), 1)} %`;
  const paired = (m: Med): string => {
    const rs = pairedRatios(m, baseOf(m));
    return rs.length === 0 ? '–' : `${pct(median(rs))} (${pct(Math.min(...rs))} … ${pct(Math.max(...rs))})`;
  };
  for (const m of med) {
    const b = baseOf(m);
    const rounds = m.rounds.map((r) => f(r.cpuPerReqUs, 1)).join(', ');
    lines.push(
      `| ${m.cell} | ${f(m.rps, 0)} | ${f(m.cpuPerReqUs, 1)} (${rounds}) | ${m === b ? '–' : `${vs(m.cpuPerReqUs, b.cpuPerReqUs)}, req/s ${f(m.rps / b.rps, 2)}×`} | ${f(net(m), 1)} | ${m === b ? '–' : vs(net(m), net(b))} | ${m === b ? '–' : paired(m)} | ${f(m.p50, 2)} | ${f(m.p99, 2)} | ${m.fds} | ${m.errors} |`,
    );
  }
  const idle = data.idleCpuMsPerS ?? {};
  if (data.idleMs !== undefined)
    lines.push(
      '',
      `Net of idle CPU: each gateway's CPU with no traffic was measured over ${data.idleMs / 1000} s (all at once, before the cells) and that rate times the window is taken off before dividing by the requests. It is what a gateway spends whatever the traffic — in a whole \`glidepath up\`, mostly per worker: a health probe per worker every 30 s, the health and scheduler ticks over every worker — which the gross figure divides by however many requests the machine let through that round. Both are shown; the targets below are judged on the net figure and the gross one is given beside it.`,
    );
  lines.push(
    '',
    '| gateway | models | workers | adapters | start ms | route publish p50 / p99 / max ms (200 publishes) | heap used MiB (after GC, before traffic) | RSS MiB before / after traffic | idle CPU ms/s |',
    '|---|---|---|---|---|---|---|---|---|',
  );
  for (const [k, g] of Object.entries(gw) as [GatewayKey, ScaleGatewayReport][]) {
    lines.push(
      `| ${k} | ${g.models} | ${g.workers} | ${g.adapters} | ${f(g.buildMs, 0)} | ${f(g.publishMs.p50, 3)} / ${f(g.publishMs.p99, 3)} / ${f(g.publishMs.max, 3)} | ${f(g.heapUsedMiB ?? NaN, 1)} | ${f(g.rssMiB, 0)} / ${f(rss[k] ?? NaN, 0)} | ${f(idle[k] ?? NaN, 1)} |`,
    );
  }
  const checks: [string, boolean, string][] = med
    .filter((m) => m !== baseOf(m))
    .map((m): [string, boolean, string] => {
      const b = baseOf(m);
      const gross = `${f(100 * (m.cpuPerReqUs / b.cpuPerReqUs - 1), 1)} %`;
      const rs = pairedRatios(m, b);
      const r = median(rs);
      return [
        `${m.cell}: CPU/request within 10 % of one model (${Number.isFinite(net(m)) ? 'net of idle CPU, ' : ''}paired rounds, median)`,
        r <= 1.1,
        `${pct(r)} (${rs.filter((x) => x <= 1.1).length} of ${rs.length} rounds within 10 %; medians of the cells: ${Number.isFinite(net(m)) ? `${pct(net(m) / net(b))} net, ` : ''}${gross} gross)`,
      ];
    });
  if (many !== undefined && Number.isFinite(many.publishMs.max ?? NaN)) {
    checks.push([`route publish under 10 ms at ${many.models} models`, many.publishMs.max < 10, `max ${f(many.publishMs.max, 3)} ms`]);
  }
  return { lines, checks };
}
