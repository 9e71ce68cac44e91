// What goes back to the client of one proxied request: a stream's headers once, its whole events with
// back-pressure (kept for a resumption) as the meter measures them, its end or its error in-band, the
// tokens it was told of; or a buffered answer with its headers; and a sampled copy of what it sent.
import type { UpstreamController } from './upstream.js';
import type { FrontResponse } from './front.js';
import { Migration } from './migration.js';
import type { StreamSource } from './migration.js';
import type { ProxyContext } from './proxy-context.js';
import type { VersionPool } from './pool.js';
import { SseMeter } from './sse.js';
import type { Worker } from './pool.js';
import type { RequestTimer } from './request-timer.js';
import { sseErrorEvent } from './sse.js';
import { sendError } from './respond.js';
import type { GlidepathError } from '../errors.js';
import type { ResponseCapture } from './tap.js';

/** The request a downstream belongs to: whether a worker's controller is still the one it streams from. */
export interface StreamOwner {
  isCurrent(c: UpstreamController): boolean;
}

export class Downstream {
  /** Headers (and maybe bytes) reached the client: nothing is retried from scratch after this. */
  started = false;
  /** A stream's resumption state (what it sent; its migrations), from its first bytes when resumption is on. */
  migration: Migration | undefined;
  /** Disaggregated serving: the worker that prefilled the prompt (named in a header beside the decode worker). */
  prefill: Worker | undefined;
  /** A LoRA adapter's request: whether its worker had the adapter loaded (`x-glidepath-adapter: hit`) or loaded it first (`miss`). */
  adapter: 'hit' | 'miss' | undefined;
  /** The stream's events as they reach the client (TTFT, inter-token gaps, tokens); kept across a continuation. */
  meter: SseMeter | undefined;
  /** Sampled for quality judging: a copy of the response bytes (undefined when not sampled). */
  capture: ResponseCapture | undefined;
  /** An adapter served under another name than the client asked for: the name put back in what it reads. */
  rename: ModelRename | undefined;

  constructor(
    readonly res: FrontResponse,
    private readonly timer: RequestTimer,
    private readonly owner: StreamOwner,
    private readonly ctx: ProxyContext,
    private readonly pool: VersionPool,
    private readonly path: string,
  ) {}

  /** A 200 stream begins (or continues on another worker): measured from here. */
  measure(): void {
    this.meter ??= SseMeter.forPath(this.path);
  }

  /** Where the client's events come from: the worker's stream as it is, or a continuation rewritten (migration.ts). */
  get source(): StreamSource {
    const m = this.migration;
    return m !== undefined && m.cont !== undefined ? m : (this.meter as SseMeter);
  }

  /** The tokens the client was told of: a continued stream's as rewritten (resume.ts), else the meter's. */
  tokens(): { prompt: number; completion: number } {
    const c = this.migration?.cont;
    if (c !== undefined && c.completionTokens >= 0) return { prompt: c.promptTokens, completion: c.completionTokens };
    const m = this.meter;
    return { prompt: m ? m.promptTokens() : 0, completion: m ? m.completionTokens() : 0 };
  }

  /** Send the stream's headers once, when its first bytes (or its end) reach the client; with resumption on, its migration state starts there. */
  startStream(w: Worker, contentType: string | undefined): void {
    if (this.started) return;
    this.started = true;
    const cfg = this.ctx.cfg;
    if (cfg.resume.maxMigrations > 0)
      this.migration = new Migration(this.path.endsWith('/chat/completions'), cfg, this.ctx.metrics, this.pool, this.meter as SseMeter);
    const h = w.streamHeaders(contentType ?? 'text/event-stream');
    this.res.writeHead(200, this.prefill === undefined && this.adapter === undefined ? h : { ...h, ...this.extraHeaders() });
  }

  /**
   * A chunk of the worker's stream: its whole events to the client (copied when sampled). `cut`: the
   * gateway found the stop string (resume.ts) and the response is ended; `malformed`: it is not SSE,
   * or the worker's own error event.
   */
  relay(controller: UpstreamController, w: Worker, contentType: string | undefined, chunk: Buffer, now: number): 'more' | 'cut' | 'malformed' {
    const src = this.source;
    const events = src.events;
    const ok = src.feed(chunk, now);
    // the first-token and idle deadlines count from whole data events: comments and a trickle of bytes keep no stream open
    if (src.events !== events) this.timer.data(now);
    const out = src.out;
    if (this.capture !== undefined && out.length > 0) this.capture.push(out);
    this.startStream(w, contentType);
    if (src.cut) {
      this.res.end(this.named(out));
      return 'cut';
    }
    // whole events only: a stream that breaks never leaves its client half an event
    if (out.length > 0) this.forward(controller, out);
    return ok ? 'more' : 'malformed';
  }

