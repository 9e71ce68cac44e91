// What a failed request to a worker means and what the client is told: aborts (client gone, timeouts, drains), a saturated worker's queue, the gateway's own exhaustion.
import type { GatewayConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { GatewayTimeoutError, UnavailableError, UpstreamError } from '../errors.js';
import type { GlidepathError } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import type { LocalResourceReporter } from './local.js';
import { ConnectError, LocalResourceError, WorkerQueueError } from './upstream.js';
import type { Worker } from './pool.js';

/** `unhealthy`: the health controller took the worker out of rotation (silent corruption) with the request on it. */
export type AbortKind = 'client' | 'send_timeout' | 'first_token_timeout' | 'idle_timeout' | 'drain' | 'unhealthy' | 'removed';

/** Why the gateway aborted a request to a worker (the pool hands it back in onResponseError). */
export class AbortReason extends Error {
  constructor(readonly kind: AbortKind) {
    super(kind);
  }
}

/**
 * What an error of a request to a worker is, for the client's request (`aborted`: the abort the
 * gateway asked for, if the error does not carry it): its own end (`client`, `send_timeout`), a
 * drain, a worker hung or taken out (tried elsewhere, or the stream continued there), the worker's
 * queue, the gateway's own resources, or the worker's failure (refused, dropped).
 */
export type ErrorMeaning =
  | { is: 'client'; kind: 'client' | 'send_timeout' }
  | { is: 'drain' }
  | { is: 'elsewhere'; kind: 'first_token_timeout' | 'idle_timeout' | 'unhealthy' | 'removed' }
  | { is: 'queue'; err: WorkerQueueError }
  | { is: 'local'; err: LocalResourceError }
  | { is: 'worker' };

export function meaningOf(err: Error, aborted: AbortKind | undefined): ErrorMeaning {
  const kind = err instanceof AbortReason ? err.kind : aborted;
  switch (kind) {
    case 'client':
    case 'send_timeout':
      return { is: 'client', kind };
    case 'drain':
      return { is: 'drain' };
    case 'first_token_timeout':
    case 'idle_timeout':
    case 'unhealthy':
    case 'removed':
      return { is: 'elsewhere', kind };
  }
  if (err instanceof WorkerQueueError) return { is: 'queue', err };
  if (err instanceof LocalResourceError) return { is: 'local', err };
  return { is: 'worker' };
}

/** The request a failure is about. */
export interface FailedRequest {
  readonly cfg: GatewayConfig;
  readonly model: string;
  readonly version: string;
  /** '?' before a worker was picked. */
  readonly workerId: string;
  readonly stream: boolean;
}

export function abortError(kind: AbortKind, f: FailedRequest): GlidepathError {
  const { cfg, workerId } = f;
  switch (kind) {
    case 'first_token_timeout':
      return new GatewayTimeoutError(
        'upstream_timeout',
        f.stream
          ? `worker ${workerId} sent no token within ${cfg.firstTokenTimeoutMs} ms`
          : `worker ${workerId} did not answer within ${cfg.requestTimeoutMs} ms`,
      );
    case 'idle_timeout':
      return new GatewayTimeoutError('upstream_idle_timeout', `worker ${workerId} went silent for ${cfg.idleTimeoutMs} ms mid-response`);
    case 'drain':
      return new UnavailableError('drain_aborted', `version ${f.version} was drained and the drain timed out before this request finished`, {
        retryAfterS: DEFAULTS.gateway.retryAfterS,
      });
    case 'unhealthy':
      return new UnavailableError('worker_unhealthy', `worker ${workerId} was taken out of rotation by its health checks while serving this request`, {
        retryAfterS: DEFAULTS.gateway.retryAfterS,
      });
    case 'removed':
      return new UnavailableError('worker_removed', `worker ${workerId} was removed (scaled down or preempted) before this request finished`, {
        retryAfterS: DEFAULTS.gateway.retryAfterS,
      });
    case 'client':
      return new UpstreamError('client_closed', 'client closed the connection');
    case 'send_timeout':
      return new UpstreamError('client_send_timeout', `the client took nothing of the response for ${cfg.sendTimeoutMs} ms; its connection was closed`);
  }
}

/**
 * A worker's full queue (no worker of the pool could take the request), a wait past queue_timeout_ms,
 * or its worker removed while it waited (and no other could take it): 503, never the worker's failure.
 */
export function queueError(err: WorkerQueueError, f: FailedRequest): UnavailableError {
  const { cfg, model, version, workerId } = f;
  const retryAfterS = DEFAULTS.gateway.retryAfterS;
  if (err.reason === 'full') {
    return new UnavailableError(
      'worker_queue_full',
      `every worker of ${model} version ${version} that could take this request is saturated: worker ${workerId} has all its request slots busy (its engine's max_num_seqs, at most connections_per_worker ${cfg.connectionsPerWorker}) and ${cfg.workerQueueMax} requests waiting (worker_queue_max)`,
      { retryAfterS },
    );
  }
  if (err.reason === 'closed') {
    return new UnavailableError(
      'no_healthy_workers',
      `worker ${workerId} of ${model} version ${version} was taken out of its pool while the request waited for it, and no other worker could take it`,
      { retryAfterS },
    );
  }
  return new UnavailableError(
    'worker_queue_timeout',
    `waited ${Math.round(err.queuedMs)} ms for a request slot of worker ${workerId} of ${model} version ${version} (queue_timeout_ms); it is saturated`,
    { retryAfterS },
  );
}

/**
 * The gateway itself ran out of descriptors, ports or memory connecting to a worker: 503, not the
 * worker's fault and not retried elsewhere (the next connect would fail alike). Counted and reported.
 */
export function localResourceError(
  err: LocalResourceError,
  f: FailedRequest,
  metrics: GatewayMetrics,
  report: LocalResourceReporter | undefined,
  what = 'a connection',
): UnavailableError {
  metrics.localResourceErrors.labels(err.code).inc();
  const e = new UnavailableError(
    'local_resources_exhausted',
    `the gateway could not open ${what} to worker ${f.workerId}: ${err.code}, out of ${err.resource}. This is the gateway's own limit, not the worker's; retry later`,
    { retryAfterS: DEFAULTS.gateway.localResourceRetryAfterS },
  );
  report?.(err.code, e.message);
  return e;
}

/**
 * A connection the worker refused, or closed before a response head (it took the request and dropped
 * it: crashed, stopped): the worker is ejected for a while (doubling back-off) and the error says
 * which. Undefined for any other failure.
 */
export function connectFailure(err: Error, status: number, w: Worker, f: FailedRequest, metrics: GatewayMetrics): UpstreamError | undefined {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  if (!(err instanceof ConnectError) && !(code === 'ECONNRESET' && status === 0)) return undefined;
  const ms = w.eject(Date.now(), f.cfg.ejectBaseMs, f.cfg.ejectMaxMs);
  metrics.ejections.labels(f.model, f.version, w.id).inc();
  const what =
    err instanceof ConnectError
      ? `could not connect to worker ${w.id} (${code})`
      : `worker ${w.id} dropped the request: it closed the connection before answering (${code})`;
  return new UpstreamError('upstream_connect_failed', `${what}; ejected for ${ms} ms`);
}

/** Why a broken stream was not continued when no worker of its version could take it (`err`: noWorkerLeft's). */
export function noWorkerToResume(err: GlidepathError): string {
  return err.code === 'worker_queue_full' ? 'every other worker of the version is saturated' : 'no other worker of the version could take it';
}

/** No worker of the version left to try: the last attempt's error, else `no_healthy_workers`. */
export function noWorkerLeft(last: GlidepathError | undefined, f: FailedRequest): GlidepathError {
  return (
    last ?? new UnavailableError('no_healthy_workers', `no healthy worker for ${f.model} version ${f.version}`, { retryAfterS: DEFAULTS.gateway.retryAfterS })
  );
}

/** A stream the worker broke with an event that is not SSE (or a malformed one). */
export function malformedStream(workerId: string, what: string | undefined): UpstreamError {
  return new UpstreamError('upstream_malformed_stream', `worker ${workerId} sent ${what ?? 'a malformed event'}`);
}

/** A stream the worker broke with its own error event (an exception mid-stream: the worker's 5xx, in-band), else with a malformed event. */
export function badEvent(workerId: string, src: { readonly malformed: string | undefined; readonly workerError: string | undefined }): UpstreamError {
  if (src.workerError === undefined) return malformedStream(workerId, src.malformed);
  return new UpstreamError('upstream_error', `worker ${workerId} sent an error event mid-stream: ${src.workerError}`);
}

/** An answer past the request limit × 16: garbage, and not retried elsewhere (it would cost another worker the same). */
export function tooLargeAnswer(workerId: string, max: number): UpstreamError {
  return new UpstreamError('upstream_response_too_large', `worker ${workerId} answered more than ${max} bytes`);
}

/** The worker's connection failed after the request reached it: a stream the client had begun broke, else the attempt closed. */
export function dropped(workerId: string, err: Error, status: number, streaming: boolean): UpstreamError {
  return streaming
    ? new UpstreamError('upstream_stream_broken', `worker ${workerId} dropped the stream: ${errText(err)}`)
    : new UpstreamError('upstream_closed', `worker ${workerId} failed ${status === 0 ? 'before answering' : 'mid-response'}: ${errText(err)}`);
}

/** A stream the worker ended without `[DONE]`. */
export function truncated(workerId: string): UpstreamError {
  return new UpstreamError('upstream_truncated', `worker ${workerId} ended the stream without [DONE]`);
}

/** An errno error as `CODE: message`. */
export function errText(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? `${code}: ${err.message}` : err.message;
}
