// A worker's answer read whole (non-streaming, or an error status) before it goes to the client, bounded.

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
