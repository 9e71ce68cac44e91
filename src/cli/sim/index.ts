// `glidepath sim`: run one or more simulated vLLM workers; prints one JSON "listening" line each.
import { KV_ROLES } from '../../sim/disagg.js';
import type { KvRole } from '../../sim/disagg.js';
import type { Command } from 'commander';
import { DEFAULTS } from '../../defaults.js';
import { startSimFleet, type SimHandle, type SimStartOptions } from '../../sim/index.js';
import { checkOptions, withDefaults, type SimFaultSpec } from '../../sim/options.js';
import { UsageError } from '../output.js';

type Kind = 'int' | 'posInt' | 'nonNeg' | 'positive' | 'fraction' | 'port' | 'status';

const NUM_RE = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** `--served-model-name a b,c`: the names, in order (undefined: not given); none at all is a usage error. */
export function servedNames(served: unknown): [string, ...string[]] | undefined {
  if (!Array.isArray(served)) return undefined;
  const names = (served as string[])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) throw new UsageError('--served-model-name needs at least one name');
  return names as [string, ...string[]];
}

/** Parse a numeric flag strictly; a bad value is a usage error naming the flag. */
export function num(flag: string, v: string, kind: Kind): number {
  const n = NUM_RE.test(v.trim()) ? Number(v) : NaN;
  const fail = (what: string) => new UsageError(`--${flag} must be ${what}, got ${JSON.stringify(v)}`);
  if (!Number.isFinite(n)) throw fail('a number');
  switch (kind) {
    case 'int':
      if (!Number.isInteger(n) || n < 0) throw fail('a non-negative integer');
      break;
    case 'posInt':
      if (!Number.isInteger(n) || n < 1) throw fail('a positive integer');
      break;
    case 'nonNeg':
      if (n < 0) throw fail('a non-negative number');
      break;
    case 'positive':
      if (n <= 0) throw fail('a positive number');
      break;
    case 'fraction':
      if (n < 0 || n > 1) throw fail('a number from 0 to 1');
      break;
    case 'port':
      if (!Number.isInteger(n) || n < 0 || n > 65535) throw fail('a port from 0 to 65535');
      break;
    case 'status':
      if (!Number.isInteger(n) || n < 400 || n > 599) throw fail('an HTTP status from 400 to 599');
      break;
  }
  // the simulator's times wait on timers: past 2^31 - 1 ms one fires after 1 ms
  if (flag.endsWith('-ms') && n > DEFAULTS.durations.timerMaxMs) throw fail(`at most ${DEFAULTS.durations.timerMaxMs} (~24.8 days)`);
  return n;
}

/** Numeric flags: flag name → [option key, kind, help]. */
const NUMERIC: [string, keyof SimStartOptions, Kind, string][] = [
  ['seed', 'seed', 'int', 'version seed (default: a hash of --version); text = f(seed, model, adapter, context)'],
  ['load-time-ms', 'loadTimeMs', 'nonNeg', 'time until /health is 200 (and to wake from sleep level 2)'],
  ['prefill-tokens-per-s', 'prefillTokensPerS', 'positive', 'prompt tokens per second (TTFT = queue + prompt / rate)'],
  ['inter-token-ms', 'interTokenMs', 'nonNeg', 'time between tokens at one running sequence'],
  ['itl-growth-per-seq', 'itlGrowthPerSeq', 'nonNeg', 'fractional ITL growth per extra running sequence'],
  ['jitter', 'jitter', 'fraction', 'relative std-dev of seeded timing jitter'],
  ['kv-capacity-tokens', 'kvCapacityTokens', 'posInt', 'KV cache size in tokens (requests reserve prompt + max_tokens)'],
  ['max-num-seqs', 'maxNumSeqs', 'posInt', 'most running sequences'],
  ['max-model-len', 'maxModelLen', 'posInt', 'context window (prompt + completion)'],
  ['default-max-tokens', 'defaultMaxTokens', 'posInt', 'tokens generated when a request gives no max_tokens'],
  ['eos-rate', 'eosRate', 'fraction', 'chance per token that generation ends (EOS)'],
  ['hallucination-rate', 'hallucinationRate', 'fraction', 'share of generated words drawn from the marked vocabulary'],
  ['max-loras', 'maxLoras', 'int', 'LoRA adapter slots'],
  ['lora-load-ms', 'loraLoadMs', 'int', 'time a LoRA adapter takes to load'],
  ['wake-ms', 'wakeMs', 'int', 'time to wake from sleep level 1 (weights in CPU memory)'],
  ['reload-ms', 'reloadMs', 'int', 'time to wake from sleep level 2 (weights read again)'],
  [
    'warmup-requests',
    'warmupRequests',
    'int',
    `requests served to itself before listening, its code compiled first (default ${DEFAULTS.sim.warmupRequests}; 0: none)`,
  ],
  ['max-body-bytes', 'maxBodyBytes', 'posInt', 'largest accepted request body'],
  ['max-waiting-requests', 'maxWaitingRequests', 'int', 'waiting-queue bound (503 beyond it)'],
  ['max-logprobs', 'maxLogprobs', 'int', 'most top logprobs a request may ask for'],
];

