// `npm run bench:time-share`: temporal sharing against keeping both models resident (issue 17), on a
// real `glidepath up` with simulated workers. Two models, `day` and `night`, 16 GB each (a wake from
// sleep level 1 takes their size's 2.3 s), whose traffic alternates: a steady open-loop rate on one,
// then on the other, phase after phase. Run once with both on one GPU in a time-share group (the
// defaults: min_active_ms 10 s, idle_ms 2 s) and once with a GPU each. For each: requests, failures
// (must be 0), time to the response's headers (p50, p99, max) per model, how many requests waited
// for a switch, and the switches with their wake and total time.
// Writes bench/results/time-share.md and time-share.json. Loopback only; every process is stopped.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { ROOT, cleanupAll, loadAgent, removeDir, startUp, streamChat, tempDir, writeConfig } from '../test/helpers/e2e-up.js';
import type { StreamResult, UpProcess } from '../test/helpers/e2e-up.js';
import type { SchedulerView } from '../src/api/routes/scheduler.js';

const PHASE_MS = 15_000;
const PHASES = ['day', 'night', 'day', 'night'] as const;
const RATE_PER_S = 5;
const TOKENS = 32;
const ITL_MS = 10;
/** A request that took this much longer than the resident p50 waited for a switch. */
const WAITED_MS = 500;

function yaml(dataDir: string, shared: boolean): string {
  const model = (name: string, seed: number) => [
    `  - name: ${name}`,
    `    versions: [{ id: v1, replicas: 1, gpu_memory_gb: 16, provider: { kind: sim, sim: { seed: ${seed}, inter_token_ms: ${ITL_MS}, jitter: 0 } } }]`,
  ];
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    `gpus: { count: ${shared ? 1 : 2}, memory_gb: 80 }`,
    ...(shared ? ['time_sharing:', '  - { name: shift, models: [day, night] }'] : []),
    'models:',
    ...model('day', 1),
    ...model('night', 2),
    '',
  ].join('\n');
}

interface Tagged extends StreamResult {
  model: string;
}

interface Run {
  config: string;
  gpus: number;
  requests: number;
  failed: number;
  failures: string[];
  perModel: { model: string; requests: number; p50: number; p99: number; max: number; waited: number }[];
  switches: { to: string; wakeMs: number | null; totalMs: number; released: number; why: string }[];
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number);
};

/** The phases at a steady open-loop rate: requests go at their time whether or not earlier ones are answered. */
async function traffic(up: UpProcess): Promise<Tagged[]> {
  const agent = loadAgent(64);
  const out: Promise<Tagged>[] = [];
  const t0 = performance.now();
  let i = 0;
  for (const [p, model] of PHASES.entries()) {
    const end = (p + 1) * PHASE_MS;
    for (let at = p * PHASE_MS; at < end; at += 1000 / RATE_PER_S) {
      const wait = t0 + at - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const n = i++;
      out.push(streamChat(up.dataUrl, { model, prompt: `${model} request ${n}`, maxTokens: TOKENS, dispatcher: agent }).then((r) => ({ ...r, model })));
    }
  }
  const results = await Promise.all(out);
  await agent.close();
  return results;
}

