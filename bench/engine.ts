// `npm run bench:engine`: one real llama.cpp worker (`glidepath engine`, issue 20) on this machine,
// and what the gateway adds in front of it. For two generated models (the tests' tiny one and a
// larger one, both written here by make-model), in rounds of direct then through `glidepath up`:
//   - latency: sequential streamed chats (one at a time): time to first token, time per output token;
//   - throughput: 4 clients at once (the engine's --max-num-seqs): tokens/s, and the CPU each process
//     spends per token (the gateway's is its whole overhead: it does no inference).
// Writes bench/results/engine.md and engine.json. Needs `npm run engine:install`. Loopback only.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { readSse } from '../src/cli/client.js';
import { quantileSorted } from '../src/domain/quantile.js';
import { bindingInstalled } from '../src/engine/binding.js';
import { makeTinyModel } from '../src/engine/tiny-model.js';
import type { TinyModelOptions } from '../src/engine/tiny-model.js';
import { cpuMs, freePort, start, waitFor, ROOT } from './lib/proc.js';
import type { Proc } from './lib/proc.js';

const root = ROOT;
const CLI = path.join(root, 'dist/cli/main.js');
const MODEL = 'm';
const ROUNDS = 5;
const SEQUENTIAL = 40;
const LAT_TOKENS = 32;
const CLIENTS = 4;
const PER_CLIENT = 6;
const TPUT_TOKENS = 128;

const MODELS: { name: string; shape: Omit<TinyModelOptions, 'seed'> }[] = [
  { name: 'tiny (2 layers × 64, the tests’ model)', shape: {} },
  { name: 'small (8 layers × 256, ff 768)', shape: { layers: 8, embedding: 256, heads: 8, feedForward: 768 } },
];

interface Stream {
  ttftMs: number;
  /** Mean time per output token after the first (ms). */
  tpotMs: number;
  tokens: number;
}

async function streamOne(base: string, agent: Agent, prompt: string, maxTokens: number): Promise<Stream> {
  const t0 = performance.now();
  const res = await request(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: prompt }],
      max_tokens: maxTokens,
      temperature: 0,
      ignore_eos: true,
      stream: true,
    }),
    dispatcher: agent,
  });
  if (res.statusCode !== 200) throw new Error(`${base}: status ${res.statusCode}: ${await res.body.text()}`);
  let first = -1;
  let tokens = 0;
  for await (const ev of readSse(res.body)) {
    if (ev.data === '[DONE]' || ev.data === '') continue;
    const j = JSON.parse(ev.data) as { choices?: { delta?: { content?: string } }[] };
    if (j.choices?.[0]?.delta?.content === undefined) continue;
    tokens++;
    if (first < 0) first = performance.now();
  }
  const end = performance.now();
  return { ttftMs: first - t0, tpotMs: tokens > 1 ? (end - first) / (tokens - 1) : NaN, tokens };
}

interface Round {
  ttft: number[];
  tpot: number[];
  /** Aggregate tokens/s of CLIENTS concurrent streams. */
  tokensPerS: number;
  /** CPU ms per 1000 tokens streamed, of the engine and of the gateway (0 direct). */
  engineCpuPerKTok: number;
  gatewayCpuPerKTok: number;
}

/**
 * `gateway`: the gateway process, and whether the traffic goes through it. Its CPU per token is what
 * it spends beyond its idle rate (control loop, timers), measured while the direct rounds leave it idle.
 */
