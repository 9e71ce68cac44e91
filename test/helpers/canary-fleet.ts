// The fake fleet the canary controllers' unit tests run on: one model with a stable and a candidate
// version, and a canary of three one-minute stages that needs 20 samples and ignores none.
import { FakeFleet } from './fake-ports.js';

export const CANARY_MODEL = 'llama';
export const CANARY_STAGE_MS = 60_000;

export function canaryFleet(canary: Record<string, unknown> = {}): Promise<FakeFleet> {
  return FakeFleet.create({
    models: [
      {
        name: CANARY_MODEL,
        versions: [{ id: 'v1' }, { id: 'v2' }],
        route: { weights: { v1: 1 } },
        canary: { stages: [10, 50, 100], stage_duration_ms: CANARY_STAGE_MS, min_samples: 20, ignore_first_requests: 0, ...canary },
      },
    ],
  });
}
