// The llama.cpp engine: its model and sequences (loaded, asleep, awake), the queue for a sequence, and one request from parsed body to the answer on the wire.
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { BadRequestError, NotFoundError, UnavailableError } from '../errors.js';
import type { InferenceRequest } from '../sim/requests.js';
import { SimMetrics } from '../sim/metrics.js';
import { sendError } from '../sim/http.js';
import type { Llama, LlamaContext, LlamaModel, LlamaSequence } from './binding.js';
import type { EngineOptions } from './options.js';
import { Slots } from './slots.js';
import { Answer } from './render.js';
import { generate } from './generate.js';
import { ChatTemplate } from './template.js';
import { DEFAULTS } from '../defaults.js';

export type EnginePhase = 'loading' | 'ready' | 'sleeping';

interface Loaded {
  model: LlamaModel;
  contexts: LlamaContext[];
  template: ChatTemplate;
}

export class LlamaEngine {
  readonly metrics: SimMetrics;
  private readonly slots: Slots<LlamaSequence>;
  private loaded: Loaded | undefined;
  phase: EnginePhase = 'loading';
  /** Tokens per sequence (prompt + completion). */
  contextSize = 0;
  private sleepLevel = 0;
  private readonly names: Set<string>;
  private readonly idPrefix = randomBytes(6).toString('hex');
  private requests = 0;
  /** Settles when the last request in flight ends (sleep waits for it). */
  private idle: (() => void) | undefined;

  constructor(
    readonly opts: EngineOptions,
    private readonly llama: Llama,
  ) {
    this.names = new Set([opts.model, ...opts.servedModelNames]);
    this.slots = new Slots(opts.maxWaitingRequests);
    this.metrics = new SimMetrics(
      opts.model,
      opts.version,
      0,
      {
        running: () => this.slots.running,
        waiting: () => this.slots.queued,
        kvUsage: () => this.slots.running / this.opts.maxNumSeqs,
        loras: () => ({ running: [], waiting: [], max: 0 }),
        sleepLevel: () => this.sleepLevel,
      },
      'llama.cpp',
    );
  }

  servedNames(): string[] {
    return [...this.names];
  }

  /** Load the model and make its sequences (start, and waking from sleep). */
  async load(): Promise<void> {
    const model = await this.llama.loadModel({ modelPath: this.opts.modelPath, gpuLayers: 0 });
    try {
      const size = this.opts.contextSize > 0 ? this.opts.contextSize : Math.min(model.trainContextSize, DEFAULTS.engine.maxContextSize);
      const n = this.opts.maxNumSeqs;
      // batch-invariant: a context per sequence, so that every evaluation holds one sequence's tokens only
      const contexts = this.opts.batchInvariant
        ? await Promise.all(Array.from({ length: n }, () => model.createContext({ contextSize: size, sequences: 1, threads: this.opts.threads })))
        : [await model.createContext({ contextSize: size * n, sequences: n, threads: this.opts.threads })];
      const first = contexts[0] as LlamaContext;
      this.contextSize = this.opts.batchInvariant ? first.contextSize : Math.floor(first.contextSize / n);
      const template = await ChatTemplate.of(model);
      this.loaded = { model, contexts, template };
      this.slots.fill(Array.from({ length: n }, (_, i) => (contexts[i] ?? first).getSequence()));
      this.phase = 'ready';
      this.sleepLevel = 0;
    } catch (e) {
      await model.dispose();
      throw e;
    }
  }

  /**
   * Sleep (vLLM's sleep mode): new requests are refused, those in flight finish, then the model is
   * unloaded (on a CPU both levels free the same memory). Waking loads it again.
   */
  async sleep(level: number): Promise<void> {
    if (this.phase !== 'ready') return;
    this.phase = 'sleeping';
    this.sleepLevel = level;
    this.slots.refuseWaiting(
      new UnavailableError('engine_sleeping', 'the engine went to sleep while this request waited; POST /wake_up first', { retryAfterS: 1 }),
    );
    if (this.slots.running > 0) await new Promise<void>((r) => (this.idle = r));
    await this.unload();
  }

