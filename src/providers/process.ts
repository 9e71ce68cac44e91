// The `process` provider: runs an engine from a command template (e.g. `vllm serve {weights} --port
// {port} --tensor-parallel-size {tp}`) with CUDA_VISIBLE_DEVICES from the GPU assignment.
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, UnavailableError } from '../errors.js';
import { adoptProcess, freePort, recordSpawn, spawnChild, stopProcess } from './child.js';
import type { ProcessWorker } from './child.js';
import { cancelled, sleepEngine, waitHealthy, wakeEngine } from './engine.js';
import type { Provider, StartRequest, WorkerHandle } from './types.js';

/** Split a command template into argv (quotes group words; no shell is involved, so no injection). */
export function splitCommand(template: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(template)) !== null) out.push(m[1] ?? m[2] ?? m[3] ?? '');
  return out;
}

const PLACEHOLDERS = ['weights', 'port', 'tp', 'model', 'version', 'host', 'gpus', 'kv_role', 'kv_layout'] as const;

export function renderCommand(template: string, vars: Record<(typeof PLACEHOLDERS)[number], string>): string[] {
  return splitCommand(template).map((word) =>
    word.replace(/\{([a-z_]+)\}/g, (all, name: string) => {
      if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
        throw new BadRequestError(
          'bad_command_template',
          `unknown placeholder ${all} in ${JSON.stringify(template)}; known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(' ')}`,
        );
      }
      return vars[name as (typeof PLACEHOLDERS)[number]];
    }),
  );
}

interface ProcHandle extends WorkerHandle, ProcessWorker {
  graceMs: number;
  /** The version's health path: probed on start, adoption and wake. */
  healthPath: string;
}

export class ProcessProvider implements Provider {
  readonly kind = 'process';
  private readonly startTimeoutMs: number;
  constructor(opts: { startTimeoutMs?: number } = {}) {
    this.startTimeoutMs = opts.startTimeoutMs ?? DEFAULTS.providers.processStartTimeoutMs;
  }

  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    if (v.provider.kind !== 'process') throw new UnavailableError('wrong_provider', `version ${v.id} is not a process version`);
    const p = v.provider;
    cancelled(req.signal, req.workerId);
    const port = await freePort();
    const host = '127.0.0.1';
    const argv = renderCommand(p.command, {
      weights: v.weights,
      port: String(port),
      tp: String(v.tp),
      model: v.model,
      version: v.id,
      host,
      gpus: req.gpus.join(','),
      // vLLM's kv_role names (kv_producer / kv_consumer; kv_both for a worker of whole requests) and the card as the layout
      kv_role: req.kvRole === 'prefill' ? 'kv_producer' : req.kvRole === 'decode' ? 'kv_consumer' : 'kv_both',
      kv_layout: v.cardChecksum,
    });
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new BadRequestError('bad_command_template', `empty command for version ${v.id}`);
    const child = await spawnChild(cmd, args, {
      env: { ...process.env, ...p.env, CUDA_VISIBLE_DEVICES: req.gpus.join(',') },
      workDir: req.workDir,
      name: req.workerId,
    });
    const url = `http://${host}:${port}`;
    req.onProgress?.(`${req.workerId}: started ${cmd} (pid ${child.pid}) on ${url}; waiting for ${p.healthPath}`);
    try {
      // recorded where a restart finds it, it may outlive this process (until then its death stops it)
      await recordSpawn(child, req.onSpawn, url, port);
      await waitHealthy(url, p.healthPath, this.startTimeoutMs, child.exited, undefined, req.signal);
    } catch (err) {
      await child.stop(p.gracePeriodMs);
      cancelled(req.signal, req.workerId); // a shutdown's, whatever broke the start meanwhile
      const msg = err instanceof Error ? err.message : String(err);
      throw new UnavailableError('worker_start_failed', `${msg}; log: ${child.logFile}`);
    }
    const h: ProcHandle = {
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
      graceMs: p.gracePeriodMs,
      healthPath: p.healthPath,
    };
    return h;
  }

  async stop(h: WorkerHandle, graceMs?: number): Promise<void> {
    const ph = h as ProcHandle;
    await stopProcess(ph, graceMs ?? ph.graceMs);
  }

  sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    return sleepEngine(h, level);
  }

  wake(h: WorkerHandle): Promise<void> {
    return wakeEngine(h, (h as ProcHandle).healthPath);
  }

  async adopt(rec: { id: string; version: VersionConfig; url: string; pid?: number | undefined; gpus: readonly string[] }): Promise<WorkerHandle | undefined> {
    const p = rec.version.provider.kind === 'process' ? rec.version.provider : undefined;
    const healthPath = p?.healthPath ?? '/health';
    const found = await adoptProcess(rec.pid, rec.url, healthPath);
    if (found === undefined) return undefined;
    const h: ProcHandle = {
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
      graceMs: p?.gracePeriodMs ?? DEFAULTS.control.stopGraceMs,
      healthPath,
      adopted: found.adopted,
    };
    return h;
  }
}
