// The llama.cpp engine: its model, its sequences and its LoRA adapters' (loaded, asleep, awake), and one request from parsed body to the answer on the wire.
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { BadRequestError, NotFoundError, UnavailableError } from '../errors.js';
import type { InferenceRequest } from '../sim/requests.js';
import { SimMetrics } from '../sim/metrics.js';
import { sendError } from '../sim/http.js';
import type { Llama, LlamaModel, LlamaSequence } from './binding.js';
import type { EngineOptions } from './options.js';
import { Pool } from './pool.js';
import { LoraRegistry } from '../sim/lora.js';
import { Answer } from './render.js';
import { generate } from './generate.js';
import { ChatTemplate } from './template.js';
import { DEFAULTS } from '../defaults.js';

export type EnginePhase = 'loading' | 'ready' | 'sleeping';

interface Loaded {
  model: LlamaModel;
  template: ChatTemplate;
  /** The base model's sequences. */
  base: Pool;
  /** Each loaded LoRA adapter's sequences, by its name. */
  adapters: Map<string, Pool>;
}

const sleeping = (what: string) => new UnavailableError('engine_sleeping', `${what}; POST /wake_up first`, { retryAfterS: 1 });

export class LlamaEngine {
  readonly metrics: SimMetrics;
  private loaded: Loaded | undefined;
  phase: EnginePhase = 'loading';
  /** Tokens per sequence (prompt + completion). */
  contextSize = 0;
  private sleepLevel = 0;
  private readonly names: Set<string>;
  /** The adapters asked for (name, path, max_loras, vLLM's messages): kept across sleep, loaded again on waking. */
  readonly loras: LoraRegistry;
  private readonly idPrefix = randomBytes(6).toString('hex');
  private requests = 0;

  constructor(
    readonly opts: EngineOptions,
    private readonly llama: Llama,
  ) {
    this.names = new Set([opts.model, ...opts.servedModelNames]);
    this.loras = new LoraRegistry(opts.maxLoras, (name) => this.names.has(name));
    const pools = (): Pool[] => (this.loaded === undefined ? [] : [this.loaded.base, ...this.loaded.adapters.values()]);
    const sum = (f: (p: Pool) => number) => pools().reduce((n, p) => n + f(p), 0);
    this.metrics = new SimMetrics(
      opts.model,
      opts.version,
      0,
      {
        running: () => sum((p) => p.slots.running),
        waiting: () => sum((p) => p.slots.queued),
        kvUsage: () => sum((p) => p.slots.running) / Math.max(1, this.opts.maxNumSeqs * pools().length),
        loras: () => ({
          running: this.loras.running(),
          waiting: [...(this.loaded?.adapters ?? new Map<string, Pool>())].filter(([, p]) => p.slots.queued > 0).map(([n]) => n),
          max: this.opts.maxLoras,
        }),
        sleepLevel: () => this.sleepLevel,
      },
      'llama.cpp',
    );
  }

  servedNames(): string[] {
    return [...this.names];
  }

  private shape(model: LlamaModel) {
    return {
      sequences: this.opts.maxNumSeqs,
      contextSize: this.opts.contextSize > 0 ? this.opts.contextSize : Math.min(model.trainContextSize, DEFAULTS.engine.maxContextSize),
      threads: this.opts.threads,
      batchInvariant: this.opts.batchInvariant,
      maxWaiting: this.opts.maxWaitingRequests,
    };
  }

  /** Load the model and make its sequences, and the registered adapters' (start, and waking from sleep). */
  load(): Promise<void> {
    return this.serially(() => this.loadOrSleep());
  }

  /** Load; a load that failed leaves the engine asleep (it may be woken again), not loading forever. */
  private async loadOrSleep(): Promise<void> {
    this.phase = 'loading';
    try {
      await this.loadNow();
    } catch (e) {
      this.phase = 'sleeping';
      throw e;
    }
  }

