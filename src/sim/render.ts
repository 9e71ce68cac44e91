// Response rendering in vLLM's shapes: precomputed SSE chunk prefixes/suffixes and full bodies.
//
// The streaming fast path concatenates `prefix + tokenJson + suffix` per token; prefixes hold the
// request id, created time and model name, serialised once per request. Output is the same JSON
// vLLM sends (`choices[0].delta.content` for chat, `choices[0].text` for completions).
import { DEFAULTS } from '../defaults.js';
import type { Generated, TopLogprob } from './generator.js';

export interface RenderContext {
  kind: 'chat' | 'completion';
  id: string;
  created: number;
  model: string;
  promptTokens: number;
  /** -1: no logprobs. */
  topLogprobs: number;
  /** stream_options.continuous_usage_stats: every chunk carries running usage. */
  continuousUsage?: boolean;
}

const utf8 = (s: string): number[] => [...Buffer.from(s, 'utf8')];

export function chatLp(token: string, logprob: number, top: TopLogprob[]): object {
  return { token, logprob, bytes: utf8(token), top_logprobs: top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: utf8(t.token) })) };
}

export function complTop(token: string, logprob: number, top: TopLogprob[]): Record<string, number> {
  const d: Record<string, number> = {};
  for (const t of top) d[t.token] = t.logprob;
  d[token] = logprob;
  return d;
}

/** UTF-8 bytes of token JSON literals; the vocabulary is small, and the cache is bounded all the same. */
const JSON_BYTES = new Map<string, Buffer>();
function jsonBytes(json: string): Buffer {
  let b = JSON_BYTES.get(json);
  if (b === undefined) {
    b = Buffer.from(json);
    if (JSON_BYTES.size < DEFAULTS.sim.jsonCacheMax) JSON_BYTES.set(json, b);
  }
  return b;
}

export function usage(promptTokens: number, completionTokens: number): object {
  return { prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, completion_tokens: completionTokens, prompt_tokens_details: null };
}

export class Renderer {
  private readonly head: string;
  private readonly mid: string;
  private readonly tail: string;
  /** finish fields of every chunk but the last (completions also carry stop_reason). */
  private readonly unfinished: string;
  private offset = 0;
  private preBuf: Buffer | undefined;
  private sufBuf: Buffer | undefined;

  constructor(
    private readonly c: RenderContext,
    private readonly g: Generated,
  ) {
    const obj = c.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `data: {"id":"${c.id}","object":"${obj}","created":${c.created},"model":${JSON.stringify(c.model)},"choices":[{"index":0,`;
    this.mid = c.kind === 'chat' ? '"delta":{"content":' : '"text":';
    this.tail = c.kind === 'chat' ? '}' : '';
    this.unfinished = c.kind === 'chat' ? '"finish_reason":null' : '"finish_reason":null,"stop_reason":null';
  }

  /** finish fields of the last chunk. */
  private finished(): string {
    const g = this.g;
    return `"finish_reason":"${g.finish}","stop_reason":${g.stopReason === null ? 'null' : JSON.stringify(g.stopReason)}`;
  }

  /** The chat role chunk vLLM sends first (empty for completions). */
  first(): string {
    if (this.c.kind !== 'chat') return '';
    return `${this.head}"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${this.usageAt(0)}}\n\n`;
  }

  /** `,"usage":{…}` after `completion` tokens when continuous usage is on, else nothing. */
  private usageAt(completion: number): string {
    if (!this.c.continuousUsage) return '';
    const p = this.c.promptTokens;
    return `,"usage":{"prompt_tokens":${p},"total_tokens":${p + completion},"completion_tokens":${completion}}`;
  }

  /** SSE chunk of token i; the last token carries finish_reason (as vLLM does). */
  chunk(i: number): string {
    const g = this.g;
    const last = i === g.tokens.length - 1;
    let lp = 'null';
    if (g.logprobs && g.top) lp = JSON.stringify(this.tokenLogprobs(i));
    const fin = last ? this.finished() : this.unfinished;
    // the last chunk reports the full count (a stop string may have cut tokens after it)
    return `${this.head}${this.mid}${g.json[i] ?? '""'}${this.tail},"logprobs":${lp},${fin}}]${this.usageAt(last ? g.count : i + 1)}}\n\n`;
  }

