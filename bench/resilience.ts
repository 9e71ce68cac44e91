// `npm run bench:resilience`: streams that survive their workers (issue 15), on a real `glidepath up`
// over four simulated workers (20 ms per token), 100 concurrent streams at temperature 0 per wave.
//   kill:    a serving worker killed with SIGKILL every 2 s (and replaced by the health controller)
//            across several waves;
//   hang:    one worker stops sending mid-stream (caught by the 1.5 s idle limit);
//   garbage: one worker starts sending invalid SSE mid-stream;
//   drop:    one worker drops its connections mid-stream, its process alive (kill -9's break, nothing
//            to replace).
// For each: client-visible failures (must be 0), streams whose text or usage differ from the unbroken
// reference (must be 0), streams resumed, and the stall a migration added (the gateway's histogram:
// from the break's detection to the continuation's first bytes at the client) against the target:
// one re-prefill of the prompt and the text already generated on the simulator (the mean re-prefill
// per migration at the simulator's prefill rate) + 20 ms. The hang's detection itself is the idle limit.
// Writes bench/results/resilience.md and resilience.json. Loopback only; every process is stopped.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { ROOT, cleanupAll, removeDir, startUp, tempDir, writeConfig } from '../test/helpers/e2e-up.js';
import type { UpProcess } from '../test/helpers/e2e-up.js';
import { compare, killEvery, migrationMetrics, resilienceYaml, setFault, stallQuantileMs, wave, workers } from '../test/helpers/e2e-resume.js';
import type { MigrationMetrics, Streamed } from '../test/helpers/e2e-resume.js';
import { DEFAULTS } from '../src/defaults.js';

const STREAMS = 100;
const TOKENS = 160;
const ITL_MS = 20;
const IDLE_MS = 1500;
const KILL_WAVES = 4;
const PREFILL_PER_S = DEFAULTS.sim.prefillTokensPerS;
const PROMPTS = Array.from({ length: STREAMS }, (_, i) => `describe in detail how stream ${i} keeps going when its worker dies`);

interface Result {
  scenario: string;
  streams: number;
  failures: number;
  failureSamples: string[];
  textDiffers: number;
  usageDiffers: number;
  resumed: number;
  notResumed: Record<string, number>;
  kills: number;
  /** The gateway's stall per migration (bucket bounds, ms): at most this much for half of them, for 99 %. */
  stallP50: number;
  stallP99: number;
  meanStallMs: number;
  /** One re-prefill of the mean migration's prompt + text at the simulator's rate, + 20 ms. */
  targetMs: number;
  met: boolean;
  reprefillTokens: number;
  /** Kill scenario: each kill's migrations (the gateway's metrics read just before each kill). */
  perKill?: KillStalls[];
}

/** One kill's migrations: how many, their stall's mean, and the bucket bounds under which half, 99 % and all fell. */
interface KillStalls {
  migrations: number;
  meanMs: number;
  p50: number;
  p99: number;
  max: number;
}

function killStalls(before: MigrationMetrics, after: MigrationMetrics): KillStalls {
  const n = after.stallCount - before.stallCount;
  return {
    migrations: n,
    meanMs: n > 0 ? ((after.stallSumS - before.stallSumS) / n) * 1000 : NaN,
    p50: stallQuantileMs(before, after, 0.5),
    p99: stallQuantileMs(before, after, 0.99),
    max: stallQuantileMs(before, after, 1),
  };
}