  private async loadNow(): Promise<void> {
    const model = await this.llama.loadModel({ modelPath: this.opts.modelPath, gpuLayers: 0 });
    let base: Pool | undefined;
    try {
      const template = await ChatTemplate.of(model);
      base = await Pool.create(model, this.shape(model));
      this.contextSize = base.contextSize;
      const adapters = new Map<string, Pool>();
      for (const a of this.loras.list()) {
        try {
          adapters.set(a.name, await Pool.create(model, this.shape(model), a.path));
        } catch (e) {
          // an adapter whose file went away while asleep is dropped, not the whole engine
          this.loras.unload({ lora_name: a.name });
          process.stderr.write(`glidepath engine: LoRA adapter '${a.name}' dropped on waking: ${e instanceof Error ? e.message : String(e)}\n`);
        }
      }
      this.loaded = { model, template, base, adapters };
      this.phase = 'ready';
      this.sleepLevel = 0;
    } catch (e) {
      await base?.close(sleeping('the engine failed to load'));
      await model.dispose();
      throw e;
    }
  }

  /**
   * Sleep (vLLM's sleep mode): new requests are refused, those in flight finish, then the model is
   * unloaded (on a CPU both levels free the same memory). Waking loads it again, with its adapters.
   * Sleep, wake and close run one after the other: a wake asked during a sleep's drain waits for it.
   */
  sleep(level: number): Promise<void> {
    return this.serially(async () => {
      if (this.phase !== 'ready') return;
      this.phase = 'sleeping';
      this.sleepLevel = level;
      await this.unload(sleeping('the engine went to sleep while this request waited'));
    });
  }

  wake(): Promise<void> {
    return this.serially(async () => {
      if (this.phase === 'sleeping') await this.loadOrSleep();
    });
  }

  close(): Promise<void> {
    return this.serially(async () => {
      this.phase = 'sleeping';
      await this.unload(new UnavailableError('engine_sleeping', 'the engine is shutting down', { retryAfterS: 1 }));
    });
  }

  /** The engine's transitions, one at a time, in the order asked. */
  private transitions: Promise<unknown> = Promise.resolve();
  private serially(f: () => Promise<void>): Promise<void> {
    const next = this.transitions.then(f, f);
    this.transitions = next.catch(() => undefined);
    return next;
  }

  /** Adapter pools being made or closed (a sleep waits for them before it unloads the model). */
  private readonly closing = new Set<Promise<void>>();

  private async unload(err: Error): Promise<void> {
    const l = this.loaded;
    if (l === undefined) return;
    this.loaded = undefined;
    await Promise.all([l.base.close(err), ...[...l.adapters.values()].map((p) => p.close(err)), ...this.closing]);
    await l.model.dispose();
  }

  /** `POST /v1/load_lora_adapter`: vLLM's checks, then the adapter applied to contexts of its own (a file llama.cpp cannot take is refused, naming why). */
  async loadAdapter(body: unknown): Promise<string> {
    const l = this.usable();
    const ok = this.loras.load(body);
    const a = this.loras.list().at(-1) as { name: string; path: string };
    let pool: Pool;
    // a sleep meanwhile waits for this before it unloads the model the contexts are made from
    const creating = Pool.create(l.model, this.shape(l.model), a.path);
    const settled = creating.then(
      () => undefined,
      () => undefined,
    );
    this.closing.add(settled);
    try {
      pool = await creating;
    } catch (e) {
      this.loras.unload({ lora_name: a.name });
      throw new BadRequestError(
        'invalid_lora_request',
        `Failed to load LoRA adapter '${a.name}' from ${a.path}: ${e instanceof Error ? e.message : String(e)}`,
      );
    } finally {
      this.closing.delete(settled);
    }
    // unloaded meanwhile, or the engine went to sleep: the new contexts are not kept
    if (this.loaded !== l || !this.loras.has(a.name)) {
      await pool.close(sleeping('the engine went to sleep'));
      if (this.loaded !== l) throw sleeping(`the engine went to sleep while LoRA adapter '${a.name}' loaded; it will be loaded on waking`);
      return ok;
    }
    l.adapters.set(a.name, pool);
    return ok;
  }

