// The llama.cpp engine's HTTP server: vLLM's endpoints (inference, models, health, metrics, sleep mode) on node:http, refusals shaped as the simulator's.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BadRequestError, UnavailableError } from '../errors.js';
import { DEFAULTS } from '../defaults.js';
import { dispatch, readJson, routeTable, sendError, sendJson, sendText } from '../sim/http.js';
import type { Handler, Routes } from '../sim/http.js';
import { parseChat, parseCompletion } from '../sim/requests.js';
import type { ParseOptions } from '../sim/requests.js';
import { LlamaEngine } from './engine.js';
import type { Llama } from './binding.js';
import type { EngineOptions } from './options.js';

const PARSE: ParseOptions = { engine: 'the llama.cpp engine', tokenIds: true };

export class EngineServer {
  readonly engine: LlamaEngine;
  readonly server: Server;
  private readonly routes: Routes;
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(
    readonly opts: EngineOptions,
    llama: Llama,
  ) {
    this.engine = new LlamaEngine(opts, llama);
    this.routes = this.buildRoutes();
    this.server = createServer({ keepAliveTimeout: DEFAULTS.sim.keepAliveTimeoutMs }, (req, res) => dispatch(this.routes, req, res));
    this.server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  /** Listen at once (/health answers 503 model_loading until the model is loaded), then load it. */
  async start(): Promise<number> {
    const port = await new Promise<number>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
    await this.engine.load();
    return port;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    await this.engine.close();
  }

  private buildRoutes(): Routes {
    const e = this.engine;
    const o = this.opts;
    const limit = o.maxBodyBytes;
    const { routes, add } = routeTable();
    add('POST', '/v1/chat/completions', async (req, res) => e.infer(parseChat(await readJson(req, limit), o.maxLogprobs, PARSE), res));
    add('POST', '/v1/completions', async (req, res) => e.infer(parseCompletion(await readJson(req, limit), o.maxLogprobs, PARSE), res));
    add('GET', '/v1/models', (_req, res) => sendJson(res, 200, this.models()));
    const health: Handler = (_req, res) => {
      if (e.phase === 'loading') sendError(res, new UnavailableError('model_loading', 'the model is still loading', { retryAfterS: 1 }));
      else sendText(res, 200, '');
    };
    add('GET', '/health', health);
    add('GET', '/health/ready', health);
    add('GET', '/version', (_req, res) => sendJson(res, 200, { version: o.version, engine: 'llama.cpp' }));
    add('GET', '/metrics', async (_req, res) => sendText(res, 200, await e.metrics.text(), e.metrics.registry.contentType));
    add('POST', '/v1/load_lora_adapter', async (req, res) => sendText(res, 200, await e.loadAdapter(await readJson(req, limit))));
    add('POST', '/v1/unload_lora_adapter', async (req, res) => sendText(res, 200, await e.unloadAdapter(await readJson(req, limit))));
    add('POST', '/sleep', async (_req, res, url) => {
      const level = url.searchParams.get('level') ?? '1';
      if (level !== '1' && level !== '2') throw new BadRequestError('invalid_sleep_level', `level must be 1 or 2, got ${JSON.stringify(level)}`);
      if (e.phase === 'loading') throw new UnavailableError('model_loading', 'the model is still loading; it cannot sleep yet', { retryAfterS: 1 });
      await e.sleep(Number(level));
      sendText(res, 200, '');
    });
    add('POST', '/wake_up', async (_req, res) => {
      try {
        await e.wake();
      } catch (err) {
        // the model file went away or changed into something llama.cpp cannot load: still asleep, say why
        throw new UnavailableError('engine_sleeping', `waking failed, the engine is still asleep: ${err instanceof Error ? err.message : String(err)}`, {
          retryAfterS: 1,
        });
      }
      sendText(res, 200, '');
    });
    add('GET', '/is_sleeping', (_req, res) => sendJson(res, 200, { is_sleeping: e.phase === 'sleeping' }));
    return routes;
  }

  private models(): object {
    const o = this.opts;
    return {
      object: 'list',
      data: [
        ...this.engine.servedNames().map((id) => ({
          id,
          object: 'model',
          created: this.created,
          owned_by: 'llama.cpp',
          root: o.modelPath,
          parent: null,
          max_model_len: this.engine.contextSize,
        })),
        // as vLLM lists them: the adapter's path as its root, the base model as its parent
        ...this.engine.loras.list().map((a) => ({
          id: a.name,
          object: 'model',
          created: a.loadedAt,
          owned_by: 'llama.cpp',
          root: a.path,
          parent: o.model,
          max_model_len: this.engine.contextSize,
        })),
      ],
    };
  }
}
