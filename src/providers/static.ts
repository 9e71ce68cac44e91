// The `static` provider: workers that already exist at fixed endpoints; Glidepath never starts or stops them.
import { DEFAULTS } from '../defaults.js';
import { UnavailableError } from '../errors.js';
import { answersHealth, sleepEngine, waitHealthy, wakeEngine } from './engine.js';
import type { Provider, StartRequest, WorkerExit, WorkerHandle } from './types.js';

const never = new Promise<WorkerExit>(() => undefined);

export class StaticProvider implements Provider {
  readonly kind = 'static';

  /** "Starting" worker i of a static version means checking that endpoint i answers /health. */
  async start(req: StartRequest): Promise<WorkerHandle> {
    const v = req.version;
    if (v.provider.kind !== 'static') throw new UnavailableError('wrong_provider', `version ${v.id} is not a static version`);
    const idx = Number(req.workerId.split('/').pop() ?? '0');
    const url = v.provider.endpoints[idx];
    if (url === undefined)
      throw new UnavailableError('no_endpoint', `version ${v.id} lists ${v.provider.endpoints.length} endpoint(s); worker ${idx} has none`);
    const base = url.replace(/\/$/, '');
    await waitHealthy(base, '/health', DEFAULTS.providers.staticStartTimeoutMs, never, undefined, req.signal);
    return { id: req.workerId, model: v.model, version: v.id, url: base, provider: this.kind, gpus: req.gpus, pid: undefined, exited: never, info: {} };
  }

  async stop(): Promise<void> {
    // not ours to stop
  }

  sleep(h: WorkerHandle, level: 1 | 2): Promise<void> {
    return sleepEngine(h, level);
  }

  wake(h: WorkerHandle): Promise<void> {
    return wakeEngine(h, '/health');
  }

  async adopt(rec: { id: string; version: { model: string; id: string }; url: string; gpus: readonly string[] }): Promise<WorkerHandle | undefined> {
    if (!(await answersHealth(rec.url, '/health'))) return undefined;
    return {
      id: rec.id,
      model: rec.version.model,
      version: rec.version.id,
      url: rec.url,
      provider: this.kind,
      gpus: rec.gpus,
      pid: undefined,
      exited: never,
      info: {},
    };
  }
}