  /** `POST /v1/unload_lora_adapter`: its waiting requests refused, its running ones finished, its contexts freed. */
  async unloadAdapter(body: unknown): Promise<string> {
    if (this.opts.maxLoras === 0) throw new BadRequestError('lora_disabled', 'LoRA is not enabled on this worker (max_loras = 0).');
    const ok = this.loras.unload(body);
    const name = (body as { lora_name: string }).lora_name;
    const pool = this.loaded?.adapters.get(name);
    if (pool !== undefined) {
      this.loaded?.adapters.delete(name);
      const closed = pool.close(
        new NotFoundError('model_not_found', `The model \`${name}\` does not exist: the LoRA adapter was unloaded while this request waited.`),
      );
      this.closing.add(closed);
      await closed.finally(() => this.closing.delete(closed));
    }
    return ok;
  }

  private usable(): Loaded {
    if (this.phase === 'loading') throw new UnavailableError('model_loading', 'the model is still loading', { retryAfterS: 1 });
    if (this.phase !== 'ready' || this.loaded === undefined) throw sleeping('the engine is sleeping');
    return this.loaded;
  }

  /**
   * The prompt's token ids: given, or the text (a chat rendered by the model's template) tokenised
   * with its special tokens; and how many go in one batch (see GenerateRequest.batch): all, but for
   * a chat continuing its final assistant message, whose content is replayed token by token.
   */
  private prompt(req: InferenceRequest, l: Loaded): { ids: number[]; batch: number } {
    if (req.promptIds !== null) {
      const bad = req.promptIds.find((t) => !Number.isInteger(t) || t < 0 || t >= this.vocabSize(l));
      if (bad !== undefined) throw new BadRequestError('invalid_request', `prompt: token id ${bad} is outside the vocabulary (0 to ${this.vocabSize(l) - 1})`);
      return { ids: req.promptIds, batch: req.promptIds.length };
    }
    if (req.kind !== 'chat' || req.messages === null) {
      const ids = this.tokenize(l, req.prompt);
      return { ids, batch: ids.length };
    }
    const ids = this.tokenize(l, l.template.render(req.messages, req.addGenerationPrompt, req.continueFinal));
    if (req.continueFinal && req.messages.at(-1)?.role === 'assistant') {
      // the conversation before the message being continued, as its first request saw it
      let before: number[] = [];
      try {
        before = this.tokenize(l, l.template.render(req.messages.slice(0, -1), true, false));
      } catch {
        // a template that will not render the conversation without its last message: no replay
      }
      if (before.length > 0 && before.length < ids.length && before.every((t, i) => ids[i] === t)) return { ids, batch: before.length };
    }
    return { ids, batch: ids.length };
  }

  private tokenize(l: Loaded, text: string): number[] {
    // no token is longer than the vocabulary's longest piece: a text that cannot fit is refused before
    // llama.cpp tokenises it (synchronously, on the event loop)
    const least = Math.ceil(Buffer.byteLength(text) / l.template.longestPieceBytes);
    if (least > this.contextSize) throw this.tooLong(least, 0);
    const m = l.model;
    const ids = m.tokenize(text, true);
    const bos = m.tokens.bos;
    return bos !== null && m.tokens.shouldPrependBosToken && ids[0] !== bos ? [bos, ...ids] : ids;
  }

  private tooLong(prompt: number, asked: number): BadRequestError {
    return new BadRequestError(
      'invalid_request',
      `This model's maximum context length is ${this.contextSize} tokens. However, you requested ${prompt + asked} tokens (${prompt} in the messages, ${asked} in the completion). Please reduce the length of the messages or completion.`,
    );
  }

  private vocabSize(l: Loaded): number {
    return l.template.vocabSize;
  }

