// Continuing a broken stream on another worker (migration by re-prefill): the request that asks a
// worker to go on from the text the client already has, and the rewriting of that worker's events
// into the client's one stream (same id, no repeated role, stop strings across the break, usage
// counted once).
import type { EngineTraits } from '../domain/spec.js';
import type { ParsedRequest } from './request.js';
import { isIds } from './resume-state.js';
import type { SoFar } from './resume-state.js';
import { EventCarry, lastEventEnd } from './sse-carry.js';
import { workerErrorText } from './sse.js';

/** What the continuation is asked, and what the client asked of the original. */
export interface ResumePlan {
  /** The continuation request's body. */
  body: Buffer;
  /** Completion tokens the client already has (counted once in the usage it gets). */
  sent: number;
}

/** Why a stream cannot be continued (the text of the error the client gets), or what to send. */
export type ResumeDecision = { plan: ResumePlan } | { refused: string } | { finished: 'length' };

type Body = Record<string, unknown>;

const GUIDED = ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'structured_outputs'] as const;

/**
 * The body that continues `req` from `so` on a worker of `engine`, or why it cannot be. The original
 * body is copied field by field: what the client asked (sampling, stop, logprobs, seed) stays. A
 * completion whose stream carried its token ids goes on from the prompt's and the generated ids
 * where the engine takes id prompts: the worker sees the very tokens it would have had, where
 * the text re-tokenised could split differently at the break (and count differently in usage).
 */
export function planResume(req: ParsedRequest, chat: boolean, so: SoFar, engine: Pick<EngineTraits, 'resume' | 'tokenIdPrompts'>): ResumeDecision {
  const b = req.body;
  const mode = engine.resume;
  if (mode === 'off' || (chat && mode === 'completions_only'))
    return { refused: `the version's engine does not continue ${chat ? 'chat ' : ''}streams (resume: ${mode})` };
  if (so.unsupported !== undefined) return { refused: `the stream carried ${so.unsupported}, which a continuation cannot take up` };
  if (so.unreadable > 0) return { refused: 'an event already sent could not be read back' };
  if (typeof b.n === 'number' && b.n > 1) return { refused: 'n > 1' };
  if (typeof b.best_of === 'number' && b.best_of > 1) return { refused: 'best_of > 1' };
  for (const g of GUIDED) if (b[g] !== undefined && b[g] !== null) return { refused: `guided decoding (${g})` };
  const rf = b.response_format as { type?: unknown } | null | undefined;
  if (rf && rf.type !== undefined && rf.type !== 'text') return { refused: `guided decoding (response_format ${JSON.stringify(rf.type)})` };
  // (chat too: vLLM's echo repeats the last message, which a continuation's is the partial answer)
  if (b.echo === true) return { refused: 'echo' };
  // the running count where text was last sent: tokens whose text the engine still held are generated again
  let sent = so.completionTokens >= 0 ? so.completionTokens : so.tokenEvents;
  const out: Body = { ...b };
  if (so.text === '') {
    // nothing generated reached the client yet (its role event at most): the request as it was
    sent = 0;
  } else if (chat) {
    const msgs = (b.messages as Body[]).slice();
    const last = msgs[msgs.length - 1] as Body;
    if (b.continue_final_message === true && last.role === 'assistant') {
      const content = appendContent(last.content, so.text);
      if (content === undefined) return { refused: 'a final assistant message whose content ends in a part that is not text' };
      msgs[msgs.length - 1] = { ...last, content };
    } else msgs.push({ role: 'assistant', content: so.text });
    out.messages = msgs;
    if (mode === 'continue_final_message') {
      out.continue_final_message = true;
      out.add_generation_prompt = false;
    }
  } else {
    const p = b.prompt;
    const one = typeof p === 'string' || (Array.isArray(p) && p.length === 1 && typeof p[0] === 'string') || isIdList(p);
    if (!one) return { refused: 'a prompt of several prompts' };
    const promptIds = isIdList(p) ? p : so.promptIds;
    // (an engine holds text back for stop strings, so that its ids run ahead of the text sent: not then)
    if (engine.tokenIdPrompts && promptIds !== undefined && !so.idsMissing && so.idsAtText > 0 && stopsOf(b).length === 0) {
      // the tokens whose text was sent, exactly: those held back at the break are generated again
      out.prompt = [...promptIds, ...so.tokenIds.slice(0, so.idsAtText)];
      sent = so.idsAtText;
    } else if (typeof p === 'string') out.prompt = p + so.text;
    else if (Array.isArray(p) && p.length === 1 && typeof p[0] === 'string') out.prompt = [p[0] + so.text];
    else
      return {
        refused: engine.tokenIdPrompts
          ? 'a prompt of token ids whose stream did not carry the generated ids (ask return_token_ids)'
          : "a prompt of token ids, which the version's engine does not take back (provider.token_id_prompts: false)",
      };
  }
  for (const key of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = b[key];
    if (typeof v !== 'number') continue;
    if (v - sent <= 0) return { finished: 'length' };
    out[key] = v - sent;
  }
  if (typeof b.min_tokens === 'number') out.min_tokens = Math.max(0, b.min_tokens - sent);
  // running usage on every event: the prompt's size is known from the first, whatever ends the stream
  out.stream = true;
  out.stream_options = { ...(b.stream_options as Body | undefined), include_usage: true, continuous_usage_stats: true };
  return { plan: { body: Buffer.from(JSON.stringify(out)), sent } };
}