async function round(
  base: string,
  agent: Agent,
  engine: Proc,
  gateway: { proc: Proc; through: boolean; idleCpuPerMs: number[] },
  salt: number,
): Promise<Round> {
  const ttft: number[] = [];
  const tpot: number[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const s = await streamOne(base, agent, `question ${salt}-${i}: tell me about the fleet`, LAT_TOKENS);
    ttft.push(s.ttftMs);
    tpot.push(s.tpotMs);
  }
  const [e0, g0, t0] = [cpuMs(engine.pid), cpuMs(gateway.proc.pid), performance.now()];
  let tokens = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = 0; i < PER_CLIENT; i++) {
        // (not `tokens += (await …)`: that reads `tokens` before the await, and the clients overwrite each other)
        const s = await streamOne(base, agent, `story ${salt}-${c}-${i}`, TPUT_TOKENS);
        tokens += s.tokens;
      }
    }),
  );
  const ms = performance.now() - t0;
  const gatewayCpu = cpuMs(gateway.proc.pid) - g0;
  if (!gateway.through) gateway.idleCpuPerMs.push(gatewayCpu / ms);
  const idle = gateway.idleCpuPerMs.length > 0 ? median(gateway.idleCpuPerMs) * ms : 0;
  return {
    ttft,
    tpot,
    tokensPerS: (tokens / ms) * 1000,
    engineCpuPerKTok: ((cpuMs(engine.pid) - e0) / tokens) * 1000,
    gatewayCpuPerKTok: gateway.through ? (Math.max(0, gatewayCpu - idle) / tokens) * 1000 : 0,
  };
}

const median = (xs: number[]) =>
  quantileSorted(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
const q = (xs: number[], p: number) =>
  quantileSorted(
    [...xs].sort((a, b) => a - b),
    p,
  );
const range = (xs: number[], d = 1) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;

interface Result {
  model: string;
  file_bytes: number;
  load_ms: number;
  direct: Summary;
  gateway: Summary;
  added_ttft_p50_ms: number[];
  gateway_cpu_us_per_token: number[];
}
interface Summary {
  ttft_p50_ms: number[];
  ttft_p99_ms: number[];
  tpot_p50_ms: number[];
  single_stream_tokens_per_s: number[];
  concurrent_tokens_per_s: number[];
  engine_cpu_us_per_token: number[];
}

function summary(rs: Round[]): Summary {
  return {
    ttft_p50_ms: rs.map((r) => q(r.ttft, 0.5)),
    ttft_p99_ms: rs.map((r) => q(r.ttft, 0.99)),
    tpot_p50_ms: rs.map((r) => q(r.tpot, 0.5)),
    single_stream_tokens_per_s: rs.map((r) => 1000 / q(r.tpot, 0.5)),
    concurrent_tokens_per_s: rs.map((r) => r.tokensPerS),
    engine_cpu_us_per_token: rs.map((r) => r.engineCpuPerKTok),
  };
}

async function benchModel(dir: string, m: (typeof MODELS)[number]): Promise<Result> {
  const file = path.join(dir, `${m.shape.layers ?? 2}x${m.shape.embedding ?? 64}.gguf`);
  writeFileSync(file, makeTinyModel({ seed: 1, ...m.shape }).bytes);
  const enginePort = await freePort();
  const loadStart = performance.now();
  const engine = start(process.execPath, [
    CLI,
    'engine',
    '--model',
    file,
    '--served-model-name',
    MODEL,
    '--port',
    String(enginePort),
    '--max-num-seqs',
    String(CLIENTS),
  ]);
  const direct = `http://127.0.0.1:${enginePort}`;
  await waitFor(`${direct}/health`, 60_000);
  const loadMs = performance.now() - loadStart;
  const cfg = path.join(dir, 'glidepath.yaml');
  writeFileSync(
    cfg,
    [
      'server:',
      `  data_dir: ${JSON.stringify(path.join(dir, 'state'))}`,
      'gpus: { count: 8, memory_gb: 80 }',
      'models:',
      `  - name: ${MODEL}`,
      '    versions:',
      '      - id: v1',
      `        provider: { kind: static, endpoints: [${JSON.stringify(direct)}] }`,
      '    route: { weights: { v1: 1 } }',
      '',
    ].join('\n'),
  );
  const [dp, ap] = [await freePort(), await freePort()];
  const gateway = start(process.execPath, [CLI, 'up', '--config', cfg, '--listen', `127.0.0.1:${dp}`, '--admin-listen', `127.0.0.1:${ap}`], {
    ...process.env,
    GLIDEPATH_LOG_LEVEL: 'warn',
  });
  const through = `http://127.0.0.1:${dp}`;
  await waitFor(`${through}/health`, 60_000);
  const agent = new Agent({ connections: CLIENTS + 2, keepAliveTimeout: 30_000 });
  try {
    for (const base of [direct, through]) for (let i = 0; i < 20; i++) await streamOne(base, agent, `warm-up ${i}`, 16);
    const d: Round[] = [];
    const g: Round[] = [];
    const idleCpuPerMs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // direct first in every round: the gateway's idle rate is known before its first loaded round
      d.push(await round(direct, agent, engine, { proc: gateway, through: false, idleCpuPerMs }, r));
      g.push(await round(through, agent, engine, { proc: gateway, through: true, idleCpuPerMs }, r));
      process.stderr.write(`${m.name}: round ${r + 1}/${ROUNDS} done\n`);
    }
    return {
      model: m.name,
      file_bytes: statSync(file).size,
      load_ms: loadMs,
      direct: summary(d),
      gateway: summary(g),
      added_ttft_p50_ms: g.map((x, i) => q(x.ttft, 0.5) - q((d[i] as Round).ttft, 0.5)),
      gateway_cpu_us_per_token: g.map((x) => x.gatewayCpuPerKTok),
    };
  } finally {
    await agent.close();
    await gateway.stop();
    await engine.stop();
  }
}

