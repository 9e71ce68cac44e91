// The data plane's HTTP listener: OpenAI endpoints, health, readiness and metrics.
import type { AddressInfo, Server } from 'node:net';
import { DEFAULTS } from '../defaults.js';
import { GlidepathError, MethodNotAllowedError, NotFoundError } from '../errors.js';
import type { DataPlane } from './dataplane.js';
import { sendError, sendJson } from './respond.js';
import { createFrontServer } from './front.js';
import type { FrontRequest, FrontResponse } from './front.js';
import type { ListenerLimitsConfig } from '../config/types.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import { ThrottledWarning } from '../telemetry/log.js';
import { ClientLimits, autoMaxConnections, descriptorLimit, descriptorsFor } from './limits.js';
import type { Refusal } from './limits.js';

/** A listening socket server that can also drop its open connections (node:http's Server, the data plane's front). */
export type ClosableServer = Server & { closeAllConnections(): void };

export interface ListeningServer {
  server: ClosableServer;
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Split "host:port" (IPv6 in brackets) for `listen`. */
export function parseHostPort(s: string): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(s);
  if (!m) throw new Error(`expected HOST:PORT, got ${JSON.stringify(s)}`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`port out of range in ${JSON.stringify(s)}`);
  return { host: m[1] as string, port };
}

export function urlFor(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export function startListening(server: ClosableServer, host: string, port: number): Promise<ListeningServer> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ port, host, backlog: DEFAULTS.gateway.listenBacklog }, () => {
      server.off('error', onError);
      const addr = server.address() as AddressInfo;
      resolve({
        server,
        port: addr.port,
        url: urlFor(host, addr.port),
        close: () =>
          new Promise<void>((res) => {
            server.close(() => res());
            server.closeAllConnections();
          }),
      });
    });
  });
}

export interface DataServerOptions {
  /** Admission for the listener (none when absent, as in tests and benchmarks that drive the data plane directly). */
  limits?: ListenerLimitsConfig;
}

/** A listener's admission, wired to metrics and the log: what both the data plane and the admin API use. */
export interface Admission {
  readonly limits: ClientLimits;
  refused(reason: Refusal, addr: string): void;
  /** Attach to a listening server: accept errors (EMFILE…) are logged, never fatal. */
  watch(server: Server): void;
}

/**
 * Admission for `listener` from its configuration: a data-plane ceiling of 0 is derived from the
 * descriptor limit (logged once at start); refusals are counted and logged at most once per interval.
 */
export function admission(listener: 'data' | 'admin', cfg: ListenerLimitsConfig, telemetry: Telemetry, http2 = false): Admission {
  const fdLimit = descriptorLimit();
  const max = listener === 'data' && cfg.maxConnections === 0 ? autoMaxConnections(fdLimit) : cfg.maxConnections;
  const limits = new ClientLimits({ ...cfg, maxConnections: max });
  const metrics = telemetry.metrics;
  metrics.trackConnections(listener, () => limits.open, max);
  const log = telemetry.log;
  // one throttle per reason: a flood of one kind must not hide the first line of another
  const warnings: Record<Refusal, ThrottledWarning> = {
    capacity: new ThrottledWarning(log),
    client_connections: new ThrottledWarning(log),
    client_rate: new ThrottledWarning(log),
  };
  const acceptWarning = new ThrottledWarning(log);
  if (listener === 'data') {
    // over HTTP/2 a stream past its connection's first holds one descriptor: it weighs half a connection
    log.info(
      { listener, maxConnections: max, fdLimit: fdLimit ?? null, descriptorsPerStream: 2, http2StreamDescriptors: http2 ? 1 : null },
      'client connection ceiling',
    );
    // a ceiling set by hand above what the limit carries fails later, and worse: accepts and worker connects with EMFILE
    const fits = autoMaxConnections(fdLimit);
    if (cfg.maxConnections > 0 && fdLimit !== undefined && cfg.maxConnections > fits) {
      log.warn(
        { listener, maxConnections: max, fdLimit, needed: descriptorsFor(cfg.maxConnections) },
        `max_connections ${max} needs a descriptor limit of ${descriptorsFor(cfg.maxConnections)} (two per stream, client and worker, plus a reserve) but this process has ${fdLimit}: past ~${fits} connections, accepts and worker connects will fail (EMFILE); raise LimitNOFILE= (systemd) or ulimit -n, or lower max_connections`,
      );
    }
  }
  return {
    limits,
    refused(reason, addr) {
      metrics.clientRefused.labels(listener, reason).inc();
      if (reason === 'capacity') {
        warnings.capacity.warn(
          { listener, reason, open: limits.open, maxConnections: max, fdLimit: fdLimit ?? null },
          `${listener} listener at its ceiling of ${max} client connections: new connections get 503`,
        );
      } else {
        warnings[reason].warn({ listener, reason, client: addr }, `${listener} listener: client ${addr} over its per-client limit (429)`);
      }
    },
    watch(server) {
      server.on('error', (err: NodeJS.ErrnoException) => {
        if (!server.listening) return; // listen's own failure: startListening reports it
        // after listen() succeeded, 'error' is an accept failure (EMFILE, ENFILE…): the listener keeps going
        acceptWarning.warn(
          { listener, code: err.code ?? null, syscall: err.syscall ?? null, open: limits.open, fdLimit: fdLimit ?? null },
          `${listener} listener could not accept a connection: ${err.message}`,
        );
      });
    },
  };
}