/** A prompt of token ids (vLLM takes a completion's prompt so). */
const isIdList = (p: unknown): p is number[] => isIds(p) && p.length > 0;

/** A message's content with `text` added at its end (undefined: it cannot be, its last part not being text). */
function appendContent(content: unknown, text: string): unknown {
  if (!Array.isArray(content)) return (typeof content === 'string' ? content : '') + text;
  // the text goes on in the last part: an engine joins a message's text parts with a newline (vLLM
  // does), which a part of its own would put inside the answer; after a part that is not text, nowhere
  const parts = content.slice() as unknown[];
  const last = parts[parts.length - 1] as { type?: unknown; text?: unknown } | undefined;
  if (last === undefined) return [{ type: 'text', text }];
  if (typeof last !== 'object' || last === null || last.type !== 'text' || typeof last.text !== 'string') return undefined;
  parts[parts.length - 1] = { ...last, text: last.text + text };
  return parts;
}

/** The stop strings of a request (a string or a list; empty ones ignored). */
export function stopsOf(body: Body): string[] {
  const s = body.stop;
  const list = typeof s === 'string' ? [s] : Array.isArray(s) ? s.filter((x): x is string => typeof x === 'string') : [];
  return list.filter((x) => x !== '');
}

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
}

interface Event {
  error?: unknown;
  id?: unknown;
  object?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: unknown;
  usage?: Usage | null;
  prompt_token_ids?: unknown;
}

interface EventChoice {
  text?: unknown;
  prompt_token_ids?: unknown;
  token_ids?: unknown;
  delta?: Record<string, unknown> | null;
  finish_reason?: unknown;
  stop_reason?: unknown;
  logprobs?: unknown;
}

/** The lists of a completion's `logprobs`, one entry per token each. */
const COMPLETION_LOGPROB_LISTS = ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset'] as const;

/** A key that can only be the key itself in JSON text (a quote inside a string value is escaped). */
const CHOICES = '"choices":[';
const USAGE_KEY = ',"usage":{';
/** A running usage in vLLM's order, closing its event. */
const USAGE_TAIL = /^"prompt_tokens":(\d+),"total_tokens":(\d+),"completion_tokens":(\d+)\}\}$/;

/**
 * The continuing worker's stream, rewritten for the client: its events get the original `id`,
 * `object`, `created` and `model`; chat's opening role event is dropped (the client had it); a stop
 * string that starts in the text already sent and ends in the continuation ends the stream there
 * (the continuing worker cannot see it); usage counts the original prompt and every completion
 * token once, and is only sent where the client asked for it.
 */
