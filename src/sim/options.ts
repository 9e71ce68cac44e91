// Simulator options: the resolved per-worker settings (SimSettings + identity), and the fault set.
import { z } from 'zod';
import type { SimSettings } from '../config/types.js';
import { zodLines } from '../config/issues.js';
import { toSnakeFaults, type SimFaultSpec, type SnakeFaults } from '../config/sim-faults.js';
import { DEFAULTS } from '../defaults.js';
import { fnv1a } from './tokenizer.js';
import { KV_ROLES } from './disagg.js';
import type { KvRole } from './disagg.js';

export type { SimFaultSpec };

/** What happens on the process-exit fault: `exit` ends the process (CLI), `close` drops the server (in-process). */
export type ExitMode = 'exit' | 'close';

export interface SimOptions extends Required<Omit<SimSettings, 'faults'>> {
  faults: SimFaultSpec;
  /** Base model name (its text key); also the first served name. */
  model: string;
  /** Extra names the base model answers to (vLLM's --served-model-name aliases). */
  servedModelNames: string[];
  version: string;
  host: string;
  port: number;
  defaultMaxTokens: number;
  maxBodyBytes: number;
  eosRate: number;
  maxWaitingRequests: number;
  maxLogprobs: number;
  judgeModel: string;
  onProcessExit: ExitMode;
  /** Exit code used by the process-exit fault in `exit` mode. */
  exitCode: number;
  /** Disaggregated serving (disagg.ts): the legs this worker serves, and the KV layout it writes and reads. */
  kvRole: KvRole;
  kvLayout: string;
}

export type SimStartOptions = Partial<SimOptions> & { model?: string; version?: string; host?: string; port?: number };

const D = DEFAULTS.sim;

/**
 * The seed a version gets when none is configured: a hash of its id, so two versions differ
 * unless they are given the same seed (same weights under another config, for instance).
 */
export function seedFromVersion(version: string): number {
  return fnv1a(`version:${version}`) & 0x7fffffff;
}

/** Fill every option from DEFAULTS.sim without checking (see `resolveOptions`). */
export function withDefaults(o: SimStartOptions): SimOptions {
  return {
    seed: o.seed ?? seedFromVersion(o.version ?? D.version),
    loadTimeMs: o.loadTimeMs ?? D.loadTimeMs,
    prefillTokensPerS: o.prefillTokensPerS ?? D.prefillTokensPerS,
    interTokenMs: o.interTokenMs ?? D.interTokenMs,
    itlGrowthPerSeq: o.itlGrowthPerSeq ?? D.itlGrowthPerSeq,
    jitter: o.jitter ?? D.jitter,
    kvCapacityTokens: o.kvCapacityTokens ?? D.kvCapacityTokens,
    maxNumSeqs: o.maxNumSeqs ?? D.maxNumSeqs,
    maxModelLen: o.maxModelLen ?? D.maxModelLen,
    hallucinationRate: o.hallucinationRate ?? D.hallucinationRate,
    maxLoras: o.maxLoras ?? D.maxLoras,
    loraLoadMs: o.loraLoadMs ?? D.loraLoadMs,
    wakeMs: o.wakeMs ?? D.wakeMs,
    reloadMs: o.reloadMs ?? D.reloadMs,
    // an in-process simulator (the library, tests) shares a process whose code is warm or short-lived;
    // `glidepath sim` passes DEFAULTS.sim.warmupRequests
    warmupRequests: o.warmupRequests ?? 0,
    faults: { ...(o.faults ?? {}) },
    model: o.model ?? D.model,
    servedModelNames: o.servedModelNames ?? [],
    version: o.version ?? D.version,
    host: o.host ?? '127.0.0.1',
    port: o.port ?? 0,
    defaultMaxTokens: o.defaultMaxTokens ?? D.defaultMaxTokens,
    maxBodyBytes: o.maxBodyBytes ?? D.maxBodyBytes,
    eosRate: o.eosRate ?? D.eosRate,
    maxWaitingRequests: o.maxWaitingRequests ?? D.maxWaitingRequests,
    maxLogprobs: o.maxLogprobs ?? D.maxLogprobs,
    judgeModel: o.judgeModel ?? D.judgeModel,
    onProcessExit: o.onProcessExit ?? 'close',
    exitCode: o.exitCode ?? 1,
    kvRole: o.kvRole ?? 'both',
    kvLayout: o.kvLayout ?? 'default',
  };
}

export function resolveOptions(o: SimStartOptions): SimOptions {
  const out = withDefaults(o);
  const problems = checkOptions(out);
  if (problems.length > 0) throw new RangeError(`invalid simulator options: ${problems.join('; ')}`);
  return out;
}