const GET_PATHS: ReadonlySet<string> = new Set(['/health', '/ready', '/metrics', '/v1/models']);
/** Still answered at the connection ceiling (FrontOptions.probePaths). */
const PROBE_PATHS: ReadonlySet<string> = new Set(['/health', '/ready', '/metrics']);

export function createDataServer(dp: DataPlane, opts: DataServerOptions = {}): ClosableServer {
  const created = Math.floor(Date.now() / 1000);
  const handler = (req: FrontRequest, res: FrontResponse): void => {
    const url = req.url;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const method = req.method;
    try {
      if (path === '/v1/chat/completions' || path === '/v1/completions') {
        if (method !== 'POST') throw new MethodNotAllowedError(`${path} accepts POST, not ${method}`, ['POST']);
        dp.handle(req, res, path === '/v1/chat/completions' ? 'chat' : 'completions');
        return;
      }
      // an unknown path is 404 whatever the method (POST /v1/embeddings is not a 405)
      if (!GET_PATHS.has(path)) throw new NotFoundError('not_found', `no route for ${method} ${path}`);
      if (method !== 'GET' && method !== 'HEAD') throw new MethodNotAllowedError(`${path} accepts GET, not ${method}`, ['GET', 'HEAD']);
      switch (path) {
        case '/health':
          sendJson(res, 200, { status: 'ok' });
          return;
        case '/ready': {
          const r = dp.ready();
          sendJson(res, r.ready ? 200 : 503, { ready: r.ready, problems: r.problems });
          return;
        }
        case '/metrics':
          dp.telemetry.metrics.registry.metrics().then(
            (text) => {
              res.writeHead(200, { 'content-type': dp.telemetry.metrics.registry.contentType, 'content-length': Buffer.byteLength(text) });
              res.end(text);
            },
            (err: unknown) => sendError(res, new GlidepathError('metrics_failed', String(err))),
          );
          return;
        case '/v1/models': {
          const data: Record<string, unknown>[] = [...dp.models.keys()].map((id) => ({
            id,
            object: 'model',
            created,
            owned_by: 'glidepath',
            root: id,
            parent: null,
          }));
          // LoRA adapters, with the model whose workers serve them (vLLM's shape)
          for (const a of dp.adapters.list()) data.push({ id: a.name, object: 'model', created, owned_by: 'glidepath', root: a.source, parent: a.model });
          sendJson(res, 200, { object: 'list', data });
          return;
        }
        default:
          throw new NotFoundError('not_found', `no route for ${method} ${path}`);
      }
    } catch (err) {
      if (err instanceof MethodNotAllowedError || err instanceof NotFoundError) sendError(res, err);
      else sendError(res, new NotFoundError('not_found', `no route for ${method} ${path}`));
    }
  };
  const metrics = dp.telemetry.metrics;
  const adm = opts.limits === undefined ? undefined : admission('data', opts.limits, dp.telemetry, dp.cfg.http2.enabled);
  const server = createFrontServer(handler, {
    maxBodyBytes: dp.cfg.maxBodyBytes,
    sendTimeoutMs: dp.cfg.sendTimeoutMs,
    ...(dp.cfg.http2.enabled ? { http2: { maxConcurrentStreams: dp.cfg.http2.maxConcurrentStreams } } : {}),
    ...(adm === undefined ? {} : { limits: adm.limits, probePaths: PROBE_PATHS }),
    events: { sendTimeout: () => metrics.sendTimeouts.inc(), ...(adm === undefined ? {} : { refused: (why, addr) => adm.refused(why, addr) }) },
  });
  adm?.watch(server);
  return server;
}