export class Continuation {
  /** An incomplete event's bytes, held to the next read (whole events hold whole UTF-8 characters). */
  private readonly carry = new EventCarry();
  /** The end of the text already sent, as long as a stop string could reach back into it. */
  private seam: string;
  /** Continuation text still to check against the seam (the longest stop less one). */
  private seamLeft: number;
  private readonly stopLen: number;
  private readonly includeUsage: boolean;
  private readonly continuousUsage: boolean;
  /** `include_stop_str_in_output`: a stop string found across the break is sent too. */
  private readonly includeStop: boolean;
  /** The client's counts, rewritten (-1 until the continuing worker reports its own). */
  promptTokens = -1;
  completionTokens = -1;
  /** Prompt tokens the continuing worker prefilled (its own prompt count). */
  prefilled = -1;
  /** `[DONE]` went out (or the gateway ended the stream on a stop string across the break). */
  done = false;
  /** The stream was ended here on a stop string: the worker is still generating and must be stopped. */
  cut = false;
  /** The first malformed event, if any. */
  malformed: string | undefined;
  /** The message of the continuing worker's own error event, if one came. */
  workerError: string | undefined;
  /** The worker's data events read (the request's deadlines count from the last). */
  events = 0;
  /**
   * Ids the client already has of tokens whose text the broken worker still held (half a character;
   * with stop strings, more): the continuing worker generates them again, and their ids are not sent twice.
   */
  private skipIds: number;
  /** As `skipIds`, of the log-probability entries the client already has of those tokens. */
  private skipLogprobs: number;
  /**
   * Completions with logprobs: what a continuation's `text_offset`s are moved by. The continuing
   * worker counts them from its own generated text, which starts at the break; the client's count
   * from the first generated character (vLLM counts Python characters: code points).
   */
  private readonly offsetShift: number;
  /** The continuing worker's prompt ids are not the client's (it has its own, or its prompt now holds the text sent). */
  private readonly dropPromptIds: boolean;
  /** The worker's event head (`data: {"id":…,"model":…,`) and the client's, once an event rewritten in full showed both (fastEvent). */
  private fast: { from: string; to: string } | undefined;

  constructor(
    private readonly so: SoFar,
    private readonly chat: boolean,
    private readonly sent: number,
    body: Body,
    private readonly stops: readonly string[] = stopsOf(body),
  ) {
    let len = 0;
    for (const s of this.stops) if (s.length > len) len = s.length;
    this.stopLen = len;
    this.seam = len > 1 ? so.text.slice(-(len - 1)) : '';
    this.seamLeft = this.seam === '' ? 0 : len - 1;
    this.skipIds = so.tokenIds.length - so.idsAtText;
    this.skipLogprobs = so.logprobs - so.logprobsAtText;
    this.offsetShift = !chat && body.logprobs !== undefined && body.logprobs !== null ? [...so.text].length : 0;
    // a stream broken before anything was sent is asked again as it was: its prompt ids are the client's
    this.dropPromptIds = so.promptIds !== undefined || so.text !== '';
    const opts = body.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | null | undefined;
    this.includeUsage = opts?.include_usage === true;
    this.continuousUsage = opts?.continuous_usage_stats === true;
    this.includeStop = body.include_stop_str_in_output === true;
  }

  /**
   * Rewrite a piece of the continuing worker's stream: its whole events for the client ('' when none);
   * after a bad event (`malformed`, `workerError` set: the stream broke), those before it.
   */
  feed(chunk: Buffer): string {
    if (this.done) return '';
    let b = chunk;
    if (this.carry.held) {
      // only the new bytes are searched for the event's end: a worker that trickles an event costs linear time
      const joined = this.carry.join(chunk);
      if (joined === 'held') return '';
      if (joined === 'too_long') return this.tooLong();
      b = joined;
    }
    const last = lastEventEnd(b);
    let out = '';
    if (last > 0) {
      let text = b.toString('utf8', 0, last);
      if (text.indexOf('\r') !== -1) text = text.replace(/\r\n?/g, '\n');
      let pos = 0;
      while (!this.done) {
        const end = text.indexOf('\n\n', pos);
        if (end === -1) break;
        const ev = this.event(text.slice(pos, end));
        if (ev === undefined) return out;
        out += ev;
        pos = end + 2;
      }
    }
    // (what the text left after its last event is blank lines at most)
    if (!this.done && last < b.length && !this.carry.hold(b.subarray(last), b === chunk)) this.tooLong();
    return out;
  }

