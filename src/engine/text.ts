// Generated token ids to text as a stream: a character split across byte tokens is held until it is whole, and a stop string is found across token boundaries and never sent in part.

/** Token ids to text; `last` are the ids before them (a SentencePiece word's leading space depends on them). */
export type Detokenize = (ids: readonly number[], last: readonly number[]) => string;

/** Byte tokens may split a character: at most this many are held waiting for the rest of it. */
const MAX_HELD = 4;
/** Ids of context kept for the next decode. */
const CONTEXT = 8;
const REPLACEMENT = '\uFFFD';
const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;

export class TextStream {
  /** Every character decoded so far. */
  private text = '';
  /** How many of them were given out. */
  private sent = 0;
  private held: number[] = [];
  private last: number[] = [];
  private readonly holdBack: number;
  /** The stop string that ended the text (null: none). */
  stopped: string | null = null;

  /** `context`: the prompt's ids, so that the first token decodes as it follows them (a word's leading space). */
  constructor(
    private readonly detokenize: Detokenize,
    private readonly stops: readonly string[],
    context: readonly number[] = [],
  ) {
    this.last = context.slice(-CONTEXT);
    this.holdBack = stops.reduce((m, s) => Math.max(m, s.length - 1), 0);
  }

  /** The whole text given out so far, and then what push/flush will add. */
  get all(): string {
    return this.stopped === null ? this.text : this.text.slice(0, this.sent);
  }

  /**
   * Add one generated token; returns the text that may be sent now ('' while a character or a
   * possible stop string is incomplete). After a stop string is found, `stopped` names it and
   * nothing more is taken.
   */
  push(id: number): string {
    if (this.stopped !== null) return '';
    this.held.push(id);
    const piece = this.detokenize(this.held, this.last);
    if (piece.endsWith(REPLACEMENT) && this.held.length < MAX_HELD) return '';
    this.last = [...this.last, ...this.held].slice(-CONTEXT);
    this.held = [];
    const from = this.text.length;
    this.text += piece;
    return this.release(from);
  }

  /** The end of generation: whatever was held back (a character left incomplete shows as U+FFFD, as vLLM shows it). */
  flush(): string {
    if (this.stopped !== null) return '';
    let out = '';
    if (this.held.length > 0) {
      const from = this.text.length;
      this.text += this.detokenize(this.held, this.last);
      this.held = [];
      out = this.release(from);
      if (this.stopped !== null) return out;
    }
    out += this.text.slice(this.sent);
    this.sent = this.text.length;
    return out;
  }

  /** After `text` grew from `from`: a stop string ends it there; otherwise all but what could start one goes out. */
  private release(from: number): string {
    let at = -1;
    for (const s of this.stops) {
      const i = this.text.indexOf(s, Math.max(0, from - s.length + 1));
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        this.stopped = s;
      }
    }
    let end = at >= 0 ? at : Math.max(this.sent, this.text.length - this.holdBack);
    // never between the two halves of a character outside the BMP (an emoji): each chunk is valid text
    if (end > this.sent && end < this.text.length && isHighSurrogate(this.text.charCodeAt(end - 1))) end--;
    const out = this.text.slice(this.sent, end);
    this.sent = end;
    return out;
  }
}