async function main(): Promise<void> {
  if (!bindingInstalled()) {
    process.stderr.write('bench:engine needs node-llama-cpp: npm run engine:install\n');
    process.exit(1);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-bench-engine-'));
  const started = new Date().toISOString();
  const results: Result[] = [];
  try {
    for (const m of MODELS) results.push(await benchModel(dir, m));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? '?'}, Node ${process.version}`;
  writeFileSync(path.join(root, 'bench/results/engine.json'), `${JSON.stringify({ started, machine, rounds: ROUNDS, results }, null, 2)}\n`);
  const lines = [
    '# bench:engine — a real llama.cpp worker on the CPU, direct and through the gateway',
    '',
    `Run ${started} on ${machine}. \`glidepath engine\` (node-llama-cpp, CPU, threads: the cores less one) with \`--max-num-seqs ${CLIENTS}\`; ` +
      `the gateway is \`glidepath up\` with a static provider in front of that same worker. ${ROUNDS} rounds, each direct then through the gateway; ` +
      `each round: ${SEQUENTIAL} sequential streamed chats of ${LAT_TOKENS} tokens (latency), then ${CLIENTS} clients × ${PER_CLIENT} streams of ${TPUT_TOKENS} tokens (throughput). ` +
      'Medians over rounds with (min–max); TTFT p50/p99 within a round.',
    '',
  ];
  for (const r of results) {
    lines.push(
      `## ${r.model}`,
      '',
      `File ${(r.file_bytes / 1e6).toFixed(1)} MB; process start to /health 200: ${r.load_ms.toFixed(0)} ms.`,
      '',
      '| | direct | through the gateway |',
      '|---|---|---|',
      `| TTFT p50 (ms) | ${range(r.direct.ttft_p50_ms, 2)} | ${range(r.gateway.ttft_p50_ms, 2)} |`,
      `| TTFT p99 (ms) | ${range(r.direct.ttft_p99_ms, 2)} | ${range(r.gateway.ttft_p99_ms, 2)} |`,
      `| time per output token p50 (ms) | ${range(r.direct.tpot_p50_ms, 3)} | ${range(r.gateway.tpot_p50_ms, 3)} |`,
      `| one stream (tokens/s) | ${range(r.direct.single_stream_tokens_per_s, 0)} | ${range(r.gateway.single_stream_tokens_per_s, 0)} |`,
      `| ${CLIENTS} streams at once (tokens/s) | ${range(r.direct.concurrent_tokens_per_s, 0)} | ${range(r.gateway.concurrent_tokens_per_s, 0)} |`,
      `| engine CPU per token (µs) | ${range(r.direct.engine_cpu_us_per_token, 0)} | ${range(r.gateway.engine_cpu_us_per_token, 0)} |`,
      `| gateway CPU per token (µs; beyond its idle rate) | — | ${range(r.gateway_cpu_us_per_token, 1)} |`,
      '',
      `Added TTFT (gateway p50 − direct p50, per round): ${range(r.added_ttft_p50_ms, 2)} ms.`,
      '',
    );
  }
  writeFileSync(path.join(root, 'bench/results/engine.md'), `${lines.join('\n')}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