  private tooLong(): '' {
    this.malformed = 'an SSE event longer than 1 MiB';
    return '';
  }

  /** One event's lines → what the client gets of it. */
  private event(raw: string): string | undefined {
    const quick = this.fastEvent(raw);
    if (quick !== undefined) {
      this.events++;
      return quick;
    }
    let data: string | undefined;
    for (const line of raw.split('\n')) {
      if (line === '' || line.charCodeAt(0) === 58 /* : */) continue;
      if (line.startsWith('data:')) {
        const v = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
        data = data === undefined ? v : `${data}\n${v}`;
      } else if (!line.startsWith('event:') && !line.startsWith('id:') && !line.startsWith('retry:')) {
        this.malformed = `unexpected SSE line ${JSON.stringify(line.slice(0, 40))}`;
        return undefined;
      }
    }
    if (data === undefined) return '';
    this.events++;
    if (data === '[DONE]') {
      this.done = true;
      return 'data: [DONE]\n\n';
    }
    let e: Event;
    try {
      e = JSON.parse(data) as Event;
    } catch {
      this.malformed = `SSE data is not JSON: ${JSON.stringify(data.slice(0, 40))}`;
      return undefined;
    }
    if (typeof e !== 'object' || e === null || Array.isArray(e)) {
      this.malformed = `SSE data is not a JSON object: ${JSON.stringify(data.slice(0, 40))}`;
      return undefined;
    }
    if (e.error !== undefined && e.error !== null) {
      // the worker's own error (an exception mid-stream), which it ends with [DONE]: a break, not an end
      this.workerError = workerErrorText(e.error);
      return undefined;
    }
    const choices = Array.isArray(e.choices) ? (e.choices as EventChoice[]) : [];
    if (choices.length === 0 && (e.usage === undefined || e.usage === null)) {
      // the closing event of a continuation (asked for usage) carries it: this one would end the text unannounced
      this.malformed = `an event with neither choices nor usage: ${JSON.stringify(data.slice(0, 40))}`;
      return undefined;
    }
    this.identify(e);
    if (this.dropPromptIds) delete e.prompt_token_ids;
    const usage = this.countUsage(e.usage);
    if (choices.length === 0) {
      // the usage-only event closes the stream: the client gets it if it asked
      return usage !== undefined && this.includeUsage ? `data: ${JSON.stringify({ ...e, usage })}\n\n` : '';
    }
    if (usage !== undefined && this.continuousUsage) e.usage = usage;
    else delete e.usage;
    const c = choices[0] as EventChoice;
    // (a choice that is no object would throw below, out of the socket's data handler)
    if (typeof c !== 'object' || c === null) {
      this.malformed = `SSE choice is not a JSON object: ${JSON.stringify(data.slice(0, 40))}`;
      return undefined;
    }
    if (this.skipIds > 0 && Array.isArray(c.token_ids)) {
      const n = Math.min(this.skipIds, c.token_ids.length);
      c.token_ids = c.token_ids.slice(n);
      this.skipIds -= n;
    }
    if ((this.skipLogprobs > 0 || this.offsetShift > 0) && typeof c.logprobs === 'object' && c.logprobs !== null) this.placeLogprobs(c.logprobs as Body);
    let piece: string | undefined;
    if (this.chat) {
      const d = c.delta;
      if (d && typeof d === 'object') {
        if ('role' in d && this.so.role) {
          delete d.role;
          // the opening event (role, empty content): the client had its own
          if ((d.content === '' || d.content === undefined) && Object.keys(d).length <= 1 && c.finish_reason == null && c.logprobs == null) return '';
        }
        // (a client that never got the opening event, the worker having broken before it, gets this one)
        if ('role' in d) this.so.role = true;
        if (typeof d.content === 'string') piece = d.content;
      }
    } else {
      if ('prompt_token_ids' in c && this.dropPromptIds) {
        delete c.prompt_token_ids;
        // the event that only carried them (as the first of a completion's with return_token_ids): nothing left for the client
        const ids = c.token_ids;
        if (c.text === '' && c.finish_reason == null && c.logprobs == null && (ids === undefined || (Array.isArray(ids) && ids.length === 0))) return '';
      }
      if (typeof c.text === 'string') piece = c.text;
    }
    if (piece !== undefined && this.seamLeft > 0) {
      const at = this.stopAcross(piece);
      // the text ends before the stop string (it started in the text sent), or with it when the client asked to get it
      if (at !== undefined) return this.endOnStop(e, c, this.includeStop ? piece.slice(0, at.end) : '', at.stop);
    }
    const out = `data: ${JSON.stringify(e)}\n\n`;
    if (this.fast === undefined) this.learnHead(raw, out);
    return out;
  }

