// Measuring an SSE stream as it passes through: token events, timing, [DONE], usage, a worker's error event; one parse at most per event.
import { CATALOGUE, errorTypeOf } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { EventCarry } from './sse-carry.js';

/** Looks at each chunk once, never changes it; the bytes are forwarded exactly as the worker sent them. */
export class SseMeter {
  /** Bytes of an incomplete event carried to the next chunk. */
  private readonly carry = new EventCarry();
  /** Events that carried generated text. */
  tokenEvents = 0;
  firstAt = NaN;
  lastAt = NaN;
  readonly itl: number[] = [];
  done = false;
  usagePrompt = -1;
  usageCompletion = -1;
  /** Description of the first malformed event, if any. */
  malformed: string | undefined;
  /** The message of the worker's own error event (`data: {"error":…}`: an exception mid-stream), if one came. */
  workerError: string | undefined;
  /** Data events read (comments and partial events are not): the stream's deadlines count from the last. */
  events = 0;
  /** StreamSource: a worker's own stream is never cut short by the gateway. */
  readonly cut = false;
  /**
   * The whole events of the last `feed` (with an earlier chunk's incomplete event that they
   * finish): what may go to the client, so a stream that breaks never leaves it half an event (or
   * half a UTF-8 character). Up to a malformed event when there is one. Borrowed like the chunk
   * when it is (part of) the chunk itself.
   */
  out: Buffer = EMPTY;
  /** The JSON key that carries generated text for this endpoint (chat: content, completions: text). */
  private readonly key: string;
  /** Chat (the key is `content`), else completions (`text`): which byte comparison the fast path makes. */
  private readonly chat: boolean;

  constructor(endpoint: 'chat' | 'completions' = 'chat') {
    this.chat = endpoint === 'chat';
    this.key = this.chat ? CHAT_KEY : TEXT_KEY;
    this.keyOffset = this.chat ? chatOffsetHint : textOffsetHint;
  }

  /** Forget an incomplete event held from the last chunk (its worker broke; a continuation's events follow). */
  dropCarry(): void {
    this.carry.clear();
  }

  /** A meter for a request path (`…/chat/completions` or `…/completions`). */
  static forPath(path: string): SseMeter {
    return new SseMeter(path.endsWith('/chat/completions') ? 'chat' : 'completions');
  }

  /** ms from `startedAt` to the first token; NaN when none came. */
  ttft(startedAt: number): number {
    return this.firstAt === this.firstAt ? this.firstAt - startedAt : NaN;
  }

  /** Mean ms between tokens after the first; NaN with fewer than two. */
  tpot(): number {
    return this.tokenEvents > 1 ? (this.lastAt - this.firstAt) / (this.tokenEvents - 1) : NaN;
  }

  /** Prompt tokens from the usage event (0 when the worker sent none). */
  promptTokens(): number {
    return this.usagePrompt >= 0 ? this.usagePrompt : 0;
  }

  /** Completion tokens: the usage event's count, else the token events seen. */
  completionTokens(): number {
    return this.usageCompletion >= 0 ? this.usageCompletion : this.tokenEvents;
  }