/** Every problem with resolved options, as "name: expected …, got …". */
export function checkOptions(o: SimOptions): string[] {
  const p: string[] = [];
  const need = (ok: boolean, name: string, what: string, got: unknown) => {
    if (!ok) p.push(`${name}: expected ${what}, got ${JSON.stringify(got)}`);
  };
  const nonNeg = (n: number) => Number.isFinite(n) && n >= 0;
  const posInt = (n: number) => Number.isInteger(n) && n > 0;
  const frac = (n: number) => Number.isFinite(n) && n >= 0 && n <= 1;
  need(Number.isInteger(o.seed) && o.seed >= 0, 'seed', 'a non-negative integer', o.seed);
  need(nonNeg(o.loadTimeMs), 'loadTimeMs', 'a non-negative number', o.loadTimeMs);
  need(Number.isFinite(o.prefillTokensPerS) && o.prefillTokensPerS > 0, 'prefillTokensPerS', 'a positive number', o.prefillTokensPerS);
  need(nonNeg(o.interTokenMs), 'interTokenMs', 'a non-negative number', o.interTokenMs);
  need(nonNeg(o.itlGrowthPerSeq), 'itlGrowthPerSeq', 'a non-negative number', o.itlGrowthPerSeq);
  need(frac(o.jitter), 'jitter', 'a number from 0 to 1', o.jitter);
  need(posInt(o.kvCapacityTokens), 'kvCapacityTokens', 'a positive integer', o.kvCapacityTokens);
  need(posInt(o.maxNumSeqs), 'maxNumSeqs', 'a positive integer', o.maxNumSeqs);
  need(posInt(o.maxModelLen), 'maxModelLen', 'a positive integer', o.maxModelLen);
  need(frac(o.hallucinationRate), 'hallucinationRate', 'a number from 0 to 1', o.hallucinationRate);
  need(Number.isInteger(o.maxLoras) && o.maxLoras >= 0, 'maxLoras', 'a non-negative integer', o.maxLoras);
  need(Number.isFinite(o.loraLoadMs) && o.loraLoadMs >= 0, 'loraLoadMs', 'a non-negative number', o.loraLoadMs);
  need(nonNeg(o.wakeMs), 'wakeMs', 'a non-negative number', o.wakeMs);
  need(nonNeg(o.reloadMs), 'reloadMs', 'a non-negative number', o.reloadMs);
  const maxWarmup = D.maxWarmupRequests;
  need(
    Number.isInteger(o.warmupRequests) && o.warmupRequests >= 0 && o.warmupRequests <= maxWarmup,
    'warmupRequests',
    `an integer from 0 to ${maxWarmup}`,
    o.warmupRequests,
  );
  need(posInt(o.defaultMaxTokens), 'defaultMaxTokens', 'a positive integer', o.defaultMaxTokens);
  need(posInt(o.maxBodyBytes), 'maxBodyBytes', 'a positive integer', o.maxBodyBytes);
  need(frac(o.eosRate), 'eosRate', 'a number from 0 to 1', o.eosRate);
  need(Number.isInteger(o.maxWaitingRequests) && o.maxWaitingRequests >= 0, 'maxWaitingRequests', 'a non-negative integer', o.maxWaitingRequests);
  need(Number.isInteger(o.port) && o.port >= 0 && o.port <= 65535, 'port', 'a port 0-65535', o.port);
  need(o.model.length > 0, 'model', 'a non-empty name', o.model);
  need(KV_ROLES.includes(o.kvRole), 'kvRole', KV_ROLES.join(', '), o.kvRole);
  need(typeof o.kvLayout === 'string' && o.kvLayout.length > 0, 'kvLayout', 'a non-empty layout name', o.kvLayout);
  const f = faultSchema.safeParse(toSnakeFaults(o.faults), { reportInput: true });
  if (!f.success) p.push(...zodLines(f.error, 'faults', ['faults']));
  return p;
}

/** The body of the simulator's POST /admin/faults (snake_case names: config/sim-faults.ts), validated strictly: unknown keys are errors. */
export const faultSchema = z
  .object({
    error_rate: z.number().min(0).max(1).optional(),
    error_status: z.number().int().min(400).max(599).optional(),
    crash_after_tokens: z.number().int().min(0).optional(),
    stall_after_tokens: z.number().int().min(0).optional(),
    garbage_after_tokens: z.number().int().min(0).optional(),
    hang: z.boolean().optional(),
    latency_multiplier: z.number().positive().refine(Number.isFinite, 'must be finite').optional(),
    corrupt: z.boolean().optional(),
    logprob_drift: z.number().min(0).refine(Number.isFinite, 'must be finite').optional(),
    // a period on a timer: past 2^31 - 1 ms it would fire after 1 ms
    flap_ms: z.number().int().positive().max(DEFAULTS.durations.timerMaxMs).optional(),
    process_exit: z.boolean().optional(),
  })
  .strict() satisfies z.ZodType<SnakeFaults>;
