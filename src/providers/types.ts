// The Provider seam: how workers for a version are created, stopped, put to sleep and woken.
import type { VersionConfig } from '../config/types.js';
import type { KvRole } from '../domain/spec.js';

export interface StartRequest {
  version: VersionConfig;
  /** Stable worker id, e.g. `chat/v2/0`. */
  workerId: string;
  /** GPU ids assigned to this worker (TP-sized group). */
  gpus: readonly string[];
  /** Directory for logs and provider state. */
  workDir: string;
  /** Disaggregated serving: the worker prefills or decodes, with the version's card checksum as its KV layout (undefined: whole requests). */
  kvRole?: KvRole | undefined;
  /** Progress lines for long operations (loading weights). */
  onProgress?: (message: string) => void;
  /**
   * Told as soon as a worker process exists, before it is healthy (again for each retry): the
   * control plane records it then, so a restart that cuts the start short finds the process and
   * stops it instead of leaving it running unknown. Only a start recorded so is kept alive past this
   * process's death (launcher.ts): without onSpawn the worker dies with this process.
   */
  onSpawn?: (p: { pid: number; url: string; info: Record<string, unknown> }) => Promise<void>;
  /**
   * Aborted when the control plane shuts down: the start stops the process it began and fails with
   * `worker_start_cancelled`, so a stop of `glidepath up` never leaves a starting worker behind.
   */
  signal?: AbortSignal | undefined;
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when Glidepath asked it to stop. */
  expected: boolean;
}

export interface WorkerHandle {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  readonly url: string;
  readonly provider: string;
  readonly gpus: readonly string[];
  readonly pid: number | undefined;
  /** Resolves when the worker process ends (never for `static`). */
  readonly exited: Promise<WorkerExit>;
  /** Provider extras to persist (log file, port). */
  readonly info: Record<string, unknown>;
}

export interface Provider {
  readonly kind: string;
  /** Start a worker and resolve once it answers its health endpoint. Rejects with a clear error. */
  start(req: StartRequest): Promise<WorkerHandle>;
  /** Stop it: SIGTERM, then SIGKILL after the grace period. No-op for `static`. */
  stop(h: WorkerHandle, graceMs?: number): Promise<void>;
  /** Engine sleep mode (vLLM `/sleep?level=`): level 1 keeps weights in CPU memory, 2 discards them. */
  sleep(h: WorkerHandle, level: 1 | 2): Promise<void>;
  /** Wake from sleep; resolves when the engine accepts requests again. */
  wake(h: WorkerHandle): Promise<void>;
  /** Adopt a worker recorded before a restart if it is still alive; undefined otherwise. */
  adopt?(rec: { id: string; version: VersionConfig; url: string; pid?: number | undefined; gpus: readonly string[] }): Promise<WorkerHandle | undefined>;
}
