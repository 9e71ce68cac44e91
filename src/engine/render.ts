// The engine's answers in vLLM's shapes, built as tokens come: one SSE chunk per token (text, logprobs, token ids), the finish chunk, usage, and the whole body.
import { chatLp, complTop, usage, wholeBody } from '../sim/render.js';
import type { TopLogprob } from '../sim/generator.js';

export interface TokenLogprob {
  token: string;
  logprob: number;
  top: TopLogprob[];
}

export interface AnswerContext {
  kind: 'chat' | 'completion';
  id: string;
  created: number;
  model: string;
  /** -1: no logprobs. */
  topLogprobs: number;
  returnTokenIds: boolean;
  promptIds: readonly number[];
  /** stream_options.continuous_usage_stats: every chunk carries the running usage (the gateway asks it of a resumed stream's continuation). */
  continuousUsage: boolean;
}

/** What generation ended with. */
export interface Finish {
  reason: 'stop' | 'length' | 'abort';
  /** The stop string that ended it (null: EOS, length, or none). */
  stopReason: string | null;
  completionTokens: number;
}

export class Answer {
  private readonly head: string;
  private offset = 0;
  private readonly texts: string[] = [];
  private readonly ids: number[] = [];
  private readonly lps: TokenLogprob[] = [];

  constructor(private readonly c: AnswerContext) {
    const obj = c.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `{"id":"${c.id}","object":"${obj}","created":${c.created},"model":${JSON.stringify(c.model)}`;
  }

  /** The chat role chunk vLLM sends first (for completions: nothing, or the prompt's ids when asked). */
  first(): string {
    // as vLLM: a completion's prompt ids are on its choice, a chat's on the response
    const pids = this.c.returnTokenIds ? `,"prompt_token_ids":${JSON.stringify(this.c.promptIds)}` : '';
    if (this.c.kind !== 'chat')
      return pids === '' ? '' : `data: ${this.head},"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null${pids}}]}\n\n`;
    return `data: ${this.head},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${pids}${this.usageAt(0)}}\n\n`;
  }

  /** One token's chunk: the text it released (possibly ''), its id, its logprobs when asked. Kept for the whole body too. */
  token(text: string, id: number, lp: TokenLogprob | undefined): string {
    this.texts.push(text);
    this.ids.push(id);
    if (lp !== undefined) this.lps.push(lp);
    return this.chunk(text, lp === undefined ? 'null' : JSON.stringify(this.logprobsOf([lp])), `[${id}]`, null, this.ids.length);
  }

  /** Text released at the end (held back for a stop string or a split character), then the finish chunk. */
  finish(tail: string, f: Finish): string {
    if (tail !== '') this.texts.push(tail);
    return this.chunk(tail, 'null', '[]', f, f.completionTokens);
  }

  /** `,"usage":{…}` after `completion` tokens when continuous usage is on (vLLM's field order), else nothing. */
  private usageAt(completion: number): string {
    if (!this.c.continuousUsage) return '';
    const p = this.c.promptIds.length;
    return `,"usage":{"prompt_tokens":${p},"total_tokens":${p + completion},"completion_tokens":${completion}}`;
  }

  /** The usage chunk (stream_options.include_usage) and the terminator. */
  end(includeUsage: boolean, completionTokens: number): string {
    const u = includeUsage ? `data: ${this.head},"choices":[],"usage":${JSON.stringify(usage(this.c.promptIds.length, completionTokens))}}\n\n` : '';
    return `${u}data: [DONE]\n\n`;
  }

  private chunk(text: string, logprobs: string, ids: string, f: Finish | null, completion: number): string {
    // as vLLM: completions' chunks all carry stop_reason, chat's only the last
    const fin = f !== null ? `"${f.reason}","stop_reason":${JSON.stringify(f.stopReason)}` : this.c.kind === 'chat' ? 'null' : 'null,"stop_reason":null';
    const tokenIds = this.c.returnTokenIds ? `,"token_ids":${ids}` : '';
    const body = this.c.kind === 'chat' ? `"delta":{"content":${JSON.stringify(text)}}` : `"text":${JSON.stringify(text)}`;
    return `data: ${this.head},"choices":[{"index":0,${body},"logprobs":${logprobs},"finish_reason":${fin}${tokenIds}}]${this.usageAt(completion)}}\n\n`;
  }

  private logprobsOf(lps: readonly TokenLogprob[]): object {
    if (this.c.kind === 'chat') return { content: lps.map((l) => chatLp(l.token, l.logprob, l.top)) };
    const offsets = lps.map((l) => {
      const o = this.offset;
      this.offset += l.token.length;
      return o;
    });
    return {
      text_offset: offsets,
      token_logprobs: lps.map((l) => l.logprob),
      tokens: lps.map((l) => l.token),
      top_logprobs: lps.map((l) => complTop(l.token, l.logprob, l.top)),
    };
  }

  /** The whole non-streaming body. */
  full(f: Finish): string {
    const c = this.c;
    const text = this.texts.join('');
    this.offset = 0;
    const logprobs = c.topLogprobs >= 0 ? this.logprobsOf(this.lps) : null;
    const ids = c.returnTokenIds ? { token_ids: this.ids } : {};
    // as vLLM: a completion's prompt ids are on its choice, a chat's on the response
    const promptIds = c.returnTokenIds ? { prompt_token_ids: c.promptIds } : {};
    return wholeBody(
      c,
      { text, logprobs, finish: f.reason, stopReason: f.stopReason, promptTokens: c.promptIds.length, completionTokens: f.completionTokens },
      c.kind === 'chat' ? ids : { ...ids, ...promptIds },
      c.kind === 'chat' ? promptIds : {},
    );
  }
}