async function run(shared: boolean, baselineP50?: number): Promise<Run> {
  const dir = tempDir(`bench-time-share-${shared ? 'shared' : 'resident'}`);
  let up: UpProcess | undefined;
  try {
    writeConfig(dir, yaml(`${dir}/state`, shared));
    up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
    const results = await traffic(up);
    const v = await up.ok<SchedulerView>('GET', '/scheduler');
    const failed = results.filter((r) => !r.ok);
    const ttfb = (r: Tagged) => r.headersAt - r.startedAt;
    const residentP50 = baselineP50 ?? quantile(results.map(ttfb), 0.5);
    return {
      config: shared ? 'time-shared: both on 1 GPU' : 'resident: a GPU each',
      gpus: shared ? 1 : 2,
      requests: results.length,
      failed: failed.length,
      failures: failed.slice(0, 5).map((r) => `${r.model}: ${r.error ?? r.status}`),
      perModel: ['day', 'night'].map((model) => {
        const t = results.filter((r) => r.model === model && r.ok).map(ttfb);
        return {
          model,
          requests: t.length,
          p50: quantile(t, 0.5),
          p99: quantile(t, 0.99),
          max: Math.max(...t),
          waited: t.filter((x) => x > residentP50 + WAITED_MS).length,
        };
      }),
      switches: (v.time_sharing[0]?.history ?? []).map((s) => ({ to: s.to, wakeMs: s.wake_ms, totalMs: s.total_ms, released: s.released, why: s.why })),
    };
  } finally {
    await up?.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  }
}

async function main(): Promise<void> {
  const resident = await run(false);
  const p50 = quantile(
    resident.perModel.map((m) => m.p50),
    0.5,
  );
  const shared = await run(true, p50);
  write([resident, shared], p50);
}

function write(runs: Run[], residentP50: number): void {
  const outDir = path.join(ROOT, 'bench/results');
  if (!existsSync(outDir)) mkdirSync(outDir, { recursive: true });
  const f = (x: number | null) => (x === null || !Number.isFinite(x) ? '–' : x.toFixed(0));
  const shared = runs[1] as Run;
  const wakes = shared.switches.filter((s) => s.wakeMs !== null).map((s) => s.wakeMs as number);
  const lines = [
    '# Temporal sharing benchmark',
    '',
    `Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model.trim() ?? '?'}, Node ${process.version}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}; \`glidepath up\`, two simulated models of 16 GB (a wake from sleep level 1: 2.3 s), ${ITL_MS} ms/token, ${TOKENS} tokens a request.`,
    `Traffic alternates: ${RATE_PER_S} requests/s (open loop) on ${PHASES.join(', then ')}, ${PHASE_MS / 1000} s each. The time-share group has the defaults (min_active_ms 10 s, idle_ms 2 s, max_wait_ms 30 s).`,
    `Time to headers: from sending the request to the response's headers (the first token). "Waited": requests more than ${WAITED_MS} ms slower than the resident run's p50 (${f(residentP50)} ms), i.e. held for a switch.`,
    '',
    '| config | GPUs | requests | failed | model | requests | time to headers p50 / p99 / max ms | waited |',
    '|---|---|---|---|---|---|---|---|',
    ...runs.flatMap((r) =>
      r.perModel.map(
        (m, i) =>
          `| ${i === 0 ? r.config : ''} | ${i === 0 ? r.gpus : ''} | ${i === 0 ? r.requests : ''} | ${i === 0 ? r.failed : ''} | ${m.model} | ${m.requests} | ${f(m.p50)} / ${f(m.p99)} / ${f(m.max)} | ${m.waited} |`,
      ),
    ),
    '',
    `Switches of the time-shared run: ${shared.switches.length}; wake ${wakes.length === 0 ? '–' : `${f(Math.min(...wakes))}–${f(Math.max(...wakes))} ms`}, each switch in all ${shared.switches.map((s) => f(s.totalMs)).join(', ')} ms.`,
    '',
    ...shared.switches.map((s) => `- → ${s.to}: wake ${f(s.wakeMs)} ms, total ${f(s.totalMs)} ms, ${s.released} request(s) released — ${s.why}`),
    '',
    ...runs.filter((r) => r.failures.length > 0).map((r) => `Failures in "${r.config}": ${r.failures.join('; ')}`),
  ];
  writeFileSync(path.join(outDir, 'time-share.md'), lines.join('\n') + '\n');
  writeFileSync(path.join(outDir, 'time-share.json'), JSON.stringify({ at: new Date().toISOString(), residentP50, runs }, null, 2) + '\n');
  console.log(lines.join('\n'));
}

main().catch((err: unknown) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
