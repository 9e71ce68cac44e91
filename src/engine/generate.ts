// One request's generation on one llama.cpp sequence: tokens sampled by llama.cpp, turned into text, stop strings, EOS and max_tokens applied, logprobs read from its probabilities.
import type { LlamaModel, LlamaSequence, Token } from './binding.js';
import type { Finish, TokenLogprob } from './render.js';
import { TextStream } from './text.js';

export interface GenerateRequest {
  promptIds: Token[];
  /**
   * How many of the prompt's ids are evaluated as one batch; the rest (an assistant message being
   * continued) one at a time, as they were when first generated. llama.cpp's batched and one-token
   * evaluations differ in their last bits, enough to change a greedy choice now and then (measured:
   * 8 of 48 continuations of 400-token generations differed when the whole prompt was one batch, 0
   * of 48 replayed one at a time), so a stream resumed on another worker goes on exactly as it would have.
   */
  batch: number;
  maxTokens: number;
  ignoreEos: boolean;
  temperature: number;
  seed: number | undefined;
  stop: readonly string[];
  /** -1: no logprobs; otherwise the alternatives per token. */
  topLogprobs: number;
  /** Sampling: 0 is the whole vocabulary; 1 is no nucleus cut. */
  topK: number;
  topP: number;
  /** The client left. */
  signal: AbortSignal;
}

/** Told of every generated token; returns false when nobody listens any more (the client left). */
export type TokenSink = (text: string, id: Token, lp: TokenLogprob | undefined) => boolean;

/** Logprobs below this are reported as it (a probability of 0 has no logarithm; vLLM's floor is -9999). */
const LOGPROB_FLOOR = -9999;
const logOf = (p: number | undefined): number => (p === undefined || p <= 0 ? LOGPROB_FLOOR : Math.max(LOGPROB_FLOOR, Math.log(p)));

/**
 * Generate on `seq` (its history cleared) until EOS (unless ignored), a stop string, max_tokens or
 * the sink refusing; `tail` is the text the stream held back at the end. The EOS token counts as a
 * completion token (as vLLM counts it) but has no text.
 */
export async function generate(model: LlamaModel, seq: LlamaSequence, req: GenerateRequest, sink: TokenSink): Promise<{ finish: Finish; tail: string }> {
  const text = new TextStream((ids, last) => model.detokenize(ids, false, last), req.stop, req.promptIds);
  const wantProbs = req.topLogprobs >= 0;
  const last: Token[] = req.promptIds.slice(-8);
  let n = 0;
  let reason: Finish['reason'] = 'length';
  const options = {
    temperature: req.temperature,
    // vLLM's defaults, not node-llama-cpp's (top-k 40, top-p 0.95): the whole vocabulary unless asked
    topK: req.topK,
    topP: req.topP,
    minP: 0,
    // greedy at temperature 0; a request without a seed samples with one of its own
    seed: req.seed ?? Math.floor(Math.random() * 2 ** 31),
    yieldEogToken: true,
  };
  let input = req.promptIds;
  if (req.batch < input.length - 1) {
    await seq.evaluateWithoutGeneratingNewTokens(input.slice(0, req.batch));
    for (const t of input.slice(req.batch, -1)) {
      // a client that left stops the replay (one evaluation per token can be long)
      if (req.signal.aborted) return { finish: { reason: 'abort', stopReason: null, completionTokens: 0 }, tail: '' };
      await seq.evaluateWithoutGeneratingNewTokens([t]);
    }
    input = input.slice(-1);
  }
  if (req.signal.aborted) return { finish: { reason: 'abort', stopReason: null, completionTokens: 0 }, tail: '' };
  const outputs = seq.evaluateWithMetadata(input, { confidence: wantProbs, probabilities: wantProbs }, options);
  for await (const out of outputs) {
    const id = out.token;
    n++;
    const eog = model.isEogToken(id);
    let lp: TokenLogprob | undefined;
    if (wantProbs) {
      const probs = out.probabilities ?? new Map<Token, number>();
      const top: TokenLogprob['top'] = [];
      for (const [t, p] of probs) {
        if (top.length >= req.topLogprobs) break;
        top.push({ token: model.detokenize([t], false, last), logprob: logOf(p) });
      }
      lp = { token: eog ? '' : model.detokenize([id], false, last), logprob: logOf(probs.get(id) ?? out.confidence), top };
    }
    const piece = eog ? '' : text.push(id);
    last.push(id);
    if (last.length > 8) last.shift();
    if (!sink(piece, id, lp)) {
      reason = 'abort';
      break;
    }
    if (eog && !req.ignoreEos) {
      reason = 'stop';
      break;
    }
    if (text.stopped !== null) {
      reason = 'stop';
      break;
    }
    if (n >= req.maxTokens) break;
  }
  // leaving the loop early ends llama.cpp's generation (the generator's return)
  await outputs.return(undefined);
  const tail = reason === 'abort' ? '' : text.flush();
  return { finish: { reason, stopReason: text.stopped, completionTokens: n }, tail };
}
