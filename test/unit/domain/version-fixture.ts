// A VersionConfig for tests, with a real card checksum.
import { cardChecksum } from '../../../src/domain/card.js';
import type { VersionConfig } from '../../../src/config/types.js';

export function versionConfig(id: string, model = 'llama', over: Partial<VersionConfig> = {}): VersionConfig {
  const base: Omit<VersionConfig, 'cardChecksum'> = {
    id,
    model,
    weights: `/models/${model}/${id}`,
    weightHash: `sha256:${id}`,
    baseModel: 'llama-3-70b',
    quantization: 'fp16',
    tp: 4,
    gpuMemoryGb: 140,
    architecture: { layers: 80, kvHeads: 8, headDim: 128, blockSize: 16, maxContext: 8192, tokenizer: 'llama3', family: 'llama' },
    engine: { max_num_seqs: 256 },
    replicas: 1,
    provider: { kind: 'sim', sim: { seed: 1 } },
    warmup: { requests: 4, maxTokens: 16 },
    metadata: { owner: 'ml-platform' },
    ...over,
  };
  return { ...base, cardChecksum: over.cardChecksum ?? cardChecksum(base) };
}