  /**
   * Feed one chunk. Returns false when the chunk holds a malformed event (the caller stops
   * forwarding). The chunk may be borrowed (the upstream pool's read buffer): nothing of it is kept
   * past the call except a copy of an incomplete last event.
   */
  feed(chunk: Buffer, now: number): boolean {
    let b = chunk;
    if (this.carry.held) {
      // only the new bytes are searched for the event's end: a worker that trickles an event costs linear time
      const joined = this.carry.join(chunk);
      if (joined === 'held' || joined === 'too_long') {
        this.out = EMPTY;
        return joined === 'held' || this.tooLong();
      }
      b = joined;
    }
    // CRLF or CR line endings (allowed by the SSE spec): measured as text with LF only, forwarded as
    // sent. A CRLF cut between two chunks becomes an extra blank line, which `event` skips.
    if (b.indexOf(13) !== -1) return this.feedCr(b, b === chunk, now);
    this.out = b;
    const n = b.length;
    const chat = this.chat;
    const kl = this.key.length;
    let pos = 0;
    while (pos < n) {
      // a blank line ends an event
      let end = b.indexOf(10, pos);
      const line = end;
      while (end !== -1 && b[end + 1] !== 10) end = b.indexOf(10, end + 1);
      if (end === -1) {
        this.out = b.subarray(0, pos);
        return this.keep(b.subarray(pos), b === chunk);
      }
      // the common event, checked on the bytes: `data: {…}]}` on one line with a non-empty text
      // value where the last token event had its key — a token, and no usage or error can follow its
      // choices array (see event). Anything else is read as text, and parsed, by event().
      const off = this.keyOffset;
      const g = pos + 6 + off;
      if (
        off > 0 &&
        line === end &&
        g + kl < end &&
        b[end - 1] === 125 /* } */ &&
        b[end - 2] === 93 /* ] */ &&
        b[pos + 6] === 123 /* { */ &&
        b[g - 1] === 34 &&
        b[g + kl] !== 34 &&
        isDataField(b, pos) &&
        (chat ? isChatKey(b, g) : isTextKey(b, g))
      ) {
        this.events++;
        this.token(now);
      } else if (end - pos === 12 && b[pos + 6] === 91 /* [ */ && isDataField(b, pos) && isDone(b, pos + 7)) {
        this.events++;
        this.done = true;
      } else {
        const s = b.toString('latin1', pos, end);
        this.keyPos = -2;
        if (!this.event(s, 0, s.length, now)) {
          this.out = b.subarray(0, pos);
          return false;
        }
      }
      pos = end + 2;
    }
    return true;
  }

  /**
   * Bytes with CR line endings: read as LF-only text; what is forwarded (`out`) and carried are the
   * raw bytes, found by walking back from the end over as many characters as the text left unread.
   */
  private feedCr(b: Buffer, borrowed: boolean, now: number): boolean {
    const s = b.toString('latin1').replace(/\r\n?/g, '\n');
    const read = this.feedText(s, now);
    let left = s.length - read.pos;
    let i = b.length;
    while (left > 0) {
      i -= i > 1 && b[i - 1] === 10 && b[i - 2] === 13 ? 2 : 1;
      left--;
    }
    this.out = b.subarray(0, i);
    if (!read.ok) return false;
    if (i === b.length) return true;
    return this.keep(b.subarray(i), borrowed);
  }

  /** The text path (decoded as latin1: structure is ASCII and JSON stays parseable byte for byte): how far it read whole events, and whether they were well formed. */
  private feedText(s: string, now: number): { ok: boolean; pos: number } {
    this.keyPos = -2;
    let pos = 0;
    const n = s.length;
    while (pos < n) {
      let end = s.indexOf('\n', pos);
      while (end !== -1 && s.charCodeAt(end + 1) !== 10) end = s.indexOf('\n', end + 1);
      if (end === -1) return { ok: true, pos };
      if (!this.event(s, pos, end, now)) return { ok: false, pos };
      pos = end + 2;
    }
    return { ok: true, pos: n };
  }

  /** Keep the incomplete last event for the next chunk (copied when `borrowed`: a piece of the chunk; a concatenation is ours already). */
  private keep(tail: Buffer, borrowed: boolean): boolean {
    return this.carry.hold(tail, borrowed) || this.tooLong();
  }

  private tooLong(): false {
    this.malformed = 'an SSE event longer than 1 MiB';
    return false;
  }

  /**
   * Next position of the text key at or after `from` in the chunk being fed (-1: none left). Each
   * search resumes where the last one found its match, so a chunk of events without the key costs
   * one scan, not one scan per event (no per-event substrings either).
   */
  private keyPos = -2;
  /**
   * Where the text key sat in the last token event, counted from its `{`: the fields before it (id,
   * object, created, model, index) keep their length through a stream, so feed checks the next
   * event there first — a comparison of a dozen bytes instead of a scan (a scan for `text":"` stops at every `t`).
   * A new meter starts from the offset the last meter of its endpoint learnt (a worker's streams
   * share it): a wrong guess only means the text path, where the offset is learnt again.
   */
  private keyOffset: number;

