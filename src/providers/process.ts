// The `process` provider: runs an engine from a command template (e.g. `vllm serve {weights} --port
// {port} --tensor-parallel-size {tp}`) with CUDA_VISIBLE_DEVICES from the GPU assignment.
import type { VersionConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, UnavailableError } from '../errors.js';
import { adoptedPid, freePort, pidAlive, spawnChild } from './child.js';
import type { Child } from './child.js';
import { getStatus, post, waitHealthy } from './engine.js';
import type { Provider, StartRequest, WorkerHandle } from './types.js';

/** Split a command template into argv (quotes group words; no shell is involved, so no injection). */
export function splitCommand(template: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(template)) !== null) out.push(m[1] ?? m[2] ?? m[3] ?? '');
  return out;
}

const PLACEHOLDERS = ['weights', 'port', 'tp', 'model', 'version', 'host', 'gpus'] as const;

export function renderCommand(template: string, vars: Record<(typeof PLACEHOLDERS)[number], string>): string[] {
  return splitCommand(template).map((word) =>
    word.replace(/\{([a-z_]+)\}/g, (all, name: string) => {
      if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
        throw new BadRequestError('bad_command_template', `unknown placeholder ${all} in ${JSON.stringify(template)}; known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(' ')}`);
      }
      return vars[name as (typeof PLACEHOLDERS)[number]];
    }),
  );
}

interface ProcHandle extends WorkerHandle {
  child: Child | undefined;
  graceMs: number;
  /** Set for a worker adopted after a restart (not our child). */
  adopted?: ReturnType<typeof adoptedPid> | undefined;
}

export class ProcessProvider implements Provider {
  readonly kind = 'process';
  private readonly startTimeoutMs: number;
  constructor(opts: { startTimeoutMs?: number } = {}) {
    // real engines load 70B weights in 45–120 s (seed 000); allow generous time
    this.startTimeoutMs = opts.startTimeoutMs ?? 900_000;
  }

  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    if (v.provider.kind !== 'process') throw new UnavailableError('wrong_provider', `version ${v.id} is not a process version`);
    const p = v.provider;
    const port = await freePort();
    const host = '127.0.0.1';
    const argv = renderCommand(p.command, { weights: v.weights, port: String(port), tp: String(v.tp), model: v.model, version: v.id, host, gpus: req.gpus.join(',') });
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new BadRequestError('bad_command_template', `empty command for version ${v.id}`);
    const child = spawnChild(cmd, args, { env: { ...process.env, ...p.env, CUDA_VISIBLE_DEVICES: req.gpus.join(',') }, workDir: req.workDir, name: req.workerId });
    const url = `http://${host}:${port}`;
    req.onProgress?.(`${req.workerId}: started ${cmd} (pid ${child.pid}) on ${url}; waiting for ${p.healthPath}`);
    try {
      await waitHealthy(url, p.healthPath, this.startTimeoutMs, child.exited);
    } catch (err) {
      await child.stop(p.gracePeriodMs);
      const msg = err instanceof Error ? err.message : String(err);
      throw new UnavailableError('worker_start_failed', `${msg}; log: ${child.logFile}`);
    }
    const h: ProcHandle = { id: req.workerId, model: v.model, version: v.id, url, provider: this.kind, gpus: req.gpus, pid: child.pid, exited: child.exited, info: { logFile: child.logFile, port }, child, graceMs: p.gracePeriodMs };
    return h;
  }

  async stop(h: WorkerHandle, graceMs?: number): Promise<void> {
    const ph = h as ProcHandle;
    if (ph.child) await ph.child.stop(graceMs ?? ph.graceMs);
    else if (ph.adopted) await ph.adopted.stop(graceMs ?? ph.graceMs);
    else if (h.pid !== undefined && pidAlive(h.pid)) process.kill(h.pid, 'SIGTERM');
  }

  sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    return post(h.url, `/sleep?level=${level}`, 60_000);
  }

  async wake(h: WorkerHandle): Promise<void> {
    await post(h.url, '/wake_up', 900_000);
    await waitHealthy(h.url, '/health', 900_000, h.exited);
  }

  async adopt(rec: { id: string; version: VersionConfig; url: string; pid?: number | undefined; gpus: readonly string[] }): Promise<WorkerHandle | undefined> {
    if (rec.pid === undefined || !pidAlive(rec.pid)) return undefined;
    const hp = rec.version.provider.kind === 'process' ? rec.version.provider.healthPath : '/health';
    if ((await getStatus(rec.url, hp, 2_000)) !== 200) return undefined;
    const grace = rec.version.provider.kind === 'process' ? rec.version.provider.gracePeriodMs : DEFAULTS.control.stopGraceMs;
    const adopted = adoptedPid(rec.pid);
    const h: ProcHandle = { id: rec.id, model: rec.version.model, version: rec.version.id, url: rec.url, provider: this.kind, gpus: rec.gpus, pid: rec.pid, exited: adopted.exited, info: {}, child: undefined, graceMs: grace, adopted };
    return h;
  }
}