  /**
   * The worker ended its stream; `tail` (its last bytes, if they came with the end) goes out with the
   * end, one write. `done`: the client's response is ended; otherwise the stream broke, the client's
   * response still open: `truncated` (no end event) or `malformed`.
   */
  endWith(w: Worker, contentType: string | undefined, tail: Buffer | undefined): 'done' | 'truncated' | 'malformed' {
    const src = this.source;
    const ok = tail === undefined || src.feed(tail, performance.now());
    const out = tail === undefined ? undefined : src.out;
    if (this.capture !== undefined && out !== undefined) this.capture.push(out);
    this.startStream(w, contentType); // an empty 200 stream still answers the client
    if (ok && src.done) {
      this.res.end(out === undefined ? out : this.named(out));
      return 'done';
    }
    this.writeLast(out);
    return ok ? 'truncated' : 'malformed';
  }

  /** Send whole events (keeping them for a resumption), holding the worker back while the client is slow. */
  forward(controller: UpstreamController, chunk: Buffer): void {
    const out = this.named(chunk);
    this.migration?.log.append(out);
    const res = this.res;
    if (!res.write(out)) {
      controller.pause();
      // the client is slow, not the worker: no idle timeout while we hold the worker back
      this.timer.stop();
      res.onceDrain(() => {
        // (a controller the stream has since left, its worker having broken, stays paused)
        if (!this.owner.isCurrent(controller)) return;
        this.timer.resumeIdle();
        controller.resume();
      });
    }
  }

  /** Write what a stream's worker sent before it ended badly (kept for the resumption that may follow). */
  writeLast(out: Buffer | undefined): void {
    if (out === undefined || out.length === 0) return;
    const named = this.named(out);
    this.migration?.log.append(named);
    this.res.write(named);
  }

  /** End a broken stream (its headers sent) with its error as an SSE event (`notResumed`: why it was not continued). */
  endBroken(err: GlidepathError, notResumed?: string): void {
    this.migration?.failed();
    if (this.res.destroyed) return;
    const why = notResumed === undefined || this.migration === undefined ? '' : ` (not resumed: ${notResumed})`;
    this.res.end(sseErrorEvent(err.message + why, err.code));
  }

  /** The gateway's own error answer, before anything was sent, naming the worker that was tried (if any). */
  sendError(err: GlidepathError, w: Worker | undefined): void {
    if (this.started || this.res.destroyed) return;
    sendError(this.res, err, w === undefined ? {} : { 'x-glidepath-version': w.headers.version, 'x-glidepath-worker': w.headers.worker });
  }

  /** The prefill worker's header (disaggregated serving), the adapter's (hit or miss). */
  private extraHeaders(): Record<string, string> {
    const x: Record<string, string> = {};
    if (this.prefill !== undefined) x['x-glidepath-prefill-worker'] = this.prefill.headers.worker;
    if (this.adapter !== undefined) x['x-glidepath-adapter'] = this.adapter;
    return x;
  }

  /** A whole answer (non-streaming, or an error status), with its headers. */
  sendAnswer(w: Worker, status: number, contentType: string | undefined, answer: Buffer): void {
    if (this.res.destroyed) return;
    const body = this.named(answer);
    this.started = true;
    this.res.writeHead(status, {
      'content-type': contentType ?? 'application/json',
      'content-length': body.length,
      'x-glidepath-version': w.headers.version,
      'x-glidepath-worker': w.headers.worker,
      // (nothing to call or copy for a request that is neither disaggregated nor an adapter's)
      ...(this.prefill === undefined && this.adapter === undefined ? undefined : this.extraHeaders()),
    });
    this.res.end(body);
  }

  /** Whole events or a whole answer as the client reads them (the adapter's name put back when renamed). */
  private named(b: Buffer): Buffer {
    return this.rename === undefined ? b : this.rename.apply(b);
  }
}

/**
 * The `model` of a worker's answer put back to the name the client asked for: an adapter served under
 * another name (an adapter canary's `<name>--<version>`). On whole events or a whole answer only (never
 * half a JSON string); bytes without the served name are returned as they are, without a copy.
 */
export class ModelRename {
  private readonly probe: Buffer;
  private readonly re: RegExp;
  private readonly to: string;

  constructor(from: string, to: string) {
    const q = JSON.stringify(from);
    this.probe = Buffer.from(q);
    this.re = new RegExp(`("model"\\s*:\\s*)${q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'g');
    this.to = JSON.stringify(to);
  }

  apply(b: Buffer): Buffer {
    if (b.indexOf(this.probe) === -1) return b;
    return Buffer.from(
      b.toString('utf8').replace(this.re, (_m, key: string) => key + this.to),
      'utf8',
    );
  }
}