  /**
   * The common event rewritten on its text, without parsing it: the worker's head, its choices, and
   * its running usage last (`…"choices":[…],"usage":{…}}`), where the full rewrite would leave the
   * choices as they are — no role, no prompt ids, no ids to skip, no stop string to find across the
   * break. The head becomes the client's, the usage is counted and rewritten as countUsage does (or
   * dropped). As SseMeter's fast path, it checks the event's shape, not every byte of its JSON;
   * anything else is rewritten in full. Parsing and serialising every event of a continued stream
   * was ~8× a plain stream's metering.
   */
  private fastEvent(raw: string): string | undefined {
    const f = this.fast;
    if (f === undefined || this.seamLeft > 0 || this.skipIds > 0 || this.skipLogprobs > 0 || this.offsetShift > 0) return undefined;
    return this.onText(raw, f);
  }

  /** fastEvent's rewrite of `raw` with the heads `f`, whatever the state (undefined: not of the common shape). */
  private onText(raw: string, f: { from: string; to: string }): string | undefined {
    const at = f.from.length;
    // the first choice an object: an empty array is the closing usage event, anything else is the full rewrite's to judge
    if (!raw.startsWith(f.from) || !raw.startsWith(CHOICES, at) || raw.charCodeAt(at + CHOICES.length) !== 123 /* { */) return undefined;
    const u = raw.lastIndexOf(USAGE_KEY);
    if (u <= at || raw.charCodeAt(u - 1) !== 93 /* ] */) return undefined;
    const m = USAGE_TAIL.exec(raw.slice(u + USAGE_KEY.length));
    if (m === null) return undefined;
    const choices = raw.slice(at, u);
    // (a second "choices" key: the first was a field's of the head, or the last one counts; either may be empty)
    if (
      choices.indexOf('\n') !== -1 ||
      choices.indexOf('"role"') !== -1 ||
      choices.indexOf('"prompt_token_ids"') !== -1 ||
      choices.indexOf(CHOICES, CHOICES.length) !== -1
    )
      return undefined;
    const usage = this.countUsage({ prompt_tokens: Number(m[1]), total_tokens: Number(m[2]), completion_tokens: Number(m[3]) });
    return `${f.to}${choices}${usage !== undefined && this.continuousUsage ? `${USAGE_KEY.slice(0, -1)}${JSON.stringify(usage)}}` : '}'}\n\n`;
  }

  /** The heads of an event rewritten in full, as the worker sent it and as the client got it (only the identity fields before its choices). */
  private learnHead(raw: string, out: string): void {
    if (raw.indexOf('\n') !== -1) return;
    const i = raw.indexOf(CHOICES);
    const j = out.indexOf(CHOICES);
    if (i <= 0 || j <= 0) return;
    const from = raw.slice(0, i);
    if (from.indexOf('"prompt_token_ids"') !== -1 || from.indexOf('"usage"') !== -1) return;
    const f = { from, to: out.slice(0, j) };
    // only heads whose rewrite on the text gives this very event: an identity field the worker sends after its choices, or not at all, is the full rewrite's to place
    // (onText counts this event's usage again: the same counts)
    if (this.onText(raw, f) === out) this.fast = f;
  }

  /**
   * A continuation event's log-probabilities as the client's stream has them: the entries of tokens
   * it already has dropped (chat: `content`; completions: each list), completions' `text_offset`s
   * counted from the first character generated.
   */
  private placeLogprobs(lp: Body): void {
    if (this.chat) {
      if (this.skipLogprobs > 0 && Array.isArray(lp.content)) {
        const n = Math.min(this.skipLogprobs, lp.content.length);
        lp.content = lp.content.slice(n);
        this.skipLogprobs -= n;
      }
      return;
    }
    if (this.skipLogprobs > 0 && Array.isArray(lp.tokens)) {
      const n = Math.min(this.skipLogprobs, lp.tokens.length);
      for (const k of COMPLETION_LOGPROB_LISTS) if (Array.isArray(lp[k])) lp[k] = (lp[k] as unknown[]).slice(n);
      this.skipLogprobs -= n;
    }
    const shift = this.offsetShift;
    if (shift > 0 && Array.isArray(lp.text_offset)) lp.text_offset = lp.text_offset.map((x: unknown) => (typeof x === 'number' ? x + shift : x));
  }

  /** The original stream's identity on a continuation event. */
  private identify(e: Event): void {
    const so = this.so;
    if (so.id !== undefined) e.id = so.id;
    if (so.object !== undefined) e.object = so.object;
    if (so.created !== undefined) e.created = so.created;
    if (so.model !== undefined) e.model = so.model;
  }

  /** The client's usage from the continuing worker's: its prompt held the text already sent. */
  private countUsage(u: Usage | null | undefined): Usage | undefined {
    if (u === undefined || u === null || typeof u.prompt_tokens !== 'number' || typeof u.completion_tokens !== 'number') return undefined;
    this.prefilled = u.prompt_tokens;
    this.promptTokens = Math.max(0, u.prompt_tokens - this.sent);
    this.completionTokens = this.sent + u.completion_tokens;
    return { ...u, prompt_tokens: this.promptTokens, completion_tokens: this.completionTokens, total_tokens: this.promptTokens + this.completionTokens };
  }

  /** A stop string that starts in the text already sent and ends in `piece` (the earliest), and where in `piece` it ends. */
  private stopAcross(piece: string): { index: number; stop: string; end: number } | undefined {
    const window = this.seam + piece;
    let best: { index: number; stop: string; end: number } | undefined;
    for (const stop of this.stops) {
      const i = window.indexOf(stop);
      if (i !== -1 && i < this.seam.length && (best === undefined || i < best.index)) best = { index: i, stop, end: i + stop.length - this.seam.length };
    }
    // what is past the seam is the continuing worker's to check
    this.seam = window.slice(-(this.stopLen - 1));
    this.seamLeft -= piece.length;
    return best;
  }

  /** End the stream at a stop string found across the break: this event, cut, finishes it; then usage if asked, and [DONE]. */
  private endOnStop(e: Event, c: EventChoice, keep: string, stop: string): string {
    if (this.chat) (c.delta as Record<string, unknown>).content = keep;
    else c.text = keep;
    c.finish_reason = 'stop';
    if ('stop_reason' in c) c.stop_reason = stop;
    e.choices = [c];
    this.done = true;
    this.cut = true;
    let out = `data: ${JSON.stringify(e)}\n\n`;
    if (this.includeUsage && this.promptTokens >= 0) {
      const usage = { prompt_tokens: this.promptTokens, completion_tokens: this.completionTokens, total_tokens: this.promptTokens + this.completionTokens };
      out += `data: ${JSON.stringify({ id: e.id, object: e.object, created: e.created, model: e.model, choices: [], usage })}\n\n`;
    }
    return `${out}data: [DONE]\n\n`;
  }
}

/** The end of a stream whose token budget ran out exactly at the break: the finishing event, and [DONE]. */
export function finishedEvents(so: SoFar, chat: boolean): string {
  const head = { id: so.id, object: so.object, created: so.created, model: so.model };
  const choice = chat ? { index: 0, delta: {}, logprobs: null, finish_reason: 'length' } : { index: 0, text: '', logprobs: null, finish_reason: 'length' };
  return `data: ${JSON.stringify({ ...head, choices: [choice] })}\n\ndata: [DONE]\n\n`;
}
