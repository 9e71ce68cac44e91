// The card checksum: one hash of everything that must match for two workers to be interchangeable.
import { createHash } from 'node:crypto';

export interface Architecture {
  layers: number;
  kvHeads: number;
  headDim: number;
  blockSize: number;
  maxContext: number;
  tokenizer: string;
  family?: string | undefined;
}

export interface CardInput {
  model: string;
  weights: string;
  weightHash?: string | undefined;
  quantization: string;
  tp: number;
  architecture: Architecture;
  engine: Readonly<Record<string, string | number | boolean>>;
}

/** Canonical JSON (sorted keys) so the checksum does not depend on key order in the YAML. */
export function canonical(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

/**
 * Weights identity is part of the card: two versions with the same engine config but other weights
 * must never share a pool or resume each other's streams (a response would mix two versions).
 */
export function cardChecksum(c: CardInput): string {
  const a = c.architecture;
  const card = {
    model: c.model,
    weights: c.weightHash ?? c.weights,
    quantization: c.quantization,
    tp: c.tp,
    layers: a.layers,
    kvHeads: a.kvHeads,
    headDim: a.headDim,
    blockSize: a.blockSize,
    maxContext: a.maxContext,
    tokenizer: a.tokenizer,
    engine: c.engine,
  };
  return createHash('sha256').update(canonical(card)).digest('hex').slice(0, 16);
}

/** KV-cache compatibility between two versions (seed 000): what must match for KV blocks to be reusable. */
export interface KvCompatibility {
  compatible: boolean;
  mismatches: string[];
}

export function kvCacheCompatible(
  a: { quantization: string; architecture: Architecture },
  b: { quantization: string; architecture: Architecture },
): KvCompatibility {
  const mismatches: string[] = [];
  const cmp = (label: string, x: unknown, y: unknown) => {
    if (x !== y) mismatches.push(`${label}: ${String(x)} vs ${String(y)}`);
  };
  cmp('family', a.architecture.family ?? null, b.architecture.family ?? null);
  cmp('quantization', a.quantization, b.quantization);
  cmp('layers', a.architecture.layers, b.architecture.layers);
  cmp('kv_heads', a.architecture.kvHeads, b.architecture.kvHeads);
  cmp('head_dim', a.architecture.headDim, b.architecture.headDim);
  cmp('block_size', a.architecture.blockSize, b.architecture.blockSize);
  cmp('max_context', a.architecture.maxContext, b.architecture.maxContext);
  return { compatible: mismatches.length === 0, mismatches };
}
