// The version seed 000 plans for (llama-3-70b on TP=4, 140 GB, 120 s to load), with overrides.
import type { PlanVersion } from '../../src/rollout/planner.js';

export const planVersion = (over: Partial<PlanVersion> = {}): PlanVersion => ({
  id: 'v2.3.0',
  tp: 4,
  replicas: 1,
  gpuMemoryGb: 140,
  baseModel: 'llama-3-70b',
  weightHash: 'sha256:' + 'a'.repeat(64),
  loadTimeMs: 120_000,
  ...over,
});
