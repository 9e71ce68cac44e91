// LLM-as-judge: score sampled responses (pointwise) or compare a stable answer with its shadow
// candidate answer (pairwise, both orders to cancel position bias) with any OpenAI-compatible judge.
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
import type { ParsedRequest } from '../gateway/request.js';
import type { TappedResponse } from '../gateway/tap.js';

export interface JudgeEndpoint {
  /** Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:9000 (…/v1/chat/completions is appended). */
  url: string;
  model: string;
  apiKey?: string | undefined;
  timeoutMs: number;
}

/** The rubric sent with every pointwise request; the response is wrapped in <response> tags. */
export const POINTWISE_RUBRIC =
  'You are a strict evaluator. Rate the factual accuracy and helpfulness of the response to the prompt on a 1-10 scale. ' +
  'Reply with JSON only: {"score": <number 1-10>}.';
export const PAIRWISE_RUBRIC =
  'You are a strict evaluator. Compare the two responses to the prompt for factual accuracy and helpfulness. ' +
  'Reply with JSON only: {"winner": "A" | "B" | "tie"}.';

/** The generated text of a response body (JSON or SSE), as the client saw it. */
export function responseText(body: string, stream: boolean): string {
  if (!stream) {
    try {
      const j = JSON.parse(body) as { choices?: { message?: { content?: string | null }; text?: string }[] };
      const c = j.choices?.[0];
      return c?.message?.content ?? c?.text ?? '';
    } catch {
      return '';
    }
  }
  let out = '';
  for (const ev of body.split('\n\n')) {
    if (!ev.startsWith('data: {')) continue;
    try {
      const j = JSON.parse(ev.slice(6)) as { choices?: { delta?: { content?: string | null }; text?: string }[] };
      const c = j.choices?.[0];
      out += c?.delta?.content ?? c?.text ?? '';
    } catch {
      // a malformed event contributes nothing
    }
  }
  return out;
}

/** The prompt text of a request (last user message for chat; the prompt for completions). */
export function promptText(req: ParsedRequest): string {
  const b = req.body;
  if (Array.isArray(b.messages)) {
    const msgs = b.messages as { role?: unknown; content?: unknown }[];
    for (let i = msgs.length - 1; i >= 0; i--) {
      const m = msgs[i];
      if (m && m.role === 'user') return typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
    }
    return '';
  }
  return typeof b.prompt === 'string' ? b.prompt : JSON.stringify(b.prompt);
}

export class JudgeError extends Error {}

