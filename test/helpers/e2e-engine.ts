// End-to-end helpers for real llama.cpp workers: a glidepath.yaml whose versions run `glidepath engine` through the process provider, each on a tiny seeded model file, and the `glidepath up` processes a test file starts on them.
import type { WorkerView } from '../../src/api/types.js';
import { ModelDir } from './engine.js';
import { CLI, cleanupAll, removeDir, startUp, tempDir, trackWorkerPids, writeConfig } from './e2e-up.js';
import type { UpProcess } from './e2e-up.js';

export interface EngineVersionSpec {
  id: string;
  /** The GGUF file (ModelDir.model(seed)). */
  weights: string;
  replicas?: number;
  /** Extra flags of `glidepath engine` (e.g. `--max-model-len 512`). */
  flags?: string;
  /** Warm-up requests before a worker serves (a fresh process runs cold JIT code). */
  warmup?: number;
  /**
   * `--max-num-seqs` of its engines (default 8). Given, it is declared too as the version's
   * `engine: { max_num_seqs }`: in its card checksum, and the gateway's cap per worker.
   */
  maxNumSeqs?: number;
}

/** One model served by llama.cpp engine workers; the first version is the whole route, the others are registered. */
export function engineConfigYaml(o: {
  dataDir: string;
  model: string;
  versions: EngineVersionSpec[];
  gateway?: string;
  health?: Record<string, number>;
  /** Flow mappings (YAML) of the top-level `control:` and the model's `canary:`. */
  control?: string;
  canary?: string;
}): string {
  const first = o.versions[0];
  if (!first) throw new Error('engineConfigYaml: at least one version');
  const lines = ['server:', `  data_dir: ${JSON.stringify(o.dataDir)}`, 'gpus: { count: 16, memory_gb: 80 }'];
  if (o.gateway !== undefined) lines.push(`gateway: ${o.gateway}`);
  if (o.control !== undefined) lines.push(`control: ${o.control}`);
  lines.push('models:', `  - name: ${o.model}`);
  if (o.health !== undefined) lines.push(`    health: ${JSON.stringify(o.health)}`);
  lines.push('    versions:');
  for (const v of o.versions) {
    // no shell: the process provider splits the template into argv; quotes group a word
    const command =
      `"${process.execPath}" "${CLI}" engine --model {weights} --port {port} --served-model-name {model} --version {version} --max-num-seqs ${v.maxNumSeqs ?? 8} ${v.flags ?? ''}`.trim();
    lines.push(
      `      - id: ${v.id}`,
      `        weights: ${JSON.stringify(v.weights)}`,
      `        replicas: ${v.replicas ?? 1}`,
      `        provider: { kind: process, command: ${JSON.stringify(command)} }`,
    );
    if (v.maxNumSeqs !== undefined) lines.push(`        engine: { max_num_seqs: ${v.maxNumSeqs} }`);
    if (v.warmup !== undefined) lines.push(`        warmup: { requests: ${v.warmup}, max_tokens: 12 }`);
  }
  lines.push('    route:', `      weights: { ${first.id}: 1 }`);
  if (o.canary !== undefined) lines.push(`    canary: ${o.canary}`);
  lines.push('');
  return lines.join('\n');
}

/** A test file's `glidepath up` processes on engine workers and the tiny models they serve; `close()` (its afterAll) stops and removes them all. */
export class EngineUps {
  readonly models = new ModelDir();
  private readonly dirs: string[] = [];
  private readonly ups: UpProcess[] = [];

  /** `glidepath up` on the config `yaml(dataDir)` writes, in a folder of its own named after `name`. */
  async start(name: string, yaml: (dataDir: string) => string): Promise<UpProcess> {
    const dir = tempDir(`engine-${name}`);
    this.dirs.push(dir);
    const up = await startUp({ configFile: writeConfig(dir, yaml(`${dir}/state`)), dataDir: `${dir}/state`, timeoutMs: 60_000 });
    this.ups.push(up);
    return up;
  }

  /** Stops every `glidepath up` started so far and its engine workers (an idle fleet still takes CPU from the next test's). */
  async stopAll(): Promise<void> {
    for (const up of this.ups.splice(0)) {
      // its engine workers too: SIGTERM stops them through `up`, and cleanupAll kills any left
      trackWorkerPids((await up.ok<WorkerView[]>('GET', '/workers').catch(() => [] as WorkerView[])).map((w) => w.pid));
      await up.kill('SIGTERM');
    }
  }

  async close(): Promise<void> {
    await this.stopAll();
    cleanupAll();
    for (const d of this.dirs) removeDir(d);
    this.models.remove();
  }
}

/** Until `pred` holds of the workers (polled: the admin API is the observable). */
export async function untilWorkers(up: UpProcess, pred: (ws: WorkerView[]) => boolean, what: string, timeoutMs = 30_000): Promise<WorkerView[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ws = await up.ok<WorkerView[]>('GET', '/workers');
    if (pred(ws)) return ws;
    if (Date.now() > deadline) {
      throw new Error(`workers never ${what}: ${JSON.stringify(ws.map((w) => [w.id, w.state, w.routable, w.health?.state, w.weight]))}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