  /** Run one request; errors before the first byte are answered as errors, after it the stream is cut. */
  async infer(req: InferenceRequest, res: ServerResponse): Promise<void> {
    if (req.kvTransfer !== null)
      throw new BadRequestError('invalid_request', 'kv_transfer_params: the llama.cpp engine does not serve disaggregated prefill/decode');
    if (req.minTokens > 0) throw new BadRequestError('invalid_request', 'min_tokens: the llama.cpp engine does not support min_tokens');
    const l = this.usable();
    const pool = this.names.has(req.model) ? l.base : l.adapters.get(req.model);
    if (pool === undefined) throw new NotFoundError('model_not_found', `The model \`${req.model}\` does not exist.`);
    const { ids: promptIds, batch } = this.prompt(req, l);
    if (promptIds.length === 0) throw new BadRequestError('invalid_request', 'prompt: the prompt is empty (it tokenises to no token)');
    const room = this.contextSize - promptIds.length;
    const asked = req.maxTokens ?? (req.kind === 'completion' ? this.opts.defaultCompletionTokens : room);
    if (room < 1 || asked > room) throw this.tooLong(promptIds.length, asked);
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    const arrival = performance.now();
    const seq = await pool.slots.take(gone.signal);
    const lora = pool === l.base ? undefined : req.model;
    if (lora !== undefined) this.loras.begin(lora);
    try {
      if (gone.signal.aborted) return;
      await this.run(req, res, l, seq, { promptIds, batch }, asked, arrival, gone.signal);
    } finally {
      if (lora !== undefined) this.loras.end(lora);
      await seq.clearHistory().catch(() => undefined);
      pool.finished(seq);
    }
  }

  private async run(
    req: InferenceRequest,
    res: ServerResponse,
    l: Loaded,
    seq: LlamaSequence,
    { promptIds, batch }: { promptIds: number[]; batch: number },
    maxTokens: number,
    arrival: number,
    signal: AbortSignal,
  ): Promise<void> {
    const answer = new Answer({
      kind: req.kind,
      id: `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${this.idPrefix}${(this.requests++).toString(16)}`,
      created: Math.floor(Date.now() / 1000),
      model: req.model,
      topLogprobs: req.topLogprobs,
      returnTokenIds: req.returnTokenIds,
      continuousUsage: req.stream && req.continuousUsage,
      promptIds,
    });
    const started = performance.now();
    let firstAt = -1;
    let lastAt = started;
    if (req.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const first = answer.first();
      if (first !== '') res.write(first);
    }
    const { finish, tail } = await generate(
      l.model,
      seq,
      {
        promptIds,
        batch,
        maxTokens,
        ignoreEos: req.ignoreEos,
        temperature: req.temperature,
        topK: req.topK,
        topP: req.topP,
        seed: req.seed,
        stop: req.stop,
        topLogprobs: req.topLogprobs,
        signal,
      },
      (text, id, lp) => {
        const now = performance.now();
        if (firstAt < 0) {
          firstAt = now;
          this.metrics.firstToken((now - arrival) / 1000, (started - arrival) / 1000, promptIds.length);
        } else this.metrics.tokens((now - lastAt) / 1000, 1);
        lastAt = now;
        this.metrics.generated(1);
        const chunk = answer.token(text, id, lp);
        if (res.destroyed) return false;
        if (req.stream) res.write(chunk);
        return true;
      },
    );
    this.metrics.finished((performance.now() - arrival) / 1000, finish.reason);
    if (res.destroyed) return;
    if (req.stream) {
      res.end(answer.finish(tail, finish) + answer.end(req.includeUsage, finish.completionTokens));
      return;
    }
    answer.finish(tail, finish);
    const body = answer.full(finish);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  /** Answer an error the way the simulator does (a stream already started is cut). */
  fail(res: ServerResponse, e: unknown): void {
    sendError(res, e);
  }
}
