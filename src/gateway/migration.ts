// One stream's resumption state across breaks: what was sent, how many migrations and how much time
// are left, the continuation in progress, and the migration metrics (docs/resilience.md).
import type { GatewayConfig } from '../config/types.js';
import type { ErrorCode, GlidepathError } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import type { VersionPool } from './pool.js';
import type { ParsedRequest } from './request.js';
import { SentLog } from './resume-state.js';
import type { SseMeter } from './sse.js';
import { Continuation, finishedEvents, planResume } from './resume.js';

/** Where a stream's events for the client come from: its worker's own (SseMeter) or a continuation's, rewritten (Migration). */
export interface StreamSource {
  /** Take a piece of the worker's stream; false when it held a malformed event or the worker's error event. */
  feed(chunk: Buffer, now: number): boolean;
  /** The whole events of the last piece, for the client (up to a malformed one). */
  readonly out: Buffer;
  /** `[DONE]` came. */
  readonly done: boolean;
  /** The stream ends here although the worker goes on (a stop string found across a break). */
  readonly cut: boolean;
  readonly malformed: string | undefined;
  /** The message of the worker's own error event, which broke the stream. */
  readonly workerError: string | undefined;
  /** The worker's data events read so far (the request's deadlines count from the last). */
  readonly events: number;
}

/** What to do after a break: ask another worker with `body`, end the stream with `end` (bytes for the client), or give up (`refused`: why). */
export type Next = { body: Buffer } | { end: string } | { refused: string };

const EMPTY = Buffer.alloc(0);

/**
 * Breaks a stream does not come back from: the client went away, the gateway's own resources ran
 * out, the whole version is being drained, or its worker was taken out by its health checks — for
 * silent corruption, so the text already sent is suspect and must not be carried on as a success.
 */
const FINAL: ReadonlyMap<ErrorCode, string> = new Map<ErrorCode, string>([
  ['client_closed', 'the client went away'],
  ['client_send_timeout', 'the client stopped reading'],
  ['local_resources_exhausted', "the gateway's own resources ran out"],
  ['upstream_response_too_large', 'the worker sent garbage'],
  ['drain_aborted', 'the whole version is being drained'],
  ['worker_unhealthy', 'its worker was taken out by its health checks, so the text already sent may be corrupt'],
]);

export class Migration implements StreamSource {
  /** What the client was sent (whole events only). */
  readonly log: SentLog;
  /** Migrations begun. */
  private count = 0;
  /** performance.now() of the first break and of the latest. */
  private firstBreak = NaN;
  private brokeAt = NaN;
  /** The error that began the migration in progress (the metric's reason). */
  private reason: ErrorCode | undefined;
  /** The continuing worker's stream, once one answered 200. */
  cont: Continuation | undefined;
  /** Waiting for the continuation's first bytes (the stall is observed then). */
  private stalled = false;
  private counted = false;

  constructor(
    private readonly chat: boolean,
    private readonly cfg: GatewayConfig,
    private readonly metrics: GatewayMetrics,
    private readonly pool: VersionPool,
    /** The stream's meter, which measures the rewritten events as they go out. */
    private readonly meter: SseMeter,
  ) {
    this.log = new SentLog(chat, cfg.resume.logBytes);
  }

  // ---- StreamSource: the continuation's events, rewritten -------------------------------------

  out: Buffer = EMPTY;
  feed(chunk: Buffer, now: number): boolean {
    const c = this.cont as Continuation;
    // (up to a bad event: the good ones before it in the same read go out)
    const s = c.feed(chunk);
    this.out = s === '' ? EMPTY : Buffer.from(s);
    if (s !== '') {
      this.meter.feed(this.out, now);
      this.delivered(now);
    }
    return c.malformed === undefined && c.workerError === undefined;
  }
  get done(): boolean {
    return this.cont?.done ?? false;
  }
  get cut(): boolean {
    return this.cont?.cut ?? false;
  }
  get malformed(): string | undefined {
    return this.cont?.malformed;
  }
  get workerError(): string | undefined {
    return this.cont?.workerError;
  }
  get events(): number {
    return this.cont?.events ?? 0;
  }

