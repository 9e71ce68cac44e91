// The simulated engine: runs one inference request through faults, scheduler, timing and streaming.
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { BadRequestError, GlidepathError, NotFoundError, UnavailableError } from '../errors.js';
import { KvTransfers } from './disagg.js';
import type { Pulled } from './disagg.js';
import { DEFAULTS } from '../defaults.js';
import { FaultState } from './faults.js';
import type { Generated } from './generator.js';
import { sendError } from './http.js';
import { LoraRegistry } from './lora.js';
import { SimMetrics } from './metrics.js';
import type { SimOptions } from './options.js';
import { Renderer } from './render.js';
import { plan, produce, type Target } from './prepare.js';
import type { InferenceRequest } from './requests.js';
import { Scheduler, type Ticket } from './scheduler.js';
import { Lifecycle } from './sleep.js';
import { Jitter, itlMs, prefillMs, realClock, type Clock, type TimingParams } from './timing.js';
import { fmix32, unit } from './tokenizer.js';

/** One running request's emission state. */
interface Job {
  res: ServerResponse;
  g: Generated;
  r: Renderer;
  stream: boolean;
  includeUsage: boolean;
  promptTokens: number;
  arrival: number;
  ticket: Ticket;
  timing: TimingParams;
  jitter: Jitter;
  /** Token index at which the stream breaks (-1: never), and how. */
  crashAt: number;
  crashKind: 'crash' | 'stall' | 'garbage';
  adapter: string | undefined;
  /** Index of the next token to emit. */
  i: number;
  started: boolean;
  /** Due time of the next event (first token, then each token). */
  due: number;
  queuedMs: number;
  /** Gap before the token at index i (ms). */
  gap: number;
  timer: unknown;
  done: boolean;
  /** A prefill leg (disagg.ts): its answer names the blocks it then holds for a decode worker. */
  prefillLeg: boolean;
}

export class SimEngine {
  readonly metrics: SimMetrics;
  readonly faults: FaultState;
  readonly loras: LoraRegistry;
  readonly scheduler: Scheduler;
  readonly life: Lifecycle;
  /** Disaggregated serving: the KV blocks this engine holds for decode workers, and its pulls (disagg.ts). */
  readonly kv: KvTransfers;
  /** 'fault' (kind) when a fault is injected; 'request' ('running' | 'waiting' | 'rejected') when a request is admitted; 'finished' ('stop' | 'length' | 'abort' | 'crash'); 'phase' ('sleeping' | 'waking' | 'ready'). Tests await these instead of sleeping. */
  readonly events = new EventEmitter();
  private readonly jobs = new Set<Job>();
  private readonly parked = new Set<ServerResponse>();
  private readonly names: Set<string>;
  private closed = false;
  /** Random per worker; request ids are this plus a counter (unique without per-request randomness). */
  private readonly idPrefix = randomBytes(8).toString('hex');
  requests = 0;
  tokensOut = 0;

  constructor(
    readonly opts: SimOptions,
    private readonly onProcessExit: () => void,
    readonly clock: Clock = realClock,
  ) {
    this.names = new Set([opts.model, ...opts.servedModelNames]);
    this.life = new Lifecycle(clock, opts.loadTimeMs, opts.wakeMs, opts.reloadMs, (p) => this.events.emit('phase', p));
    this.scheduler = new Scheduler(opts.maxNumSeqs, opts.kvCapacityTokens, opts.maxWaitingRequests);
    this.kv = new KvTransfers(opts.kvRole, opts.kvLayout);
    this.loras = new LoraRegistry(opts.maxLoras, (n) => this.names.has(n) || n === opts.judgeModel);
    this.metrics = new SimMetrics(opts.model, opts.version, opts.seed, {
      running: () => this.scheduler.running,
      waiting: () => this.scheduler.waiting,
      kvUsage: () => this.scheduler.kvUsage,
      loras: () => ({ running: this.loras.running(), waiting: [], max: opts.maxLoras }),
      sleepLevel: () => this.life.sleepLevel,
    });
    this.faults = new FaultState(opts.faults, opts.seed, (k) => {
      this.metrics.fault(k);
      this.events.emit('fault', k);
    });
  }

