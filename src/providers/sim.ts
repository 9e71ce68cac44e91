// The `sim` provider: each worker is a `glidepath sim` child process with the version's settings.
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { SimSettings, VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';
import { adoptProcess, freePort, recordSpawn, spawnChild, stopProcess } from './child.js';
import type { Child, ProcessWorker } from './child.js';
import { cancelled, sleepEngine, waitHealthy, wakeEngine } from './engine.js';
import type { Provider, StartRequest, WorkerHandle } from './types.js';

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../cli/main.js');

/** SimSettings → `glidepath sim` flags. */
function simArgs(v: VersionConfig, s: SimSettings, port: number): string[] {
  const a: string[] = ['sim', '--host', '127.0.0.1', '--port', String(port), '--model', v.model, '--version', v.id];
  const flag = (name: string, value: number | boolean | undefined) => {
    if (value === undefined) return;
    if (typeof value === 'boolean') {
      if (value) a.push(`--${name}`);
    } else a.push(`--${name}`, String(value));
  };
  flag('seed', s.seed);
  flag('load-time-ms', s.loadTimeMs);
  flag('prefill-tokens-per-s', s.prefillTokensPerS);
  flag('inter-token-ms', s.interTokenMs);
  flag('itl-growth-per-seq', s.itlGrowthPerSeq);
  flag('jitter', s.jitter);
  flag('kv-capacity-tokens', s.kvCapacityTokens);
  flag('max-num-seqs', s.maxNumSeqs);
  flag('max-model-len', s.maxModelLen);
  flag('hallucination-rate', s.hallucinationRate);
  flag('max-loras', s.maxLoras);
  flag('lora-load-ms', s.loraLoadMs);
  flag('wake-ms', s.wakeMs);
  flag('reload-ms', s.reloadMs);
  flag('warmup-requests', s.warmupRequests);
  const f = s.faults ?? {};
  flag('error-rate', f.errorRate);
  flag('error-status', f.errorStatus);
  flag('crash-after-tokens', f.crashAfterTokens);
  flag('stall-after-tokens', f.stallAfterTokens);
  flag('garbage-after-tokens', f.garbageAfterTokens);
  flag('hang', f.hang);
  flag('latency-multiplier', f.latencyMultiplier);
  flag('corrupt', f.corrupt);
  return a;
}

type SimHandle = WorkerHandle & ProcessWorker;

const P = DEFAULTS.providers;

export class SimProvider implements Provider {
  readonly kind = 'sim';
  /** Longest a simulated worker may take to report healthy beyond its configured load time. */
  private readonly startSlackMs: number;
  constructor(opts: { startSlackMs?: number } = {}) {
    this.startSlackMs = opts.startSlackMs ?? P.simStartSlackMs;
  }

  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    if (v.provider.kind !== 'sim') throw new UnavailableError('wrong_provider', `version ${v.id} is not a sim version`);
    const sim = v.provider.sim;
    // A port chosen here (not --port 0) so nothing has to be read from the worker's stdout: its
    // output goes to a log file and it survives a crash of this process.
    let lastErr: unknown;
    for (let attempt = 0; attempt < P.simStartAttempts; attempt++) {
      cancelled(req.signal, req.workerId);
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      // a prefill or decode worker reads and writes the KV layout of its card: a pair of two cards cannot exchange KV
      const kv = req.kvRole === undefined ? [] : ['--kv-role', req.kvRole, '--kv-layout', v.cardChecksum];
      let child: Child;
      try {
        child = await spawnChild(process.execPath, [CLI, ...simArgs(v, sim, port), ...kv], {
          env: { ...process.env, CUDA_VISIBLE_DEVICES: req.gpus.join(',') },
          workDir: req.workDir,
          name: req.workerId,
        });
      } catch (err) {
        lastErr = err; // e.g. the launcher died with the request: another attempt starts a new one
        continue;
      }
      req.onProgress?.(`${req.workerId}: simulator pid ${child.pid} on ${url}, loading weights`);
      try {
        // recorded where a restart finds it, it may outlive this process (until then its death stops it)
        await recordSpawn(child, req.onSpawn, url, port);
        await waitHealthy(url, '/health', (sim.loadTimeMs ?? 0) + this.startSlackMs, child.exited, P.simHealthPollMaxMs, req.signal);
      } catch (err) {
        await child.stop(P.failedStartGraceMs);
        cancelled(req.signal, req.workerId); // a shutdown's, whatever broke the start meanwhile
        lastErr = err;
        continue; // most likely the port was taken in between: try another
      }
      const h: SimHandle = {
        id: req.workerId,
        model: v.model,
        version: v.id,
        url,
        provider: this.kind,
        gpus: req.gpus,
        pid: child.pid,
        exited: child.exited,
        info: { logFile: child.logFile, port },
        child,
      };
      return h;
    }
    throw lastErr instanceof Error ? lastErr : new UnavailableError('worker_start_failed', `could not start a simulator for ${req.workerId}`);
  }

  async stop(h: WorkerHandle, graceMs = DEFAULTS.control.stopGraceMs): Promise<void> {
    await stopProcess(h as SimHandle, graceMs);
  }

  sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    return sleepEngine(h, level);
  }

  wake(h: WorkerHandle): Promise<void> {
    return wakeEngine(h, '/health');
  }

  async adopt(rec: { id: string; version: VersionConfig; url: string; pid?: number | undefined; gpus: readonly string[] }): Promise<WorkerHandle | undefined> {
    const found = await adoptProcess(rec.pid, rec.url, '/health');
    if (found === undefined) return undefined;
    const h: SimHandle = {
      id: rec.id,
      model: rec.version.model,
      version: rec.version.id,
      url: rec.url,
      provider: this.kind,
      gpus: rec.gpus,
      pid: found.pid,
      exited: found.adopted.exited,
      info: {},
      child: undefined,
      adopted: found.adopted,
    };
    return h;
  }
}