async function allServing(up: UpProcess, n: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await workers(up)).filter((w) => w.state === 'ready' && (w.weight ?? 0) === 1).length < n) {
    if (Date.now() > deadline) throw new Error(`never ${n} serving workers`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function scenario(
  up: UpProcess,
  name: string,
  ref: ReadonlyMap<string, Streamed>,
  run: () => Promise<{ got: Streamed[]; kills: number; snaps?: MigrationMetrics[] }>,
): Promise<Result> {
  const before = await migrationMetrics(up);
  const { got, kills, snaps } = await run();
  const after = await migrationMetrics(up);
  const c = compare(got, ref);
  const notResumed: Record<string, number> = {};
  for (const [k, v] of Object.entries(after.outcomes)) if (k !== 'resumed' && v - (before.outcomes[k] ?? 0) > 0) notResumed[k] = v - (before.outcomes[k] ?? 0);
  const n = after.stallCount - before.stallCount;
  const resumed = (after.outcomes.resumed ?? 0) - (before.outcomes.resumed ?? 0);
  const reprefill = after.reprefill - before.reprefill;
  const targetMs = (reprefill / Math.max(1, n) / PREFILL_PER_S) * 1000 + 20;
  const p99 = stallQuantileMs(before, after, 0.99);
  return {
    scenario: name,
    streams: got.length,
    failures: c.failed.length,
    failureSamples: c.failed.slice(0, 5),
    textDiffers: c.textDiffers,
    usageDiffers: c.usageDiffers,
    resumed,
    notResumed,
    kills,
    stallP50: stallQuantileMs(before, after, 0.5),
    stallP99: p99,
    meanStallMs: n > 0 ? ((after.stallSumS - before.stallSumS) / n) * 1000 : NaN,
    targetMs,
    met: p99 <= targetMs,
    reprefillTokens: reprefill,
    perKill: snaps?.map((s, i) => killStalls(s, snaps[i + 1] ?? after)),
  };
}

async function main(): Promise<void> {
  const dir = tempDir('bench-resilience');
  const results: Result[] = [];
  let up: UpProcess | undefined;
  try {
    writeConfig(dir, resilienceYaml(`${dir}/state`, { replicas: 4, interTokenMs: ITL_MS, idleTimeoutMs: IDLE_MS }));
    up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
    const u = up;
    await allServing(u, 4);
    const first = (await workers(u))[0] as { endpoint: string };
    const ref = new Map<string, Streamed>();
    for (const r of await wave(first.endpoint, PROMPTS, TOKENS)) ref.set(r.prompt, r);
    if ([...ref.values()].some((r) => !r.ok)) throw new Error('a reference stream failed');

    results.push(
      await scenario(u, `kill -9 a worker every 2 s, ${KILL_WAVES} waves`, ref, async () => {
        let finish!: () => void;
        const done = new Promise<void>((r) => (finish = r));
        const snaps: MigrationMetrics[] = [];
        const kills = killEvery(u, 2_000, done, { busy: true, beforeKill: async () => void snaps.push(await migrationMetrics(u)) });
        const got: Streamed[] = [];
        for (let i = 0; i < KILL_WAVES; i++) got.push(...(await wave(u.dataUrl, PROMPTS, TOKENS)));
        finish();
        return { got, kills: (await kills).length, snaps };
      }),
    );
    await allServing(u, 4);
    for (const [name, fault] of [
      [`one worker hangs after 40 tokens (idle limit ${IDLE_MS} ms)`, { stall_after_tokens: 40 }],
      ['one worker sends invalid SSE after 40 tokens', { garbage_after_tokens: 40 }],
      // the same break as a kill -9 at the socket, without a process exit to handle and a replacement to start
      ['one worker drops its connections after 40 tokens (its process lives)', { crash_after_tokens: 40 }],
    ] as const) {
      const bad = (await workers(u)).find((w) => w.state === 'ready' && (w.weight ?? 0) === 1) as { endpoint: string };
      results.push(
        await scenario(u, name, ref, async () => {
          await setFault(bad.endpoint, fault);
          try {
            return { got: await wave(u.dataUrl, PROMPTS, TOKENS), kills: 0 };
          } finally {
            await setFault(bad.endpoint, {}).catch(() => undefined);
          }
        }),
      );
      await allServing(u, 4);
    }
  } finally {
    await up?.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  }
  write(results);
}

function write(results: Result[]): void {
  const outDir = path.join(ROOT, 'bench/results');
  if (!existsSync(outDir)) mkdirSync(outDir, { recursive: true });
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
  const lines = [
    '# Resilience benchmark',
    '',
    `Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model.trim() ?? '?'}, Node ${process.version}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )}; \`glidepath up\`, 4 simulated workers at ${ITL_MS} ms/token (prefill ${PREFILL_PER_S} tokens/s), ${STREAMS} concurrent streams of ${TOKENS} tokens at temperature 0 per wave, each compared with its unbroken reference.`,
    "Stall: what a migration added, from the break's detection to the continuation's first bytes at the client (`glidepath_stream_migration_stall_seconds`; p50/p99 are the histogram's bucket bounds, so \"≤\"). Target: p99 ≤ one re-prefill of the mean migration's prompt and text at the simulator's prefill rate + 20 ms. A hang is detected by the idle limit first.",
    '',
    '| scenario | streams | client-visible failures | text ≠ reference | usage ≠ reference | resumed | not resumed | kills | stall p50 / p99 ms | mean stall ms | target ms | met | tokens re-prefilled |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${r.streams} | ${r.failures} | ${r.textDiffers} | ${r.usageDiffers} | ${r.resumed} | ${JSON.stringify(r.notResumed)} | ${r.kills} | ≤ ${f(r.stallP50)} / ≤ ${f(r.stallP99)} | ${f(r.meanStallMs)} | ${f(r.targetMs)} | ${r.met ? 'yes' : 'NO'} | ${r.reprefillTokens} |`,
    ),
    '',
    ...results.flatMap((r) =>
      r.perKill === undefined
        ? []
        : [
            `Stall by kill in "${r.scenario}" (the gateway's metrics read just before each kill; the first kill after the gateway started runs the code paths of migration for the first time, before V8 has compiled them):`,
            '',
            '| kill | migrations | mean ms | p50 / p99 / max ms (bucket bounds) |',
            '|---|---|---|---|',
            ...r.perKill.map((k, i) => `| ${i + 1} | ${k.migrations} | ${f(k.meanMs)} | ≤ ${f(k.p50)} / ≤ ${f(k.p99)} / ≤ ${f(k.max)} |`),
            '',
          ],
    ),
    ...results.filter((r) => r.failureSamples.length > 0).map((r) => `Failures in "${r.scenario}": ${r.failureSamples.join('; ')}`),
  ];
  writeFileSync(path.join(outDir, 'resilience.md'), lines.join('\n') + '\n');
  writeFileSync(path.join(outDir, 'resilience.json'), JSON.stringify({ at: new Date().toISOString(), results }, null, 2) + '\n');
  console.log(lines.join('\n'));
}

main().catch((err: unknown) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