  /** Names served (base, aliases, judge) and loaded adapters. */
  servedNames(): string[] {
    return [...this.names, ...(this.names.has(this.opts.judgeModel) ? [] : [this.opts.judgeModel])];
  }

  private resolve(model: string): Target {
    if (model === this.opts.judgeModel) return { name: model, adapter: undefined, judge: true };
    if (this.names.has(model)) return { name: model, adapter: undefined, judge: false };
    if (this.loras.has(model)) return { name: model, adapter: model, judge: false };
    throw new NotFoundError('model_not_found', `The model \`${model}\` does not exist.`);
  }

  /** Serve one validated inference request (errors are answered here, never thrown). */
  infer(req: InferenceRequest, res: ServerResponse): void {
    try {
      const kv = req.kvTransfer;
      if (kv === null) return this.run(req, res, undefined);
      this.kv.check(kv);
      if (kv.doRemoteDecode && req.stream)
        throw new BadRequestError('invalid_request', 'the prefill leg (do_remote_decode) is answered whole: send stream false');
      if (!kv.doRemotePrefill) return this.run(req, res, undefined);
      // a decode leg: ready to serve first, then the blocks pulled from the prefill worker
      this.ready(req.model);
      this.kv.pull(kv).then(
        (pulled) => {
          // the client left (or the engine stopped) during the pull: nothing to serve
          if (res.destroyed || this.closed) return;
          try {
            this.run(req, res, pulled);
          } catch (e) {
            sendError(res, e);
          }
        },
        (e: unknown) => sendError(res, e),
      );
    } catch (e) {
      sendError(res, e);
    }
  }

  /** The model `model` names can be served now (not loading, not asleep); its target. */
  private ready(model: string): ReturnType<SimEngine['resolve']> {
    const target = this.resolve(model);
    const phase = this.life.phase;
    if (phase === 'loading') throw new UnavailableError('model_loading', 'the model is still loading', { retryAfterS: 1 });
    if (phase !== 'ready') throw new UnavailableError('engine_sleeping', 'the engine is sleeping; POST /wake_up first', { retryAfterS: 1 });
    return target;
  }

  /** Serve a request; `pulled`: a decode leg whose prompt's KV came from a prefill worker (its transfer is charged, not a prefill). */
  private run(req: InferenceRequest, res: ServerResponse, pulled: Pulled | undefined): void {
    const target = this.ready(req.model);
    const p = plan(req, this.opts);

    const fate = this.faults.decide();
    if (fate.kind === 'process_exit') {
      this.onProcessExit();
      res.destroy();
      return;
    }
    if (fate.kind === 'hang') {
      this.parked.add(res);
      res.on('close', () => this.parked.delete(res));
      return;
    }
    if (fate.kind === 'error') {
      throw new GlidepathError('injected_fault', `injected fault: HTTP ${fate.status}`, { status: fate.status });
    }

    // an adapter loaded with knobs (lora_path's query): its own error rate, speed and hallucinations
    const knobs = target.adapter === undefined ? undefined : this.loras.knobs(target.adapter);
    const no = this.requests++;
    if (knobs?.errorRate !== undefined && unit(fmix32((this.opts.seed ^ 0xada97) + Math.imul(no, 0x9e3779b1))) < knobs.errorRate) {
      this.faults.count('error');
      throw new GlidepathError('injected_fault', `injected fault (adapter ${target.adapter}): HTTP ${DEFAULTS.sim.faultErrorStatus}`, {
        status: DEFAULTS.sim.faultErrorStatus,
      });
    }
    const g = produce(req, this.opts, target, p, fate.corrupt, fate.logprobDrift, knobs?.hallucinationRate);
    const id = `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${this.idPrefix}${no.toString(16).padStart(8, '0')}`;
    const o = this.opts;
    const job: Job = {
      res,
      g,
      r: new Renderer(
        {
          kind: req.kind,
          id,
          created: Math.floor(Date.now() / 1000),
          model: target.name,
          promptTokens: p.promptTokens,
          topLogprobs: req.topLogprobs,
          continuousUsage: req.stream && req.continuousUsage,
        },
        g,
      ),
      stream: req.stream,
      includeUsage: req.includeUsage,
      promptTokens: p.promptTokens,
      arrival: this.clock.now(),
      ticket: { need: p.need, start: () => this.begin(job) },
      timing: {
        prefillTokensPerS: pulled === undefined ? o.prefillTokensPerS : DEFAULTS.sim.kvTransferTokensPerS,
        interTokenMs: o.interTokenMs,
        itlGrowthPerSeq: o.itlGrowthPerSeq,
        jitter: o.jitter,
        latencyMultiplier: fate.latencyMultiplier * (knobs?.latencyMultiplier ?? 1),
      },
      jitter: new Jitter(fmix32(o.seed ^ Math.imul(no + 1, 0x2c1b3c6d)), o.jitter),
      ...breakOf(fate),
      adapter: target.adapter,
      i: 0,
      started: false,
      due: 0,
      queuedMs: 0,
      gap: 0,
      timer: undefined,
      done: false,
      prefillLeg: req.kvTransfer?.doRemoteDecode === true,
    };
    res.on('close', () => {
      if (!job.done) this.abort(job);
    });
    const admitted = this.scheduler.submit(job.ticket);
    this.events.emit('request', admitted);
    if (admitted === 'rejected') {
      job.done = true;
      throw new UnavailableError('queue_full', `the waiting queue is full (${this.opts.maxWaitingRequests} requests)`, { retryAfterS: 1 });
    }
  }

