// The simulator's HTTP server (node:http, no framework): routes vLLM's endpoints onto the engine.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BadRequestError, UnavailableError } from '../errors.js';
import { SimEngine } from './engine.js';
import { dispatch, readJson, routeTable, sendError, sendJson, sendText } from './http.js';
import type { Handler, Routes } from './http.js';
import { fromSnakeFaults, toSnakeFaults } from '../config/sim-faults.js';
import { zodMessage } from '../config/issues.js';
import { DEFAULTS } from '../defaults.js';
import { faultSchema, type SimOptions } from './options.js';
import { parseChat, parseCompletion } from './requests.js';
import type { Clock } from './timing.js';

export class SimServer {
  readonly engine: SimEngine;
  readonly server: Server;
  private routes: Routes;
  private exited = false;
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(
    readonly opts: SimOptions,
    clock?: Clock,
  ) {
    this.engine = new SimEngine(opts, () => this.processExit(), clock);
    this.routes = this.buildRoutes();
    this.server = createServer({ keepAliveTimeout: DEFAULTS.sim.keepAliveTimeoutMs }, (req, res) => this.handle(req, res));
    // a client error (bad HTTP) must never take the process down
    this.server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error) => reject(e);
      this.server.once('error', onError);
      this.server.listen({ port: this.opts.port, host: this.opts.host, backlog: DEFAULTS.sim.listenBacklog }, () => {
        this.server.off('error', onError);
        const port = (this.server.address() as AddressInfo).port;
        // where decode workers pull this engine's KV blocks from
        this.engine.kv.address = { host: this.opts.host, port };
        resolve(port);
      });
    });
  }

  /** Close the listener and end every open socket (streams, hung requests, keep-alive). */
  close(): Promise<void> {
    this.engine.shutdown();
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  get hasExited(): boolean {
    return this.exited;
  }

  /** Process-exit fault: exit the process (CLI) or drop the whole server abruptly (in-process). */
  private processExit(): void {
    if (this.opts.onProcessExit === 'exit') {
      process.exit(this.opts.exitCode);
    }
    this.exited = true;
    void this.close();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    dispatch(this.routes, req, res);
  }

  private buildRoutes(): Routes {
    const e = this.engine;
    const o = this.opts;
    const limit = o.maxBodyBytes;
    const { routes, add } = routeTable();
    add('POST', '/v1/chat/completions', async (req, res) => e.infer(parseChat(await readJson(req, limit), o.maxLogprobs), res));
    add('POST', '/v1/completions', async (req, res) => e.infer(parseCompletion(await readJson(req, limit), o.maxLogprobs), res));
    add('GET', '/v1/models', (_req, res) => sendJson(res, 200, this.models()));
    // disaggregated serving's side channel: a decode worker pulls a prefill's KV blocks (disagg.ts)
    add('POST', '/kv/pull', async (req, res) => sendJson(res, 200, e.kv.serve(await readJson(req, limit))));
    const health: Handler = (_req, res) => {
      if (e.life.phase === 'loading') sendError(res, new UnavailableError('model_loading', 'the model is still loading', { retryAfterS: 1 }));
      else sendText(res, 200, '');
    };
    add('GET', '/health', health);
    add('GET', '/health/ready', health);
    add('GET', '/version', (_req, res) => sendJson(res, 200, { version: o.version }));
    add('GET', '/metrics', async (_req, res) => sendText(res, 200, await e.metrics.text(), e.metrics.registry.contentType));
    add('POST', '/v1/load_lora_adapter', async (req, res) => {
      // the slot is taken at once; the answer comes once the weights would be on the GPU
      const msg = e.loras.load(await readJson(req, limit));
      if (o.loraLoadMs > 0) await new Promise((r) => setTimeout(r, o.loraLoadMs));
      sendText(res, 200, msg);
    });
    add('POST', '/v1/unload_lora_adapter', async (req, res) => sendText(res, 200, e.loras.unload(await readJson(req, limit))));
    add('POST', '/sleep', (_req, res, url) => {
      e.life.sleep(url.searchParams.get('level'));
      sendText(res, 200, '');
    });
    add('POST', '/wake_up', async (_req, res) => {
      await e.life.wake();
      sendText(res, 200, '');
    });
    add('GET', '/is_sleeping', (_req, res) => sendJson(res, 200, { is_sleeping: e.life.isSleeping }));
    add('GET', '/admin/faults', (_req, res) => sendJson(res, 200, { faults: toSnakeFaults(e.faults.current) }));
    add('POST', '/admin/faults', async (req, res) => {
      const body = await readJson(req, limit);
      const r = faultSchema.safeParse(body, { reportInput: true });
      if (!r.success) throw new BadRequestError('invalid_faults', `invalid fault set: ${zodMessage(r.error)}`);
      e.faults.set(fromSnakeFaults(r.data));
      sendJson(res, 200, { faults: toSnakeFaults(e.faults.current) });
    });
    add('DELETE', '/admin/faults', (_req, res) => {
      e.faults.clear();
      sendJson(res, 200, { faults: {} });
    });
    return routes;
  }

  private models(): object {
    const o = this.opts;
    const base = (id: string) => ({ id, object: 'model', created: this.created, owned_by: 'vllm', root: o.model, parent: null, max_model_len: o.maxModelLen });
    return {
      object: 'list',
      data: [
        ...this.engine.servedNames().map(base),
        ...this.engine.loras
          .list()
          .map((a) => ({ id: a.name, object: 'model', created: a.loadedAt, owned_by: 'vllm', root: a.path, parent: o.model, max_model_len: null })),
      ],
    };
  }
}