const FAULTS: [string, keyof SimFaultSpec, Kind | 'bool', string][] = [
  ['error-rate', 'errorRate', 'fraction', 'fault: share of requests answered with an error before the first token'],
  ['error-status', 'errorStatus', 'status', 'fault: HTTP status of injected errors (default 500)'],
  ['crash-after-tokens', 'crashAfterTokens', 'int', 'fault: destroy the socket after N tokens'],
  ['stall-after-tokens', 'stallAfterTokens', 'int', 'fault: stop sending after N tokens, keeping the connection open'],
  ['garbage-after-tokens', 'garbageAfterTokens', 'int', 'fault: send an invalid SSE event after N tokens, then nothing'],
  ['latency-multiplier', 'latencyMultiplier', 'positive', 'fault: multiply every delay'],
  ['hang', 'hang', 'bool', 'fault: accept requests and send nothing'],
  ['corrupt', 'corrupt', 'bool', 'fault: silent corruption (wrong tokens, shifted logprobs, HTTP 200)'],
  ['logprob-drift', 'logprobDrift', 'nonNeg', 'fault: subtle corruption: logprobs shifted down by N nats, same tokens'],
  ['flap-ms', 'flapMs', 'posInt', 'fault: answer errors every other period of N ms'],
  ['process-exit', 'processExit', 'bool', 'fault: exit the process on the next inference request'],
];

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/** Turn parsed commander options into simulator options (throws UsageError). */
export function toSimOptions(raw: Record<string, unknown>): SimStartOptions & { workers: number; portBase: number | undefined } {
  const o: SimStartOptions = {};
  const out = o as Record<string, unknown>;
  const str = (k: string) => (typeof raw[k] === 'string' ? raw[k] : undefined);
  for (const [flag, key, kind] of NUMERIC) {
    const v = str(camel(flag));
    if (v !== undefined) out[key] = num(flag, v, kind);
  }
  const faults: SimFaultSpec = {};
  const fout = faults as Record<string, unknown>;
  for (const [flag, key, kind] of FAULTS) {
    const k = camel(flag);
    if (kind === 'bool') {
      if (raw[k] === true) fout[key] = true;
    } else {
      const v = str(k);
      if (v !== undefined) fout[key] = num(flag, v, kind);
    }
  }
  o.faults = faults;
  const model = str('model');
  if (model !== undefined) {
    if (model.trim() === '') throw new UsageError('--model must not be empty');
    o.model = model;
  }
  const names = servedNames(raw.servedModelName);
  if (names !== undefined) {
    // like vLLM: the first served name is the model's name, the rest are aliases
    if (model === undefined) o.model = names[0];
    o.servedModelNames = names.filter((n) => n !== o.model);
  }
  const version = str('version');
  if (version !== undefined) {
    if (version.trim() === '') throw new UsageError('--version must not be empty');
    o.version = version;
  }
  const host = str('host');
  if (host !== undefined) o.host = host;
  const kvRole = str('kvRole');
  if (kvRole !== undefined) {
    if (!(KV_ROLES as readonly string[]).includes(kvRole)) throw new UsageError(`--kv-role: expected ${KV_ROLES.join(', ')}, got ${JSON.stringify(kvRole)}`);
    o.kvRole = kvRole as KvRole;
  }
  const kvLayout = str('kvLayout');
  if (kvLayout !== undefined) {
    if (kvLayout.trim() === '') throw new UsageError('--kv-layout must not be empty');
    o.kvLayout = kvLayout;
  }
  const portStr = str('port');
  const baseStr = str('portBase');
  const workersStr = str('workers');
  const workers = workersStr === undefined ? 1 : num('workers', workersStr, 'posInt');
  const port = portStr === undefined ? undefined : num('port', portStr, 'port');
  const portBase = baseStr === undefined ? undefined : num('port-base', baseStr, 'port');
  if (port !== undefined && portBase !== undefined) throw new UsageError('give --port or --port-base, not both');
  if (workers > 1 && port !== undefined && port !== 0) throw new UsageError('--workers > 1 needs --port-base P (ports P, P+1, …) or --port 0');
  if (portBase !== undefined && portBase !== 0 && portBase + workers - 1 > 65535)
    throw new UsageError(`--port-base ${portBase} + ${workers} workers runs past port 65535`);
  o.port = port ?? portBase ?? DEFAULTS.sim.port;
  // withDefaults, not resolveOptions: resolveOptions throws a RangeError (exit 1), a usage error must exit 2
  const problems = checkOptions(withDefaults({ ...o, faults: {} }));
  if (problems.length > 0) throw new UsageError(problems.join('; '));
  return { ...o, workers, portBase: portBase ?? (workers > 1 ? o.port : undefined) };
}