  private begin(job: Job): void {
    if (job.done || this.closed) return;
    this.jobs.add(job);
    if (job.adapter) this.loras.begin(job.adapter);
    const now = this.clock.now();
    job.queuedMs = now - job.arrival;
    job.due = now + prefillMs(job.promptTokens, job.timing) * job.jitter.next();
    this.tick(job);
  }

  /** Timer entry point: a bug in one response must drop that response, never the process. */
  private tick(job: Job): void {
    try {
      this.step(job);
    } catch {
      if (job.done) return;
      job.done = true;
      this.release(job);
      job.res.destroy();
    }
  }

  /** Emit everything that is due; schedule the next wake-up. One write per tick. */
  private step(job: Job): void {
    job.timer = undefined;
    if (job.done || this.closed) return;
    const now = this.clock.now();
    if (job.due > now) {
      job.timer = this.clock.setTimer(() => this.tick(job), job.due - now);
      return;
    }
    const g = job.g;
    const n = g.tokens.length;
    let before = '';
    if (!job.started) {
      job.started = true;
      this.metrics.firstToken((job.due - job.arrival) / 1000, job.queuedMs / 1000, job.promptTokens);
      if (job.stream) {
        job.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        before = job.r.first();
      }
    }
    // inter-token gaps are observed in runs of equal values (at zero delay: one observation call)
    let runGap = -1;
    let runLen = 0;
    const from = job.i;
    let crashed = false;
    while (job.i < n && job.due <= now) {
      if (job.i === job.crashAt) {
        crashed = true;
        break;
      }
      if (job.i > 0) {
        if (job.gap !== runGap) {
          this.metrics.tokens(runGap / 1000, runLen);
          runGap = job.gap;
          runLen = 0;
        }
        runLen++;
      }
      job.i++;
      if (job.i < n) {
        const j = job.timing.jitter > 0 && job.timing.interTokenMs > 0 ? job.jitter.next() : 1;
        job.gap = itlMs(this.scheduler.running, job.timing) * j;
        job.due += job.gap;
      }
    }
    this.metrics.tokens(runGap / 1000, runLen);
    this.tokensOut += job.i - from;
    this.metrics.generated(job.i - from);
    // every due token goes out in one write
    if (crashed) return this.crash(job, job.stream ? job.r.render(from, job.i, before, '') : '');
    if (job.i < n) {
      if (job.stream) job.res.write(job.r.render(from, job.i, before, ''));
      job.timer = this.clock.setTimer(() => this.tick(job), Math.max(0, job.due - now));
      return;
    }
    this.finish(job, job.stream ? job.r.render(from, n, before, (n === 0 ? job.r.emptyFinal() : '') + job.r.end(job.includeUsage)) : '');
  }