  private keyAt(s: string, from: number): number {
    if (this.keyPos === -2 || (this.keyPos !== -1 && this.keyPos < from)) {
      let k = s.indexOf(this.key, from);
      // `"text":"`, not `"context_text":"`
      while (k !== -1 && s.charCodeAt(k - 1) !== 34) k = s.indexOf(this.key, k + 1);
      this.keyPos = k;
    }
    return this.keyPos;
  }

  /** One event off the byte path, as text (latin1: its structure is ASCII, and its JSON parses byte for byte). */
  private event(s: string, pos: number, end: number, now: number): boolean {
    // extra blank lines between events are allowed
    while (pos < end && s.charCodeAt(pos) === 10) pos++;
    if (pos === end) return true;
    const nl = s.indexOf('\n', pos);
    if (nl !== -1 && nl < end) return this.lines(s.slice(pos, end), now);
    if (!s.startsWith('data:', pos)) return this.otherField(s, pos, end);
    this.events++;
    // the space after `data:` is optional in SSE
    const body = s.charCodeAt(pos + 5) === 32 ? pos + 6 : pos + 5;
    if (s.charCodeAt(body) === 91 /* [ */ && s.startsWith('[DONE]', body)) {
      this.done = true;
      return true;
    }
    return this.data(s, body, end, now, true);
  }

  /** An event of several lines (SSE allows them; no engine sends them): its data lines joined, every other line a comment or a known field. */
  private lines(ev: string, now: number): boolean {
    let data: string | undefined;
    for (const line of ev.split('\n')) {
      if (line.startsWith('data:')) {
        const v = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
        data = data === undefined ? v : `${data}\n${v}`;
      } else if (line !== '' && !this.otherField(line, 0, line.length)) return false;
    }
    if (data === undefined) return true;
    this.events++;
    if (data === '[DONE]') {
      this.done = true;
      return true;
    }
    // (the key's position is in another string: searched afresh, and not learnt for the byte path)
    this.keyPos = -2;
    const ok = this.data(data, 0, data.length, now, false);
    this.keyPos = -2;
    return ok;
  }

  /** A line that is no data: a comment or another field (`event:`, `id:`, `retry:`), else malformed. */
  private otherField(s: string, pos: number, end: number): boolean {
    if (s.charCodeAt(pos) === 58 /* : */ || s.startsWith('event:', pos) || s.startsWith('id:', pos) || s.startsWith('retry:', pos)) return true;
    this.malformed = `unexpected SSE line ${JSON.stringify(s.slice(pos, Math.min(end, pos + 40)))}`;
    return false;
  }

  /**
   * A data field's value `s[body, end)`, parsed: what is not a JSON object is malformed (garbage shaped
   * like `{…}` too, which would otherwise reach the client and make its stream unresumable); an
   * object with a top-level `error` is the worker's own error (vLLM and SGLang send one, then
   * [DONE], when an exception hits mid-stream), a break and not an end. `learn`: the value is the
   * event's one line, where the byte path may look for the key next time.
   */
  private data(s: string, body: number, end: number, now: number, learn: boolean): boolean {
    if (s.charCodeAt(body) !== 123 /* { */ || s.charCodeAt(end - 1) !== 125 /* } */) {
      this.malformed = `SSE data is not a JSON object: ${JSON.stringify(s.slice(body, Math.min(end, body + 40)))}`;
      return false;
    }
    let e: DataObject;
    try {
      e = JSON.parse(s.slice(body, end)) as DataObject;
    } catch {
      this.malformed = `SSE data is not valid JSON: ${JSON.stringify(s.slice(body, Math.min(end, body + 40)))}`;
      return false;
    }
    if (e.error !== undefined && e.error !== null) {
      // read again as UTF-8 for its message (the text here is latin1)
      this.workerError = workerErrorText((JSON.parse(Buffer.from(s.slice(body, end), 'latin1').toString('utf8')) as DataObject).error);
      return false;
    }
    const u = e.usage;
    if (typeof u === 'object' && u !== null) {
      this.usagePrompt = typeof u.prompt_tokens === 'number' ? u.prompt_tokens : -1;
      this.usageCompletion = typeof u.completion_tokens === 'number' ? u.completion_tokens : -1;
    }
    const k = this.keyAt(s, body);
    if (k === -1 || k >= end || s.charCodeAt(k + this.key.length) === 34) return true;
    if (learn) {
      this.keyOffset = k - body;
      if (this.chat) chatOffsetHint = this.keyOffset;
      else textOffsetHint = this.keyOffset;
    }
    this.token(now);
    return true;
  }