  async wake(): Promise<void> {
    if (this.phase !== 'sleeping') return;
    this.phase = 'loading';
    await this.load();
  }

  async close(): Promise<void> {
    this.phase = 'sleeping';
    this.slots.refuseWaiting(new UnavailableError('engine_sleeping', 'the engine is shutting down', { retryAfterS: 1 }));
    await this.unload();
  }

  private async unload(): Promise<void> {
    const l = this.loaded;
    this.loaded = undefined;
    for (const s of this.slots.drain()) s.dispose();
    if (l !== undefined) {
      for (const c of l.contexts) await c.dispose();
      await l.model.dispose();
    }
  }

  private usable(): Loaded {
    if (this.phase === 'loading') throw new UnavailableError('model_loading', 'the model is still loading', { retryAfterS: 1 });
    if (this.phase !== 'ready' || this.loaded === undefined)
      throw new UnavailableError('engine_sleeping', 'the engine is sleeping; POST /wake_up first', { retryAfterS: 1 });
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
      const before = this.tokenize(l, l.template.render(req.messages.slice(0, -1), true, false));
      if (before.length < ids.length && before.every((t, i) => ids[i] === t)) return { ids, batch: before.length };
    }
    return { ids, batch: ids.length };
  }

  private tokenize(l: Loaded, text: string): number[] {
    const m = l.model;
    const ids = m.tokenize(text, true);
    const bos = m.tokens.bos;
    return bos !== null && m.tokens.shouldPrependBosToken && ids[0] !== bos ? [bos, ...ids] : ids;
  }

  private vocabSize(l: Loaded): number {
    return l.template.vocabSize;
  }

  /** Run one request; errors before the first byte are answered as errors, after it the stream is cut. */
  async infer(req: InferenceRequest, res: ServerResponse): Promise<void> {
    if (!this.names.has(req.model)) throw new NotFoundError('model_not_found', `The model \`${req.model}\` does not exist.`);
    if (req.kvTransfer !== null)
      throw new BadRequestError('invalid_request', 'kv_transfer_params: the llama.cpp engine does not serve disaggregated prefill/decode');
    if (req.minTokens > 0) throw new BadRequestError('invalid_request', 'min_tokens: the llama.cpp engine does not support min_tokens');
    const l = this.usable();
    const { ids: promptIds, batch } = this.prompt(req, l);
    const room = this.contextSize - promptIds.length;
    const asked = req.maxTokens ?? (req.kind === 'completion' ? this.opts.defaultCompletionTokens : room);
    if (room < 1 || asked > room) {
      throw new BadRequestError(
        'invalid_request',
        `This model's maximum context length is ${this.contextSize} tokens. However, you requested ${promptIds.length + asked} tokens (${promptIds.length} in the messages, ${asked} in the completion). Please reduce the length of the messages or completion.`,
      );
    }
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    const arrival = performance.now();
    const seq = await this.slots.take(gone.signal);
    try {
      if (gone.signal.aborted) return;
      await this.run(req, res, l, seq, { promptIds, batch }, asked, arrival);
    } finally {
      await seq.clearHistory().catch(() => undefined);
      // a sequence of a model unloaded meanwhile is not handed out again
      if (this.loaded === l) this.slots.release(seq);
      else {
        seq.dispose();
        this.slots.running--;
      }
      if (this.slots.running === 0) this.idle?.();
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
  ): Promise<void> {
    const answer = new Answer({
      kind: req.kind,
      id: `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${this.idPrefix}${(this.requests++).toString(16)}`,
      created: Math.floor(Date.now() / 1000),
      model: req.model,
      topLogprobs: req.topLogprobs,
      returnTokenIds: req.returnTokenIds,
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
      { promptIds, batch, maxTokens, ignoreEos: req.ignoreEos, temperature: req.temperature, seed: req.seed, stop: req.stop, topLogprobs: req.topLogprobs },
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
