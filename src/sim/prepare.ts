// Request preparation (pure): context limits and KV need, then the tokens the response will carry.
import { randomBytes } from 'node:crypto';
import { BadRequestError } from '../errors.js';
import { fixedTokens, generate, versionKey, type Generated } from './generator.js';
import { judgeReply } from './judge.js';
import type { SimOptions } from './options.js';
import { contentText, type InferenceRequest } from './requests.js';
import { hashContext, tokenize } from './tokenizer.js';

/** What the request asked for, resolved against the served names. */
export interface Target {
  /** Name echoed in responses (what the request asked for). */
  name: string;
  adapter: string | undefined;
  judge: boolean;
}

export interface Plan {
  promptTokens: number;
  contextHash: number;
  maxTokens: number;
  /** KV tokens the request reserves: prompt + max_tokens. */
  need: number;
}

/** Check the request against the context window and KV cache (vLLM's messages). */
export function plan(req: InferenceRequest, o: SimOptions): Plan {
  const ctx = hashContext(req.prompt);
  const maxLen = o.maxModelLen;
  if (ctx.tokens >= maxLen) {
    throw new BadRequestError(
      'context_length_exceeded',
      `This model's maximum context length is ${maxLen} tokens. However, your request has ${ctx.tokens} input tokens. Please reduce the length of the input messages.`,
    );
  }
  const maxTokens = req.maxTokens ?? Math.min(o.defaultMaxTokens, maxLen - ctx.tokens);
  if (ctx.tokens + maxTokens > maxLen) {
    throw new BadRequestError(
      'context_length_exceeded',
      `This model's maximum context length is ${maxLen} tokens. However, you requested ${ctx.tokens + maxTokens} tokens (${ctx.tokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
  if (req.minTokens > maxTokens)
    throw new BadRequestError('invalid_request', `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${req.minTokens}.`);
  const need = ctx.tokens + maxTokens;
  if (need > o.kvCapacityTokens) {
    throw new BadRequestError('kv_capacity_exceeded', `the request needs ${need} KV tokens but this worker's KV cache holds ${o.kvCapacityTokens}`);
  }
  return { promptTokens: ctx.tokens, contextHash: ctx.hash, maxTokens, need };
}

/**
 * The tokens of the response: the judge's verdict, or generated text (corrupted under that fault);
 * `hallucinationRate`: an adapter's own (AdapterKnobs), else the engine's.
 */
export function produce(
  req: InferenceRequest,
  o: SimOptions,
  target: Target,
  p: Plan,
  corrupt: boolean,
  logprobDrift = 0,
  hallucinationRate = o.hallucinationRate,
): Generated {
  if (target.judge) {
    const text = req.messages
      ? req.messages
          .filter((m) => m.role === 'user')
          .map(contentText)
          .join('\n')
      : req.prompt;
    return fixedTokens(tokenize(judgeReply(text)), p.maxTokens, req.topLogprobs);
  }
  return generate({
    key: versionKey(o.seed, o.model, target.adapter),
    context: p.contextHash,
    maxTokens: p.maxTokens,
    minTokens: req.minTokens,
    ignoreEos: req.ignoreEos,
    temperature: req.temperature,
    sampleSeed: req.seed ?? (req.temperature > 0 ? randomBytes(4).readUInt32LE(0) : 0),
    topLogprobs: req.topLogprobs,
    hallucinationRate,
    eosRate: o.eosRate,
    corrupt,
    logprobDrift,
    stop: req.stop,
  });
}
