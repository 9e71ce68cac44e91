// A model's admission settings in glidepath.yaml: its priority tiers (how a request gets one) and
// its degradation (the throughput it must serve, a healthy worker's capacity), as zod schemas and
// their checked, camelCase form (docs/resilience.md).
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { durationMsFraction, msg, posInt, positive } from './schema-parts.js';

const G = DEFAULTS.gateway;
const tierName = () => z.string(msg('a tier name')).regex(/^[a-z][a-z0-9_]{0,31}$/, msg('a tier name (lowercase letters, digits, _)'));

export const tiersSchema = z
  .object({
    order: z
      .array(tierName())
      .min(1, msg('at least one tier'))
      .default([...G.tiers]),
    default: tierName().optional(),
    header: z
      .string(msg('a header name'))
      .regex(/^[A-Za-z0-9-]+$/, msg('a header name'))
      .optional(),
    trusted_sources: z.array(z.string(msg('an address or CIDR'))).default([]),
    keys: z
      .array(
        z
          .object({
            tier: tierName(),
            key: z.string(msg('an API key')).min(1).optional(),
            key_sha256: z
              .string(msg('a hex SHA-256'))
              .regex(/^[0-9a-f]{64}$/, msg('64 lowercase hex digits'))
              .optional(),
          })
          .strict(),
      )
      .default([]),
  })
  .strict()
  .prefault({});

export const degradationSchema = z
  .object({
    /** The throughput (completion tokens/s) the model must serve: capacity below it degrades the model. */
    required_tokens_per_s: positive(),
    /** What one healthy worker serves at most; default: required ÷ the first version's replicas. */
    worker_tokens_per_s: positive().optional(),
    recover_after_ms: durationMsFraction().default(G.degradationRecoverMs),
    /** How often the engines' vLLM metrics are read for each worker's measured capacity (0: never; worker_tokens_per_s only). */
    measure_interval_ms: durationMsFraction(DEFAULTS.durations.maxIntervalMs).default(G.capacityMeasureMs),
    max_tokens_degraded: posInt().default(G.degradedMaxTokens),
  })
  .strict()
  .optional();

/** A model's priority tiers (src/gateway/tiers.ts applies them). */
export interface TierConfig {
  /** Tiers, highest first. */
  readonly order: readonly string[];
  /** The tier of a request that neither key nor trusted header places. */
  readonly default: string;
  /** A header naming the tier, believed only from `trustedSources` (an auth proxy in front that sets it). */
  readonly header?: string | undefined;
  /** CIDRs (or addresses) whose `header` is believed. */
  readonly trustedSources: readonly string[];
  /** hex SHA-256 of an API key (`Authorization: Bearer <key>`) → its tier; plaintext keys are hashed at load and never kept. */
  readonly keys: ReadonlyMap<string, string>;
}

export interface DegradationConfig {
  readonly requiredTokensPerS: number;
  readonly workerTokensPerS: number;
  readonly recoverAfterMs: number;
  readonly maxTokensDegraded: number;
  /** How often the engines' metrics are read (ms); 0: never. */
  readonly measureIntervalMs: number;
}

type Issue = { path: string; message: string };

/** The checked tier settings of model `at` (issues appended for unknown tiers, bad sources, keys given twice). */
export function tierConfig(t: z.output<typeof tiersSchema>, at: string, issues: Issue[]): TierConfig {
  const known = new Set(t.order);
  if (known.size !== t.order.length) issues.push({ path: `${at}.tiers.order`, message: 'a tier is listed twice' });
  // without a default: `standard` if there is one, else the middle tier (the lower one of two: an unknown client is never the top tier by default)
  const dflt = t.default ?? (known.has(G.defaultTier) ? G.defaultTier : (t.order.at(Math.ceil((t.order.length - 1) / 2)) ?? G.defaultTier));
  if (!known.has(dflt)) issues.push({ path: `${at}.tiers.default`, message: `unknown tier ${JSON.stringify(dflt)}; the tiers are ${t.order.join(', ')}` });
  t.trusted_sources.forEach((src, i) => {
    const [addr, bits, extra] = src.split('/');
    const v = isIP(addr ?? '');
    const max = v === 6 ? 128 : 32;
    if (v === 0 || extra !== undefined || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max))) {
      issues.push({ path: `${at}.tiers.trusted_sources[${i}]`, message: `expected an IP address or CIDR such as 10.0.0.0/8, got ${JSON.stringify(src)}` });
    }
  });
  if (t.header !== undefined && t.trusted_sources.length === 0) {
    issues.push({ path: `${at}.tiers.header`, message: 'a tier header needs trusted_sources: the addresses (your auth proxy) whose header is believed' });
  }
  const keys = new Map<string, string>();
  t.keys.forEach((k, i) => {
    if (!known.has(k.tier))
      issues.push({ path: `${at}.tiers.keys[${i}].tier`, message: `unknown tier ${JSON.stringify(k.tier)}; the tiers are ${t.order.join(', ')}` });
    if ((k.key === undefined) === (k.key_sha256 === undefined)) {
      issues.push({ path: `${at}.tiers.keys[${i}]`, message: 'give exactly one of key or key_sha256' });
      return;
    }
    const hash =
      k.key_sha256 ??
      createHash('sha256')
        .update(k.key ?? '')
        .digest('hex');
    if (keys.has(hash)) issues.push({ path: `${at}.tiers.keys[${i}]`, message: 'this key is listed twice' });
    keys.set(hash, k.tier);
  });
  return { order: t.order, default: dflt, header: t.header, trustedSources: t.trusted_sources, keys };
}

export function degradationConfig(d: z.output<typeof degradationSchema>, replicas: number): DegradationConfig | undefined {
  if (d === undefined) return undefined;
  return {
    requiredTokensPerS: d.required_tokens_per_s,
    workerTokensPerS: d.worker_tokens_per_s ?? d.required_tokens_per_s / Math.max(1, replicas),
    recoverAfterMs: d.recover_after_ms,
    maxTokensDegraded: d.max_tokens_degraded,
    measureIntervalMs: d.measure_interval_ms,
  };
}