export function register(program: Command): void {
  const cmd = program
    .command('sim')
    .description('run simulated vLLM-compatible workers; prints {"event":"listening",...} per worker on stdout')
    .option('--port <port>', `listen port (0 = any free port; default ${DEFAULTS.sim.port})`)
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--model <name>', `model name (default ${DEFAULTS.sim.model}; "${DEFAULTS.sim.judgeModel}" makes a judge)`)
    .option('--served-model-name <names...>', 'names the model answers to (first is its name, as in vLLM)')
    .option('--version <id>', `version id reported in /version and metrics (default ${DEFAULTS.sim.version})`)
    .option('--workers <n>', 'number of workers in this process', undefined)
    .option('--port-base <port>', 'first port when running several workers (ports P, P+1, …)')
    .option('--kv-role <role>', 'disaggregated serving: both (default; whole requests and either leg), prefill or decode')
    .option('--kv-layout <name>', "disaggregated serving: the KV layout this worker writes and reads (its card); a decode worker refuses another's blocks");
  for (const [flag, , , help] of NUMERIC) cmd.option(`--${flag} <n>`, help);
  for (const [flag, , kind, help] of FAULTS) cmd.option(kind === 'bool' ? `--${flag}` : `--${flag} <n>`, help);
  cmd.action(async (raw: Record<string, unknown>) => {
    const { workers, portBase, ...opts } = toSimOptions(raw);
    // handlers go in before anything listens, so a signal right after the listening line is never missed
    let handles: SimHandle[] = [];
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      void Promise.all(handles.map((h) => h.close())).finally(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    const warmupRequests = opts.warmupRequests ?? DEFAULTS.sim.warmupRequests;
    handles = await startSimFleet(workers, { ...opts, warmupRequests, portBase: portBase ?? opts.port ?? 0, onProcessExit: 'exit' });
    if (stopping) {
      await Promise.all(handles.map((h) => h.close()));
      return;
    }
    for (const h of handles) {
      process.stdout.write(`${JSON.stringify({ event: 'listening', url: h.url, model: h.model, version: h.version, pid: process.pid })}\n`);
    }
  });
}
