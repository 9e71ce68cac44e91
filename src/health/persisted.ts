// A worker's health as it comes back from the store (validated, never cast) and the routing weight a
// worker starts with in the data plane given its role and health.
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { routingWeight } from './machine.js';
import type { WorkerHealth } from './machine.js';

const reasons = ['token_mismatch', 'logprob_drift', 'latency_spike', 'timeout', 'error', 'reset', 'stall', 'ttft_outlier', 'exited'] as const;

const healthSchema = z.object({
  state: z.enum(['pending', 'healthy', 'suspicious', 'unhealthy', 'draining', 'dead']),
  breaker: z.enum(['closed', 'open', 'half_open']),
  since: z.number(),
  failures: z.number().int().min(0),
  trafficFailures: z.number().int().min(0),
  passes: z.number().int().min(0),
  openUntil: z.number().nullable(),
  failedRecoveries: z.number().int().min(0),
  halfOpenPasses: z.number().int().min(0),
  trialLeft: z.number().int().min(0),
  baselineMs: z.number().nullable(),
  corrupt: z.boolean(),
  lastFailure: z.object({ reason: z.enum(reasons), detail: z.string(), at: z.number(), source: z.enum(['probe', 'traffic', 'process']) }).nullable(),
});

/** A persisted health, or undefined when there is none or it does not validate (the worker is then judged afresh). */
export function parseHealth(x: unknown): WorkerHealth | undefined {
  if (x === undefined || x === null) return undefined;
  const r = healthSchema.safeParse(x);
  return r.success ? r.data : undefined;
}

/** The weight a worker gets in the data plane: a spare none, a worker never judged full, otherwise what its health says. */
export function routingWeightOf(role: 'serving' | 'spare', h: WorkerHealth | undefined): number {
  if (role === 'spare') return 0;
  return h === undefined ? 1 : routingWeight(h, DEFAULTS.health.trialWeight);
}
