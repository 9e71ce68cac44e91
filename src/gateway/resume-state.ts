// What a stream has sent its client, kept so that another worker can continue it: the bytes as they
// went out (one growable buffer, a copy per write, nothing parsed), read into text only when the
// stream breaks or the buffer is full.

/** What the client has of a stream, read from the events it was sent. */
export interface SoFar {
  /** The stream's `id`, `object`, `created`, `model` (the continuation's events are given them). */
  id: string | undefined;
  object: string | undefined;
  created: number | undefined;
  model: string | undefined;
  /** The generated text sent (chat: `delta.content`; completions: `text`). */
  text: string;
  /** Events that carried text (one token each on vLLM, SGLang, llama.cpp and the simulator). */
  tokenEvents: number;
  /** The prompt's token ids, when the stream carried them (vLLM's `return_token_ids`: a completion's on its first choice, a chat's on its first event). */
  promptIds: number[] | undefined;
  /** The generated tokens' ids (`token_ids` of every choice event), all of them unless `idsMissing`. */
  tokenIds: number[];
  /** An event carried text without its token ids: `tokenIds` is not the whole of the text. */
  idsMissing: boolean;
  /**
   * `tokenIds` up to the last event that carried text: the ids after it are of tokens whose text the
   * engine still held back (an incomplete UTF-8 character; with stop strings, more).
   */
  idsAtText: number;
  /** Log-probability entries sent (chat: `logprobs.content`; completions: `logprobs.tokens`), one per token. */
  logprobs: number;
  /** `logprobs` up to the last event that carried text (as `idsAtText`: those after it are of tokens a continuation generates again). */
  logprobsAtText: number;
  /**
   * The running count of completion tokens (continuous usage stats) on the last event that carried
   * text; -1: that event had none. Not a later event's: an engine counts the tokens whose text it
   * still holds back (half a UTF-8 character, a stop string's possible start), and a continuation
   * generates those again.
   */
  completionTokens: number;
  /** The stream's end was sent: the choices that had a `finish_reason` (their indexes), the usage-only event, `[DONE]`. */
  finished: number[];
  /** Choices seen: the highest index + 1. */
  choices: number;
  usageSent: boolean;
  done: boolean;
  /** Something was sent that a continuation cannot carry on (tool calls, reasoning, a second choice); named for the error. */
  unsupported: string | undefined;
  /**
   * Events that could not be read: 0 unless the log was cut, or a token event on the meter's byte
   * path (only its shape checked there: one line, `data: {`…`]}`, its text key) was not JSON.
   */
  unreadable: number;
  /** Chat: the client has its opening `role` event. */
  role: boolean;
}

export function emptySoFar(): SoFar {
  return {
    id: undefined,
    object: undefined,
    created: undefined,
    model: undefined,
    text: '',
    tokenEvents: 0,
    promptIds: undefined,
    tokenIds: [],
    idsMissing: false,
    idsAtText: 0,
    logprobs: 0,
    logprobsAtText: 0,
    completionTokens: -1,
    finished: [],
    choices: 0,
    usageSent: false,
    done: false,
    unsupported: undefined,
    unreadable: 0,
    role: false,
  };
}

interface Chunk {
  id?: unknown;
  object?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: unknown;
  usage?: { completion_tokens?: unknown } | null;
  prompt_token_ids?: unknown;
}

interface Choice {
  index?: unknown;
  text?: unknown;
  prompt_token_ids?: unknown;
  token_ids?: unknown;
  delta?: { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown; reasoning?: unknown; function_call?: unknown } | null;
  finish_reason?: unknown;
  logprobs?: unknown;
}

/** The log-probability entries of a choice's `logprobs` (chat: `content`; completions: `tokens`), 0 when none. */
function logprobEntries(lp: unknown, chat: boolean): number {
  if (typeof lp !== 'object' || lp === null) return 0;
  const list = chat ? (lp as { content?: unknown }).content : (lp as { tokens?: unknown }).tokens;
  return Array.isArray(list) ? list.length : 0;
}

