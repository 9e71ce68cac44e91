// A worker's answer read whole (non-streaming, or an error status) before it goes to the client, bounded,
// and what it means for its request: passed through, retried, or a broken stream's end.
import { UpstreamError } from '../errors.js';

export class BufferedAnswer {
  private chunks: Buffer[] = [];
  /** Bytes in `chunks` (the bound is checked without re-summing). */
  private size = 0;

  constructor(
    /** Past this many bytes the answer is garbage (the caller fails it). */
    readonly max: number,
  ) {}

  /** Keep a piece (copied: it is borrowed from the pool's read buffer); false past the bound, and nothing is kept. */
  push(chunk: Buffer): boolean {
    this.chunks.push(Buffer.from(chunk));
    this.size += chunk.length;
    if (this.size <= this.max) return true;
    this.chunks = [];
    return false;
  }

  /**
   * The whole answer with its `tail`, undefined past the bound. An answer that came in one read (the
   * common case) is used where it lies, in the pool's read buffer: the front copies it into the client frame.
   */
  take(tail: Buffer | undefined): Buffer | undefined {
    if (this.chunks.length === 0) return tail ?? Buffer.alloc(0);
    if (tail !== undefined && !this.push(tail)) return undefined;
    const body = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    this.chunks = [];
    return body;
  }
}

/** The token counts of a 200 JSON answer (0 when it gives none); null when the body is not a JSON object. */
export function usageOf(body: Buffer): { prompt: number; completion: number } | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const usage = (parsed as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null }).usage;
  const n = (x: unknown) => (typeof x === 'number' ? x : 0);
  return { prompt: n(usage?.prompt_tokens), completion: n(usage?.completion_tokens) };
}

/** What a worker's whole answer means for its request (the proxy carries it out). */
export type AnswerVerdict =
  /** A broken stream's continuation answered an error: a 5xx may go to another worker, a 4xx is the engine refusing to continue. */
  | { kind: 'continuation'; err: UpstreamError; resumable: boolean }
  /** A 5xx before anything reached the client: retried while retries remain, else passed through. */
  | { kind: 'retry'; err: UpstreamError }
  | { kind: 'ok'; usage: { prompt: number; completion: number } }
  /** A 200 that is not JSON: the worker's fault. */
  | { kind: 'invalid'; err: UpstreamError }
  /** A 4xx: the client's problem, passed through. */
  | { kind: 'client' };

export function judgeAnswer(a: {
  worker: string;
  status: number;
  body: Buffer;
  continuation: boolean;
  retrying: boolean;
  disaggregated: boolean;
}): AnswerVerdict {
  const { worker, status, body } = a;
  if (a.continuation) {
    const answer = body.toString('utf8', 0, Math.min(body.length, 300));
    return status >= 500
      ? {
          kind: 'continuation',
          resumable: true,
          err: new UpstreamError('upstream_error', `worker ${worker} answered ${status} to the continuation: ${answer}`),
        }
      : {
          kind: 'continuation',
          resumable: false,
          err: new UpstreamError('upstream_resume_refused', `worker ${worker} refused to continue the stream (${status}): ${answer}`),
        };
  }
  if (a.retrying) {
    // a decode worker that could not pull the prefilled blocks is not at fault (the prefill worker is); retried with a new prefill
    const what = `worker ${worker} answered ${status}`;
    return a.disaggregated && body.includes('kv_transfer_failed')
      ? { kind: 'retry', err: new UpstreamError('upstream_kv_transfer_failed', `${what}: it could not pull the prefilled KV blocks`) }
      : { kind: 'retry', err: new UpstreamError('upstream_error', what, { details: { status } }) };
  }
  if (status !== 200) return { kind: 'client' };
  const usage = usageOf(body);
  if (usage === null)
    return { kind: 'invalid', err: new UpstreamError('upstream_invalid_json', `worker ${worker} answered 200 with a body that is not valid JSON`) };
  return { kind: 'ok', usage };
}