async function ask(ep: JudgeEndpoint, system: string, user: string): Promise<string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (ep.apiKey) headers.authorization = `Bearer ${ep.apiKey}`;
  let res;
  try {
    res = await request(`${ep.url.replace(/\/$/, '')}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model: ep.model,
        temperature: 0,
        max_tokens: DEFAULTS.judge.maxTokens,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: user },
        ],
      }),
      headersTimeout: ep.timeoutMs,
      bodyTimeout: ep.timeoutMs,
    });
  } catch (err) {
    throw new JudgeError(`judge ${ep.url} unreachable: ${(err as Error).message}`);
  }
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new JudgeError(`judge answered ${res.statusCode}: ${text.slice(0, 200)}`);
  const content = responseText(text, false);
  if (!content) throw new JudgeError('judge reply has no content');
  return content;
}

/** First JSON object in a reply (judges sometimes add prose or code fences). */
function firstJson(s: string): Record<string, unknown> {
  const i = s.indexOf('{');
  const j = s.lastIndexOf('}');
  if (i < 0 || j < i) throw new JudgeError(`judge reply is not JSON: ${JSON.stringify(s.slice(0, 80))}`);
  try {
    return JSON.parse(s.slice(i, j + 1)) as Record<string, unknown>;
  } catch {
    throw new JudgeError(`judge reply is not JSON: ${JSON.stringify(s.slice(0, 80))}`);
  }
}

/** Pointwise score mapped from the judge's 1–10 scale to 0–1. */
export async function scorePointwise(ep: JudgeEndpoint, prompt: string, response: string): Promise<number> {
  const reply = firstJson(await ask(ep, POINTWISE_RUBRIC, `Prompt:\n${prompt}\n\n<response>${response}</response>`));
  const s = Number(reply.score);
  if (!Number.isFinite(s) || s < 1 || s > 10) throw new JudgeError(`judge score out of range: ${String(reply.score)}`);
  return (s - 1) / 9;
}

export type PairOutcome = 'first' | 'second' | 'tie';

/**
 * Compare two answers in both orders. A version wins only when it wins in both orders; any
 * disagreement (position bias) is a tie.
 */
export async function comparePair(ep: JudgeEndpoint, prompt: string, first: string, second: string): Promise<PairOutcome> {
  const once = async (a: string, b: string) => {
    const r = firstJson(await ask(ep, PAIRWISE_RUBRIC, `Prompt:\n${prompt}\n\n<response_a>${a}</response_a>\n<response_b>${b}</response_b>`));
    const w = String(r.winner).toUpperCase();
    if (w !== 'A' && w !== 'B' && w !== 'TIE') throw new JudgeError(`judge winner must be A, B or tie, got ${JSON.stringify(r.winner)}`);
    return w;
  };
  const [ab, ba] = await Promise.all([once(first, second), once(second, first)]);
  if (ab === 'A' && ba === 'B') return 'first';
  if (ab === 'B' && ba === 'A') return 'second';
  return 'tie';
}

/** One decision of the judge, kept for operators (the last DEFAULTS.judge.recentSamples of them). */
export interface JudgeSample {
  at: number;
  model: string;
  kind: 'pointwise' | 'pairwise';
  version: string;
  adapter?: string | undefined;
  /** Pointwise: the score, 0–1. Pairwise: `version`'s, 1 / 0.5 / 0 for a win / tie / loss against `against`. */
  score: number;
  against?: string | undefined;
  /** Only with capture_prompts, each cut to DEFAULTS.judge.capturedChars. */
  prompt?: string | undefined;
  answer?: string | undefined;
  answerAgainst?: string | undefined;
}

export interface QualityResult {
  model: string;
  version: string;
  /** 0–1: pointwise score, or 1 / 0.5 / 0 for a pairwise win / tie / loss. */
  score: number;
  kind: 'pointwise' | 'pairwise';
  against?: string | undefined;
  /** A LoRA adapter's answer: the name the engine served it under (an adapter canary scores its two sides apart). */
  adapter?: string | undefined;
}

/**
 * Judges tapped responses with bounded concurrency and a bounded queue (overflow is counted and
 * dropped: judging is sampled anyway and must never back up into serving).
 */
export class QualityJudge {
  private readonly queue: (() => Promise<void>)[] = [];
  private running = 0;
  private readonly pairs = new Map<number, { r: TappedResponse; at: number }>();
  dropped = 0;
  failures = 0;
  lastError: string | undefined;
  judged = 0;

  constructor(
    private readonly ep: JudgeEndpoint,
    private readonly onResult: (r: QualityResult) => void,
    private readonly opts: { concurrency: number; queueMax: number; pairTtlMs: number; pointwise: boolean; capturePrompts?: boolean },
  ) {}

  /** The last decisions, oldest first (bounded). */
  private readonly recent: JudgeSample[] = [];

  /** The judge's last decisions, newest first; `model` keeps that model's only. */
  samples(model?: string): JudgeSample[] {
    return this.recent.filter((s) => model === undefined || s.model === model).reverse();
  }

  private keep(s: JudgeSample, texts: { prompt: string; answer: string; answerAgainst?: string }): void {
    const cut = (t: string) => (t.length > DEFAULTS.judge.capturedChars ? `${t.slice(0, DEFAULTS.judge.capturedChars)}…` : t);
    if (this.opts.capturePrompts === true) {
      s.prompt = cut(texts.prompt);
      s.answer = cut(texts.answer);
      if (texts.answerAgainst !== undefined) s.answerAgainst = cut(texts.answerAgainst);
    }
    this.recent.push(s);
    if (this.recent.length > DEFAULTS.judge.recentSamples) this.recent.shift();
  }

  /** A tap listener: call from the data plane's tap (returns at once). */
  readonly listener = (r: TappedResponse): void => {
    if (r.status !== 200) return;
    if (this.opts.pointwise) {
      // every tapped answer (a shadow answer too) is scored on its own: pairwise wins (1 / 0.5 / 0)
      // must never be mixed into the same series as pointwise scores
      this.enqueue(() => this.judgeOne(r));
      return;
    }
    if (r.pairId !== undefined) {
      const other = this.pairs.get(r.pairId);
      if (!other) {
        this.pairs.set(r.pairId, { r, at: Date.now() });
        this.expirePairs();
        return;
      }
      this.pairs.delete(r.pairId);
      const [primary, shadow] = r.shadow ? [other.r, r] : [r, other.r];
      this.enqueue(() => this.judgePair(primary, shadow));
    }
  };

  private expirePairs(): void {
    if (this.pairs.size < DEFAULTS.judge.pairSweepAt) return;
    const cutoff = Date.now() - this.opts.pairTtlMs;
    for (const [k, v] of this.pairs) if (v.at < cutoff) this.pairs.delete(k);
    // still too many (a flood of unmatched halves): drop the oldest
    while (this.pairs.size > DEFAULTS.judge.pairsMax) {
      const k = this.pairs.keys().next().value as number;
      this.pairs.delete(k);
    }
  }

  private enqueue(job: () => Promise<void>): void {
    if (this.queue.length >= this.opts.queueMax) {
      this.dropped++;
      return;
    }
    this.queue.push(job);
    this.pump();
  }

  private pump(): void {
    while (this.running < this.opts.concurrency && this.queue.length > 0) {
      const job = this.queue.shift() as () => Promise<void>;
      this.running++;
      job()
        .catch((err: unknown) => {
          this.failures++;
          this.lastError = err instanceof Error ? err.message : String(err);
        })
        .finally(() => {
          this.running--;
          this.pump();
        });
    }
  }

  private async judgeOne(r: TappedResponse): Promise<void> {
    const text = responseText(r.body, r.request.stream);
    const prompt = promptText(r.request);
    const score = await scorePointwise(this.ep, prompt, text);
    this.judged++;
    this.keep({ at: Date.now(), model: r.model, kind: 'pointwise', version: r.version, adapter: r.adapter, score }, { prompt, answer: text });
    this.onResult({ model: r.model, version: r.version, score, kind: 'pointwise', adapter: r.adapter });
  }

  private async judgePair(primary: TappedResponse, shadow: TappedResponse): Promise<void> {
    const prompt = promptText(primary.request);
    const [a, b] = [responseText(primary.body, primary.request.stream), responseText(shadow.body, shadow.request.stream)];
    const outcome = await comparePair(this.ep, prompt, a, b);
    this.judged++;
    const ps = outcome === 'first' ? 1 : outcome === 'tie' ? 0.5 : 0;
    this.keep(
      { at: Date.now(), model: primary.model, kind: 'pairwise', version: primary.version, score: ps, against: shadow.version },
      { prompt, answer: a, answerAgainst: b },
    );
    this.onResult({ model: primary.model, version: primary.version, score: ps, kind: 'pairwise', against: shadow.version });
    this.onResult({ model: shadow.model, version: shadow.version, score: 1 - ps, kind: 'pairwise', against: primary.version });
  }

  /** Resolves when nothing is queued or running (tests). */
  async idle(): Promise<void> {
    while (this.running > 0 || this.queue.length > 0) await new Promise((r) => setImmediate(r));
  }

  stats(): { judged: number; failures: number; dropped: number; queued: number; running: number; lastError: string | undefined } {
    return { judged: this.judged, failures: this.failures, dropped: this.dropped, queued: this.queue.length, running: this.running, lastError: this.lastError };
  }
}