  private token(now: number): void {
    this.tokenEvents++;
    if (this.firstAt !== this.firstAt) this.firstAt = now;
    else this.itl.push(now - this.lastAt);
    this.lastAt = now;
  }
}

// The fast path's byte comparisons, spelled out: ~2.5x faster than a loop over a literal's bytes
// (8 ns an event less, measured on a 64-token stream), and small enough for V8 to inline.
// String#startsWith with a position costs ~15 ns a call.

/** `data: ` at `p`. */
function isDataField(b: Buffer, p: number): boolean {
  return b[p] === 100 && b[p + 1] === 97 && b[p + 2] === 116 && b[p + 3] === 97 && b[p + 4] === 58 && b[p + 5] === 32;
}

/** CHAT_KEY (`content":"`) at `g`. */
function isChatKey(b: Buffer, g: number): boolean {
  return (
    b[g] === 99 &&
    b[g + 1] === 111 &&
    b[g + 2] === 110 &&
    b[g + 3] === 116 &&
    b[g + 4] === 101 &&
    b[g + 5] === 110 &&
    b[g + 6] === 116 &&
    b[g + 7] === 34 &&
    b[g + 8] === 58 &&
    b[g + 9] === 34
  );
}

/** `DONE]` at `p` (after `data: [`). */
function isDone(b: Buffer, p: number): boolean {
  return b[p] === 68 && b[p + 1] === 79 && b[p + 2] === 78 && b[p + 3] === 69 && b[p + 4] === 93;
}

/** TEXT_KEY (`text":"`) at `g`. */
function isTextKey(b: Buffer, g: number): boolean {
  return b[g] === 116 && b[g + 1] === 101 && b[g + 2] === 120 && b[g + 3] === 116 && b[g + 4] === 34 && b[g + 5] === 58 && b[g + 6] === 34;
}

// without the opening quote: V8 searches a pattern that starts with a rare letter several times
// faster than one that starts with `"`, the commonest byte of JSON (checked in keyAt)
const CHAT_KEY = 'content":"';
const TEXT_KEY = 'text":"';
/** Where the last learnt text key sat, per endpoint (see SseMeter.keyOffset); -1: none yet. */
let chatOffsetHint = -1;
let textOffsetHint = -1;

const EMPTY = Buffer.alloc(0);

/** A data event's fields the meter reads (it is parsed only off the byte path). */
interface DataObject {
  error?: unknown;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
}

/** The longest part of a worker's error message passed on (in the client's error event and the logs). */
const MAX_ERROR_TEXT = 300;

/** What a worker's error event says: its `message` (with its `code`, if any), else the error as JSON; at most MAX_ERROR_TEXT characters. */
export function workerErrorText(err: unknown): string {
  let t: string;
  const o = err as { message?: unknown; code?: unknown } | null;
  if (typeof err === 'string') t = err;
  else if (typeof o === 'object' && o !== null && typeof o.message === 'string')
    t = o.code === undefined || o.code === null ? o.message : `${o.message} (code ${JSON.stringify(o.code)})`;
  else t = JSON.stringify(err);
  return t.length > MAX_ERROR_TEXT ? `${t.slice(0, MAX_ERROR_TEXT)}…` : t;
}

/** The SSE error event a client gets when its stream breaks after it started, followed by [DONE]. */
export function sseErrorEvent(message: string, code: ErrorCode): string {
  return `data: ${JSON.stringify({ error: { message, type: errorTypeOf(CATALOGUE[code][0]), code } })}\n\ndata: [DONE]\n\n`;
}
