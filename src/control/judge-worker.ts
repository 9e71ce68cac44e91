// The canary judge's worker thread: receives a look (packed samples, configuration, look info),
// answers with the verdict. Started by src/control/judge-thread.ts; nothing else runs here.
import { parentPort } from 'node:worker_threads';
import { judgeCanary } from '../analysis/judge.js';
import type { JudgeConfig, LookInfo } from '../analysis/judge-types.js';
import { unpack } from '../analysis/judge-packed.js';
import type { PackedSamples } from '../analysis/judge-packed.js';

export interface LookRequest {
  id: number;
  stable: PackedSamples;
  canary: PackedSamples;
  cfg: JudgeConfig;
  look: LookInfo;
}

parentPort?.on('message', (m: LookRequest) => {
  try {
    const t0 = performance.now();
    const verdict = judgeCanary(unpack(m.stable), unpack(m.canary), m.cfg, m.look);
    parentPort?.postMessage({ id: m.id, verdict, ms: performance.now() - t0 });
  } catch (err) {
    parentPort?.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) });
  }
});