/** Fold the `data:` payload of one event into `s`. */
export function readEvent(s: SoFar, data: string, chat: boolean): void {
  if (data === '[DONE]') {
    s.done = true;
    return;
  }
  let c: Chunk;
  try {
    c = JSON.parse(data) as Chunk;
  } catch {
    s.unreadable++;
    return;
  }
  if (typeof c !== 'object' || c === null) {
    s.unreadable++;
    return;
  }
  if (typeof c.id === 'string') s.id ??= c.id;
  if (typeof c.object === 'string') s.object ??= c.object;
  if (typeof c.created === 'number') s.created ??= c.created;
  if (typeof c.model === 'string') s.model ??= c.model;
  const running = c.usage !== undefined && c.usage !== null && typeof c.usage.completion_tokens === 'number' ? c.usage.completion_tokens : -1;
  if (s.promptIds === undefined && isIds(c.prompt_token_ids)) s.promptIds = c.prompt_token_ids;
  const choices = Array.isArray(c.choices) ? (c.choices as Choice[]) : [];
  if (choices.length === 0 && c.usage) s.usageSent = true;
  for (const ch of choices) {
    if (typeof ch !== 'object' || ch === null) continue;
    if (ch.index !== undefined && ch.index !== 0) s.unsupported ??= `a choice with index ${JSON.stringify(ch.index)} (n > 1)`;
    const index = typeof ch.index === 'number' ? ch.index : 0;
    if (index >= s.choices) s.choices = index + 1;
    let text: unknown;
    if (chat) {
      const d = ch.delta;
      if (d) {
        text = d.content;
        if ((d as { role?: unknown }).role !== undefined) s.role = true;
        if (d.tool_calls !== undefined && d.tool_calls !== null) s.unsupported ??= 'tool calls';
        if (d.function_call !== undefined && d.function_call !== null) s.unsupported ??= 'a function call';
        if (reasons(d)) s.unsupported ??= 'reasoning content';
      }
    } else {
      text = ch.text;
      if (s.promptIds === undefined && isIds(ch.prompt_token_ids)) s.promptIds = ch.prompt_token_ids;
    }
    const ids = ch.token_ids;
    if (isIds(ids)) for (const id of ids) s.tokenIds.push(id);
    s.logprobs += logprobEntries(ch.logprobs, chat);
    if (typeof text === 'string' && text !== '') {
      s.text += text;
      s.tokenEvents++;
      if (!isIds(ids)) s.idsMissing = true;
      s.idsAtText = s.tokenIds.length;
      s.logprobsAtText = s.logprobs;
      s.completionTokens = running;
    }
    if (typeof ch.finish_reason === 'string' && !s.finished.includes(index)) s.finished.push(index);
  }
}

/** A list of token ids (non-negative integers). */
export function isIds(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((t) => Number.isInteger(t) && (t as number) >= 0);
}

/**
 * What surrounds the text of a stream's plain text events, learned from one read in full: an engine
 * writes every such event alike but for its text (`{"id":…,"choices":[{"index":0,"delta":{"content":`
 * and `},"logprobs":null,"finish_reason":null}]}` on vLLM), so an event that is `head` + one JSON
 * string literal + `tail` reads as that event with another text. Reading a stream's ~100 events one
 * JSON.parse each was ~60 % of what a break cost the gateway: a kill -9 breaks ~30 streams at once,
 * and each waits for all of them to be read (docs/resilience.md).
 */
interface TextShape {
  head: string;
  tail: string;
  /** The event's line up to its text: `data: ` + head. */
  line: string;
}

