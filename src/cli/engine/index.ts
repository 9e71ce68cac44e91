// `glidepath engine`: a real llama.cpp worker on the CPU (node-llama-cpp, installed apart), and `engine make-model` to write a tiny seeded test model.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { UsageError } from '../output.js';
import { num, servedNames } from '../sim/index.js';
import { DEFAULTS } from '../../defaults.js';
import type { EngineStartOptions } from '../../engine/options.js';

const D = DEFAULTS.engine;

/** Numeric flags: flag → [option key, kind, help]. */
const NUMERIC: [string, keyof EngineStartOptions, 'posInt' | 'int' | 'port', string][] = [
  ['port', 'port', 'port', 'listen port (0 = any free port)'],
  ['max-num-seqs', 'maxNumSeqs', 'posInt', `sequences generated at once (default ${D.maxNumSeqs})`],
  ['max-waiting-requests', 'maxWaitingRequests', 'int', `requests waiting for a sequence; 503 beyond (default ${D.maxWaitingRequests})`],
  ['max-model-len', 'contextSize', 'posInt', `tokens per sequence, prompt + completion (default: the model's, at most ${D.maxContextSize})`],
  ['threads', 'threads', 'posInt', 'CPU threads llama.cpp uses (default: the cores less one, at least 1)'],
  ['max-logprobs', 'maxLogprobs', 'int', `most top logprobs a request may ask for (default ${D.maxLogprobs})`],
  ['max-loras', 'maxLoras', 'int', 'LoRA adapters loaded at once through /v1/load_lora_adapter (default 0: none)'],
  ['max-body-bytes', 'maxBodyBytes', 'posInt', 'largest accepted request body'],
];

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/** Commander's options → the engine's (throws UsageError naming the flag). */
export function toEngineOptions(raw: Record<string, unknown>): EngineStartOptions {
  const file = raw.model;
  if (typeof file !== 'string' || file.trim() === '') throw new UsageError('--model FILE.gguf is required');
  const modelPath = path.resolve(file);
  if (!existsSync(modelPath) || !statSync(modelPath).isFile()) throw new UsageError(`--model: ${modelPath} is not a file`);
  const o: EngineStartOptions = { modelPath };
  const out = o as unknown as Record<string, unknown>;
  for (const [flag, key, kind] of NUMERIC) {
    const v = raw[camel(flag)];
    if (typeof v === 'string') out[key] = num(flag, v, kind);
  }
  const names = servedNames(raw.servedModelName);
  if (names !== undefined) {
    o.model = names[0];
    o.servedModelNames = names.slice(1);
  }
  if (raw.batchInvariant === true) o.batchInvariant = true;
  for (const k of ['version', 'host'] as const) {
    const v = raw[k];
    if (typeof v === 'string') {
      if (v.trim() === '') throw new UsageError(`--${k} must not be empty`);
      o[k] = v;
    }
  }
  return o;
}

/** Write a generated file (its folder made) and say so on stdout as one JSON line. */
function written(out: string, bytes: Buffer, extra: object = {}): void {
  const file = path.resolve(out);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, bytes);
  process.stdout.write(`${JSON.stringify({ event: 'written', path: file, bytes: bytes.length, ...extra })}\n`);
}

export function register(program: Command): void {
  const cmd = program
    .command('engine')
    .description('run llama.cpp on the CPU as an OpenAI-compatible worker (needs `npm run engine:install`); prints {"event":"listening",...} once loaded')
    .option('--model <file>', 'the GGUF model file')
    .option('--served-model-name <names...>', 'names the model answers to (first is its name; default: the file name)')
    .option('--version <id>', 'version id reported in /version and metrics')
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--batch-invariant', 'evaluate every sequence on its own, so its text never depends on what else runs (exact resumes; less throughput)');
  for (const [flag, , , help] of NUMERIC) cmd.option(`--${flag} <n>`, help);
  cmd.action(async (raw: Record<string, unknown>) => {
    const opts = toEngineOptions(raw);
    const [{ loadLlama }, { EngineServer }, { engineOptions }] = await Promise.all([
      import('../../engine/binding.js'),
      import('../../engine/server.js'),
      import('../../engine/options.js'),
    ]);
    const resolved = engineOptions(opts);
    const server = new EngineServer(resolved, await loadLlama());
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      void server.close().finally(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    let port: number;
    try {
      port = await server.start();
    } catch (e) {
      // a file that is no model, or a port in use: nothing stays listening
      await server.close().catch(() => undefined);
      throw e instanceof Error ? new Error(`glidepath engine: ${resolved.modelPath}: ${e.message}`) : e;
    }
    const url = `http://${resolved.host.includes(':') ? `[${resolved.host}]` : resolved.host}:${port}`;
    process.stdout.write(`${JSON.stringify({ event: 'listening', url, model: resolved.model, version: resolved.version, pid: process.pid })}\n`);
  });

  cmd
    .command('make-model')
    .description('write a tiny llama model with seeded random weights as GGUF (a test model: same seed, same file)')
    .requiredOption('--out <file>', 'where to write the .gguf file')
    .option('--seed <n>', 'weights seed', '1')
    .option('--layers <n>', 'transformer blocks', '2')
    .option('--embedding <n>', 'width of the model (a multiple of --heads)', '64')
    .option('--heads <n>', 'attention heads', '4')
    .option('--feed-forward <n>', 'width of the feed-forward layers', '128')
    .option('--context-length <n>', 'the context the model declares', '2048')
    .action(async (raw: Record<'out' | 'seed' | 'layers' | 'embedding' | 'heads' | 'feedForward' | 'contextLength', string>) => {
      const { makeTinyModel } = await import('../../engine/tiny-model.js');
      const embedding = num('embedding', raw.embedding, 'posInt');
      const heads = num('heads', raw.heads, 'posInt');
      if (embedding % heads !== 0) throw new UsageError(`--embedding ${embedding} is not a multiple of --heads ${heads}`);
      const m = makeTinyModel({
        seed: num('seed', raw.seed, 'int'),
        layers: num('layers', raw.layers, 'posInt'),
        embedding,
        heads,
        feedForward: num('feed-forward', raw.feedForward, 'posInt'),
        contextLength: num('context-length', raw.contextLength, 'posInt'),
      });
      written(raw.out, m.bytes, { weights_sha256: m.weightsSha256 });
    });

  cmd
    .command('make-adapter')
    .description('write a LoRA adapter with seeded random weights for a model of make-model (same --layers and --embedding)')
    .requiredOption('--out <file>', 'where to write the .gguf file')
    .option('--seed <n>', 'weights seed', '1')
    .option('--rank <n>', 'the adapter rank', '4')
    .option('--layers <n>', "the base model's transformer blocks", '2')
    .option('--embedding <n>', "the base model's width", '64')
    .action(async (raw: Record<'out' | 'seed' | 'rank' | 'layers' | 'embedding', string>) => {
      const { makeTinyAdapter } = await import('../../engine/tiny-model.js');
      const bytes = makeTinyAdapter({
        seed: num('seed', raw.seed, 'int'),
        rank: num('rank', raw.rank, 'posInt'),
        layers: num('layers', raw.layers, 'posInt'),
        embedding: num('embedding', raw.embedding, 'posInt'),
      });
      written(raw.out, bytes);
    });
}
