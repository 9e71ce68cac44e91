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
