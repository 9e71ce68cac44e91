// Response taps: copies of answers (sampled client responses, shadow answers) handed to a listener
// for quality judging, off the serving path: a listener's failure never reaches a client.
import type { ParsedRequest } from './request.js';

/** A captured response (sampled client response or shadow answer) for quality judging. */
export interface TappedResponse {
  model: string;
  version: string;
  /** A LoRA adapter's request: the name the engine serves it under (an adapter canary's two sides differ). */
  adapter?: string | undefined;
  /** Set on a client response and the shadow answer to the same request: join them on it. */
  pairId: number | undefined;
  shadow: boolean;
  request: ParsedRequest;
  status: number;
  /** Full response body as the worker sent it (SSE text for streams). */
  body: string;
  latencyMs: number;
}

export type TapListener = (r: TappedResponse) => void;

/** Per-model capture settings: `share` of client responses are copied to `listener`. */
export interface ResponseTap {
  share: number;
  listener: TapListener;
}

/**
 * One answer's bytes kept as they pass, `maxBytes` in all at most (`gateway.capture_max_bytes`): past
 * it, what was kept is let go and nothing more is (`text()` undefined: too long to judge).
 */
export class KeptBody {
  private pieces: Buffer[] = [];
  private bytes = 0;
  private over = false;
  constructor(private readonly maxBytes: number) {}

  /** Keep a piece (copied: the caller's bytes may be borrowed from a read buffer). */
  push(chunk: Buffer): void {
    if (this.over) return;
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) {
      this.over = true;
      this.pieces = [];
    } else this.pieces.push(Buffer.from(chunk));
  }

  /** The answer as text; undefined if it was longer than the bound. */
  text(): string | undefined {
    return this.over ? undefined : Buffer.concat(this.pieces).toString('utf8');
  }
}

/** A sampled client response being copied for its tap: pieces kept as they pass (bounded), handed over whole at the end. */
export class ResponseCapture {
  private readonly body: KeptBody;
  constructor(
    private readonly tap: ResponseTap,
    /** Joins it with the shadow answer to the same request (pairwise judging). */
    private readonly pairId: number | undefined,
    maxBytes: number,
    /** An answer too long to hand over was dropped. */
    private readonly dropped: () => void,
  ) {
    this.body = new KeptBody(maxBytes);
  }

  push(chunk: Buffer): void {
    this.body.push(chunk);
  }

  /** The request ended: a successful answer goes to the tap as text (unless it was too long to keep). */
  deliver(model: string, version: string, request: ParsedRequest, status: number, ok: boolean, latencyMs: number, adapter: string | undefined): void {
    if (!ok) return;
    const body = this.body.text();
    if (body === undefined) this.dropped();
    else deliver(this.tap, { model, version, adapter, pairId: this.pairId, shadow: false, request, status, body, latencyMs });
  }
}

/** Deliver to a tap; a listener's failure must never affect serving. */
export function deliver(tap: ResponseTap | undefined, r: TappedResponse): void {
  if (tap === undefined) return;
  try {
    tap.listener(r);
  } catch {
    // ignored on purpose
  }
}