/** Shapes one read learns at most (each is two JSON.parse of an event): a stream's own events have one. */
const MAX_SHAPES = 4;
/** A marker no engine writes, for proving where an event's text sits. */
const PROBE = '\u2063glidepath text\u2063';
/** What a string literal's inside may hold for it to be its own value: no quote, backslash or control character. */
// eslint-disable-next-line no-control-regex -- raw control characters are what a JSON string may not hold
const SPECIAL = /["\\\u0000-\u001f]/;

/** The text of one JSON string literal `lit` (undefined: `lit` is not exactly one). */
function literal(lit: string): string | undefined {
  const n = lit.length;
  if (n < 2 || lit.charCodeAt(0) !== 34 || lit.charCodeAt(n - 1) !== 34) return undefined;
  const inner = lit.slice(1, -1);
  if (!SPECIAL.test(inner)) return inner;
  try {
    const v: unknown = JSON.parse(lit);
    return typeof v === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The shape of `data` when it is a plain text event — one choice (index 0) whose only effect on what
 * the client has is its non-empty text: no token ids, log-probabilities, finish, usage, tool call or prompt ids —
 * and its text is the literal after the last `"content":` (chat) or `"text":` key, on one line;
 * undefined otherwise. The place is proven by reading the event again with another text there.
 */
function learnShape(data: string, chat: boolean): TextShape | undefined {
  // a data field over several lines: its head or tail would hold a newline, which a later event can
  // have without the `data:` after it (then not JSON, and unreadable to the full read)
  if (data.indexOf('\n') !== -1) return undefined;
  let c: Chunk;
  try {
    c = JSON.parse(data) as Chunk;
  } catch {
    return undefined;
  }
  if (typeof c !== 'object' || c === null || (c.usage ?? null) !== null || (c.prompt_token_ids ?? null) !== null) return undefined;
  const text = plainText(c, chat);
  if (text === undefined) return undefined;
  const key = chat ? '"content":' : '"text":';
  let j = data.lastIndexOf(key);
  if (j === -1) return undefined;
  j += key.length;
  while (data.charCodeAt(j) === 32) j++;
  if (data.charCodeAt(j) !== 34) return undefined;
  let k = j + 1;
  while (k < data.length && data.charCodeAt(k) !== 34) k += data.charCodeAt(k) === 92 ? 2 : 1;
  const head = data.slice(0, j);
  const shape = { head, tail: data.slice(k + 1), line: `data: ${head}` };
  if (literal(data.slice(j, k + 1)) !== text) return undefined;
  try {
    return plainText(JSON.parse(shape.head + JSON.stringify(PROBE) + shape.tail) as Chunk, chat) === PROBE ? shape : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The text of a chunk whose only effect is its text (see learnShape); undefined for any other. A role
 * (SGLang sends `"role":null` on every event) is let through: reading it says the client has its role
 * event, which the event read in full before the others said already.
 */
function plainText(c: Chunk, chat: boolean): string | undefined {
  if (!Array.isArray(c.choices) || c.choices.length !== 1) return undefined;
  const ch = c.choices[0] as Choice;
  if (typeof ch !== 'object' || ch === null || (ch.index !== undefined && ch.index !== 0) || (ch.token_ids ?? null) !== null) return undefined;
  if (typeof ch.finish_reason === 'string' || (ch.logprobs ?? null) !== null) return undefined;
  let text: unknown;
  if (chat) {
    const d = ch.delta as Record<string, unknown> | null | undefined;
    if (typeof d !== 'object' || d === null) return undefined;
    if ((d.tool_calls ?? null) !== null || (d.function_call ?? null) !== null || reasons(d)) return undefined;
    text = d.content;
  } else {
    if ((ch.prompt_token_ids ?? null) !== null) return undefined;
    text = ch.text;
  }
  return typeof text === 'string' && text !== '' ? text : undefined;
}

/** A chat delta carrying reasoning: `reasoning_content` (vLLM's reasoning parsers, SGLang, DeepSeek's API) or `reasoning` (newer vLLM, OpenRouter). */
function reasons(d: { reasoning_content?: unknown; reasoning?: unknown }): boolean {
  return (typeof d.reasoning_content === 'string' && d.reasoning_content !== '') || (typeof d.reasoning === 'string' && d.reasoning !== '');
}

/** The `data:` payload of the event in `text` from `pos` to `end` ('' if it has none). */
function dataOf(text: string, pos: number, end: number): string {
  const nl = text.indexOf('\n', pos);
  if (nl === -1 || nl >= end) {
    // one line: the common case
    if (!text.startsWith('data:', pos)) return '';
    return text.slice(text.charCodeAt(pos + 5) === 32 ? pos + 6 : pos + 5, end);
  }
  let data = '';
  for (const line of text.slice(pos, end).split('\n')) {
    if (!line.startsWith('data:')) continue; // comments, event:, id:, retry:
    const v = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
    data = data === '' ? v : `${data}\n${v}`;
  }
  return data;
}

/**
 * Fold every complete event of `bytes` (SSE with LF line endings, as the meter forwards them) into `s`.
 * A plain text event shaped as the first one read in full (TextShape) adds its text without being
 * parsed whole; any other is read in full.
 */
export function readEvents(s: SoFar, bytes: Buffer, chat: boolean): void {
  let text = bytes.toString('utf8');
  // a worker's CR or CRLF line endings are forwarded as sent
  if (text.indexOf('\r') !== -1) text = text.replace(/\r\n?/g, '\n');
  let shape: TextShape | undefined;
  let learns = 0;
  let pos = 0;
  while (pos < text.length) {
    let end = text.indexOf('\n\n', pos);
    if (end === -1) end = text.length;
    const from = pos;
    pos = end + 2;
    if (shape !== undefined) {
      // "data: " + head + a string literal + tail, on one line (compared as slices: V8's startsWith
      // with a position compared ~130 characters in ~1 µs, a slice's === in ~0.1 µs)
      const at = from + shape.line.length;
      const to = end - shape.tail.length;
      if (to - at >= 2 && text.slice(from, at) === shape.line && text.slice(to, end) === shape.tail) {
        const t = literal(text.slice(at, to));
        if (t !== undefined) {
          if (t !== '') {
            s.text += t;
            s.tokenEvents++;
            s.idsMissing = true;
            s.idsAtText = s.tokenIds.length;
            // (a shape has no log-probabilities)
            s.logprobsAtText = s.logprobs;
            // (a shape has no usage)
            s.completionTokens = -1;
          }
          continue;
        }
      }
    }
    const data = dataOf(text, from, end);
    if (data === '') continue;
    const before = s.tokenEvents;
    readEvent(s, data, chat);
    // learnt from an event that carried text (the opening role event carries none) and did not have
    // the shape: the first, or the first of a continuation whose events are written otherwise
    if (learns < MAX_SHAPES && s.tokenEvents > before) {
      learns++;
      shape = learnShape(data, chat) ?? shape;
    }
  }
}

/** A stream's first buffer: 16 KiB holds a ~100-token chat stream's events. */
const FIRST = 16_384;
/**
 * First buffers of finished streams, reused: a new buffer per stream (and its growth) cost ~6 µs per
 * 64-event stream, a reused one ~1 µs (measured). At most 256 (4 MiB) wait here.
 */
const spare: Buffer[] = [];
const SPARE_MAX = 256;

/**
 * The bytes a stream sent its client. Appending is one copy (TypedArray#set, not Buffer#copy: half
 * the overhead per call) into a buffer that starts at 16 KiB (reused from finished streams) and
 * doubles up to `maxBytes`; past `maxBytes` what is held is read into `SoFar` (text only) and the
 * buffer starts over, so a long stream holds its text plus a buffer of at most `maxBytes` (16 KiB if
 * that is less; a single larger write, its size). `release` when the stream is over.
 */
export class SentLog {
  private buf: Buffer | undefined;
  private len = 0;
  private folded: SoFar | undefined;

  constructor(
    private readonly chat: boolean,
    private readonly maxBytes: number,
  ) {}

  append(b: Buffer): void {
    const n = b.length;
    let buf = this.buf;
    if (buf === undefined) buf = this.buf = spare.pop() ?? Buffer.allocUnsafeSlow(FIRST);
    if (this.len + n > buf.length) {
      if (this.len + n > this.maxBytes) {
        readEvents((this.folded ??= emptySoFar()), buf.subarray(0, this.len), this.chat);
        this.len = 0;
      }
      if (this.len + n > buf.length) {
        // doubling, but never past the bound (a bound that is not 16 KiB times a power of two was
        // overshot by up to 2 ×), unless one write is larger than it
        const bigger = Buffer.allocUnsafe(Math.max(Math.min(buf.length * 2, this.maxBytes), this.len + n));
        bigger.set(buf.subarray(0, this.len), 0);
        this.recycle(buf);
        buf = this.buf = bigger;
      }
    }
    buf.set(b, this.len);
    this.len += n;
  }

  /** The stream is over: its first buffer goes back for another stream. */
  release(): void {
    const buf = this.buf;
    this.buf = undefined;
    this.len = 0;
    if (buf !== undefined) this.recycle(buf);
  }

  private recycle(buf: Buffer): void {
    if (buf.length === FIRST && buf.byteOffset === 0 && spare.length < SPARE_MAX) spare.push(buf);
  }

  /** Bytes held now (not counting what was folded into text). */
  get size(): number {
    return this.len;
  }

  /** The buffer's bytes: at most the larger of 16 KiB, `maxBytes` and the largest single write. */
  get capacity(): number {
    return this.buf?.length ?? 0;
  }

  /** Everything the client was sent, read. */
  read(): SoFar {
    const f = this.folded;
    // (the arrays copied too: reading must not change what was folded)
    const s: SoFar = f ? { ...f, tokenIds: f.tokenIds.slice(), finished: f.finished.slice() } : emptySoFar();
    if (this.buf !== undefined) readEvents(s, this.buf.subarray(0, this.len), this.chat);
    return s;
  }
}