  /** The stream broke with `err` at `now`: continue it elsewhere, end it, or give up. */
  next(err: GlidepathError, req: ParsedRequest, now: number): Next {
    // a continuation that failed before it sent anything counts as failed; the new break is its reason
    if (this.stalled) {
      this.stalled = false;
      this.outcome('failed');
    }
    this.reason = err.code;
    this.brokeAt = now;
    if (this.firstBreak !== this.firstBreak) this.firstBreak = now;
    const so = this.log.read();
    // the client has the whole stream, [DONE] included: nothing to add (no error after it)
    if (so.done) return { end: '' };
    const final = FINAL.get(err.code);
    if (final !== undefined) {
      if (err.code === 'worker_unhealthy') this.outcome('not_resumable');
      return { refused: final };
    }
    // every choice finished (with n > 1, one that did is not the end: planResume refuses the rest)
    const finished = so.finished.length > 0 && so.finished.length >= Math.max(so.choices, choicesAsked(req));
    if (finished && (so.usageSent || !wantsUsage(req))) {
      // everything but [DONE] reached the client: end it here
      this.outcome('resumed');
      return { end: 'data: [DONE]\n\n' };
    }
    if (finished) {
      this.outcome('not_resumable');
      return { refused: 'it broke after its last token and before its usage, which cannot be counted elsewhere' };
    }
    if (this.count >= this.cfg.resume.maxMigrations) {
      this.outcome('exhausted');
      return { refused: `it broke ${this.count + 1} times (gateway.resume.max_migrations: ${this.cfg.resume.maxMigrations})` };
    }
    if (now - this.firstBreak > this.cfg.resume.budgetMs) {
      this.outcome('exhausted');
      return { refused: `it has been broken for more than gateway.resume.budget_ms (${this.cfg.resume.budgetMs} ms)` };
    }
    const d = planResume(req, this.chat, so, this.pool);
    if ('refused' in d) {
      this.outcome('not_resumable');
      return d;
    }
    if ('finished' in d) {
      if (wantsUsage(req)) {
        this.outcome('not_resumable');
        return { refused: 'its token budget ran out at the break, so the usage it asked for cannot be counted' };
      }
      this.outcome('resumed');
      return { end: finishedEvents(so, this.chat) };
    }
    this.count++;
    this.stalled = true;
    this.counted = false;
    this.cont = new Continuation(so, this.chat, d.plan.sent, req.body);
    this.meter.dropCarry();
    return { body: d.plan.body };
  }

  /** A continuation was asked for and nothing of it has reached the client yet. */
  get awaiting(): boolean {
    return this.stalled;
  }

  /** The continuation's first bytes reached the client at `now`: the migration worked. */
  private delivered(now: number): void {
    const c = this.cont;
    if (c !== undefined && !this.counted && c.prefilled >= 0) {
      this.counted = true;
      this.metrics.reprefillTokens.labels(this.pool.model, this.pool.version).inc(c.prefilled);
    }
    if (!this.stalled) return;
    this.stalled = false;
    this.metrics.migrationStall.labels(this.pool.model, this.pool.version).observe((now - this.brokeAt) / 1000);
    this.outcome('resumed');
  }

  /** A stream that could not be resumed for a reason outside the plan (no worker left, the continuation refused). */
  failed(): void {
    if (this.stalled) {
      this.stalled = false;
      this.outcome('failed');
    }
  }

  private outcome(o: 'resumed' | 'not_resumable' | 'exhausted' | 'failed'): void {
    this.metrics.migrations.labels(this.pool.model, this.pool.version, this.reason ?? 'upstream_stream_broken', o).inc();
  }
}

/** The choices a request's stream has: `n` per prompt (a completion may have several prompts). */
function choicesAsked(req: ParsedRequest): number {
  const b = req.body;
  const n = typeof b.n === 'number' && b.n > 1 ? b.n : 1;
  const p = b.prompt;
  return Array.isArray(p) && p.length > 0 && typeof p[0] !== 'number' ? n * p.length : n;
}

function wantsUsage(req: ParsedRequest): boolean {
  const o = req.body.stream_options as { include_usage?: unknown } | null | undefined;
  return o?.include_usage === true;
}