  /**
   * The SSE bytes of tokens [from, to) with `before` and `after` around them, as one buffer.
   * Fast path (no logprobs): per token, a copy of the shared prefix, the token's cached JSON
   * bytes and the shared suffix — no per-token string building or JSON serialisation.
   */
  render(from: number, to: number, before: string, after: string): Buffer | string {
    const g = this.g;
    if (g.logprobs || this.c.continuousUsage) {
      let out = before;
      for (let i = from; i < to; i++) out += this.chunk(i);
      return out + after;
    }
    const n = g.tokens.length;
    const body = Math.min(to, n - 1); // the last token's chunk carries finish_reason: built as a string
    const pre = (this.preBuf ??= Buffer.from(this.head + this.mid));
    const suf = (this.sufBuf ??= Buffer.from(`${this.tail},"logprobs":null,${this.unfinished}}]}\n\n`));
    const toks: Buffer[] = [];
    let size = Buffer.byteLength(before) + Buffer.byteLength(after);
    for (let i = from; i < body; i++) {
      const b = jsonBytes(g.json[i] ?? '""');
      toks.push(b);
      size += pre.length + b.length + suf.length;
    }
    const last = to === n && n > 0 ? this.chunk(n - 1) : '';
    size += Buffer.byteLength(last);
    const buf = Buffer.allocUnsafe(size);
    let o = buf.write(before, 0);
    for (const b of toks) {
      o += pre.copy(buf, o);
      o += b.copy(buf, o);
      o += suf.copy(buf, o);
    }
    o += buf.write(last, o);
    buf.write(after, o);
    return buf;
  }

  /** Final chunk when no token was generated (EOS first): empty text with finish_reason. */
  emptyFinal(): string {
    return `${this.head}${this.mid}""${this.tail},"logprobs":null,${this.finished()}}]${this.usageAt(this.g.count)}}\n\n`;
  }

  /** Usage chunk (when stream_options.include_usage) and the terminator. */
  end(includeUsage: boolean): string {
    const obj = this.c.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const u = includeUsage
      ? `data: {"id":"${this.c.id}","object":"${obj}","created":${this.c.created},"model":${JSON.stringify(this.c.model)},"choices":[],"usage":${JSON.stringify(usage(this.c.promptTokens, this.g.count))}}\n\n`
      : '';
    return `${u}data: [DONE]\n\n`;
  }

  private tokenLogprobs(i: number): object {
    const g = this.g;
    const tok = g.tokens[i] ?? '';
    const lp = g.logprobs?.[i] ?? 0;
    const top = g.top?.[i] ?? [];
    if (this.c.kind === 'chat') return { content: [chatLp(tok, lp, top)] };
    const off = this.offset;
    this.offset += tok.length;
    return { text_offset: [off], token_logprobs: [lp], tokens: [tok], top_logprobs: [complTop(tok, lp, top)] };
  }

  /** The whole non-streaming response body. */
  full(): string {
    const c = this.c;
    const g = this.g;
    const text = g.tokens.join('');
    let logprobs: object | null = null;
    if (g.logprobs && g.top) {
      const lps = g.logprobs;
      const top = g.top;
      if (c.kind === 'chat') {
        logprobs = { content: g.tokens.map((t, i) => chatLp(t, lps[i] ?? 0, top[i] ?? [])) };
      } else {
        let off = 0;
        const offsets = g.tokens.map((t) => {
          const o = off;
          off += t.length;
          return o;
        });
        logprobs = {
          text_offset: offsets,
          token_logprobs: lps,
          tokens: g.tokens,
          top_logprobs: g.tokens.map((t, i) => complTop(t, lps[i] ?? 0, top[i] ?? [])),
        };
      }
    }
    return wholeBody(c, { text, logprobs, finish: g.finish, stopReason: g.stopReason, promptTokens: c.promptTokens, completionTokens: g.count });
  }
}

/** What a whole (not streamed) answer says, whichever engine made it. */
export interface WholeAnswer {
  text: string;
  logprobs: unknown;
  finish: string;
  stopReason: string | null;
  promptTokens: number;
  completionTokens: number;
}

/**
 * A whole answer's body as vLLM shapes it (chat or completion); `choiceExtra` and `extra` are what
 * an engine adds to the choice and to the body (the llama.cpp engine's token ids).
 */
export function wholeBody(
  c: { kind: 'chat' | 'completion'; id: string; created: number; model: string },
  a: WholeAnswer,
  choiceExtra: object = {},
  extra: object = {},
): string {
  const choice =
    c.kind === 'chat'
      ? {
          index: 0,
          message: { role: 'assistant', content: a.text, tool_calls: [] },
          logprobs: a.logprobs,
          finish_reason: a.finish,
          stop_reason: a.stopReason,
          ...choiceExtra,
        }
      : { index: 0, text: a.text, logprobs: a.logprobs, finish_reason: a.finish, stop_reason: a.stopReason, prompt_logprobs: null, ...choiceExtra };
  return JSON.stringify({
    id: c.id,
    object: c.kind === 'chat' ? 'chat.completion' : 'text_completion',
    created: c.created,
    model: c.model,
    choices: [choice],
    usage: usage(a.promptTokens, a.completionTokens),
    prompt_logprobs: c.kind === 'chat' ? null : undefined,
    ...extra,
  });
}