  private finish(job: Job, out: string | Buffer): void {
    job.done = true;
    const g = job.g;
    if (job.stream) {
      job.res.end(out);
    } else {
      // a prefill leg's answer names the blocks it now holds (vLLM's kv_transfer_params); held only
      // for a prefill that completed, so refused or failed legs hold nothing
      const full = job.r.full();
      let body = full;
      if (job.prefillLeg) {
        try {
          body = `${full.slice(0, -1)},"kv_transfer_params":${JSON.stringify(this.kv.prefilled(job.promptTokens))}}`;
        } catch (e) {
          this.release(job);
          sendError(job.res, e);
          this.events.emit('finished', 'abort');
          return;
        }
      }
      job.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      job.res.end(body);
    }
    // a token cut by a stop string was generated (usage counts it) but never sent
    this.metrics.generated(g.count - g.tokens.length);
    this.metrics.finished((this.clock.now() - job.arrival) / 1000, g.finish);
    this.release(job);
    this.events.emit('finished', g.finish);
  }

  /**
   * Crash-after-N: flush what was emitted, then destroy the socket as a dying GPU would. Stall: send
   * nothing more and keep the connection (a hung GPU; the job ends when the client leaves). Garbage:
   * an event that is not JSON, then nothing.
   */
  private crash(job: Job, out: string | Buffer): void {
    this.faults.count(job.crashKind);
    if (job.crashKind !== 'crash') {
      // a non-streaming answer just never comes
      if (job.stream) job.res.write(job.crashKind === 'garbage' ? `${out.toString()}data: {"id": garbage\n\n` : out);
      return; // job.done stays false: the client's close releases it
    }
    job.done = true;
    this.release(job);
    this.events.emit('finished', 'crash');
    const kill = () => job.res.socket?.destroy();
    if (job.stream) job.res.write(out, kill);
    else kill();
  }

  private abort(job: Job): void {
    job.done = true;
    if (job.timer !== undefined) this.clock.clearTimer(job.timer);
    if (job.started) this.metrics.finished((this.clock.now() - job.arrival) / 1000, 'abort');
    this.release(job);
    this.events.emit('finished', 'abort');
  }

  private release(job: Job): void {
    if (job.timer !== undefined) this.clock.clearTimer(job.timer);
    job.timer = undefined;
    if (this.jobs.delete(job) && job.adapter) this.loras.end(job.adapter);
    this.scheduler.release(job.ticket);
  }

  /** Stop all timers and drop hung/in-flight responses (server shutdown). */
  shutdown(): void {
    this.closed = true;
    for (const job of this.jobs) {
      job.done = true;
      if (job.timer !== undefined) this.clock.clearTimer(job.timer);
    }
    this.jobs.clear();
    for (const r of this.parked) r.destroy();
    this.parked.clear();
    this.life.dispose();
  }
}

/** Where a served request's stream breaks, if a fault says it does (the earliest of crash, stall, garbage). */
function breakOf(fate: {
  crashAfterTokens?: number | undefined;
  stallAfterTokens?: number | undefined;
  garbageAfterTokens?: number | undefined;
}): Pick<Job, 'crashAt' | 'crashKind'> {
  let at: Pick<Job, 'crashAt' | 'crashKind'> = { crashAt: -1, crashKind: 'crash' };
  const consider = (n: number | undefined, kind: Job['crashKind']): void => {
    if (n !== undefined && (at.crashAt === -1 || n < at.crashAt)) at = { crashAt: n, crashKind: kind };
  };
  consider(fate.crashAfterTokens, 'crash');
  consider(fate.stallAfterTokens, 'stall');
  consider(fate.garbageAfterTokens, 'garbage');
  return at;
}
