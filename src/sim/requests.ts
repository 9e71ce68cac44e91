// Inference request bodies: validation (vLLM's rules, OpenAI error bodies) and the chat template.
import { z } from 'zod';
import { BadRequestError } from '../errors.js';
import { zodMessage } from '../config/issues.js';
import { readKvTransfer } from './disagg.js';
import type { KvTransfer } from './disagg.js';

const stopSchema = z.union([z.string(), z.array(z.string()).max(16)]).nullish();
const streamOptions = z.object({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() }).nullish();

/** Fields shared by both endpoints; unknown fields are accepted and ignored, as vLLM does. */
const common = {
  model: z.string().min(1),
  max_tokens: z.number().int().nullish(),
  min_tokens: z.number().int().min(0).nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  stop: stopSchema,
  n: z.number().int().nullish(),
  temperature: z.number().min(0).nullish(),
  seed: z.number().int().nullish(),
  ignore_eos: z.boolean().nullish(),
  /** Disaggregated serving's handshake (vLLM's NIXL connector; read by disagg.ts). */
  kv_transfer_params: z.record(z.string(), z.unknown()).nullish(),
  return_token_ids: z.boolean().nullish(),
  /** Sampling cuts (the simulator's generator does not sample with them; the llama.cpp engine does). */
  top_p: z.number().gt(0, 'top_p must be in (0, 1]').lte(1, 'top_p must be in (0, 1]').nullish(),
  top_k: z.number().int('top_k must be an integer').gte(-1, 'top_k must be -1 (disable), 0 (disable) or at least 1').nullish(),
};

const textPart = z.object({ type: z.literal('text'), text: z.string() });
const message = z.object({
  role: z.enum(['system', 'user', 'assistant', 'tool', 'developer']),
  content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
  name: z.string().optional(),
});

export const chatSchema = z.object({
  ...common,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
});

export const completionSchema = z.object({
  ...common,
  prompt: z.union([z.string(), z.array(z.string()).length(1), z.array(z.number().int())]),
  logprobs: z.number().int().min(0).nullish(),
  echo: z.boolean().nullish(),
});

export type ChatBody = z.output<typeof chatSchema>;
export type Message = ChatBody['messages'][number];

/** A validated inference request, independent of the endpoint it came from. */
export interface InferenceRequest {
  kind: 'chat' | 'completion';
  model: string;
  /** Rendered prompt text (the context generation continues). */
  prompt: string;
  messages: Message[] | null;
  stream: boolean;
  includeUsage: boolean;
  /** stream_options.continuous_usage_stats (vLLM): usage in every chunk. */
  continuousUsage: boolean;
  /** Explicit max_tokens, or null to use the default. */
  maxTokens: number | null;
  minTokens: number;
  ignoreEos: boolean;
  temperature: number;
  seed: number | undefined;
  stop: string[];
  /** -1: no logprobs; otherwise the number of alternatives per token. */
  topLogprobs: number;
  /** Disaggregated serving: which leg this is, and where its blocks are (null: a whole request). */
  kvTransfer: KvTransfer | null;
  /** A completion's prompt as token ids (null: text; only an engine with a tokenizer takes ids). */
  promptIds: number[] | null;
  /** Chat: the template's generation prompt is added / the last message is continued (vLLM's fields). */
  addGenerationPrompt: boolean;
  continueFinal: boolean;
  /** vLLM's `return_token_ids`: the answer carries the prompt's and the generated tokens' ids. */
  returnTokenIds: boolean;
  /** Sampling: the top-k cut (0: none; vLLM's -1 is read as 0) and the nucleus (1: none). */
  topK: number;
  topP: number;
}

/** Who answers (named in refusals) and whether its prompts may be token ids. */
export interface ParseOptions {
  engine: string;
  tokenIds: boolean;
}

const SIM_PARSE: ParseOptions = { engine: 'the simulator', tokenIds: false };

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestError('invalid_request', 'request body must be a JSON object');
  }
  const r = schema.safeParse(body, { reportInput: true });
  if (!r.success) throw new BadRequestError('invalid_request', zodMessage(r.error));
  return r.data;
}

function checkCommon(
  b: { n?: number | null | undefined; max_tokens?: number | null | undefined; stream?: boolean | null | undefined; stream_options?: object | null | undefined },
  maxLogprobs: number,
  top: number,
  engine: string,
): void {
  if (b.stream_options && !b.stream) throw new BadRequestError('invalid_request', 'Stream options can only be defined when `stream=True`.');
  if (b.n !== undefined && b.n !== null && b.n !== 1) throw new BadRequestError('invalid_request', `n: ${engine} supports n = 1 only, got ${b.n}`);
  if (b.max_tokens !== undefined && b.max_tokens !== null && b.max_tokens < 1) {
    throw new BadRequestError('invalid_request', `max_tokens must be at least 1, got ${b.max_tokens}.`);
  }
  if (top > maxLogprobs)
    throw new BadRequestError('invalid_request', `Requested top_logprobs/logprobs (${top}) exceeds the maximum allowed value (${maxLogprobs}).`);
}

const stops = (s: string | string[] | null | undefined): string[] =>
  (s === undefined || s === null ? [] : typeof s === 'string' ? [s] : s).filter((x) => x.length > 0);

export function contentText(m: Message): string {
  if (m.content === undefined || m.content === null) return '';
  if (typeof m.content === 'string') return m.content;
  return m.content.map((p) => p.text).join('');
}

/**
 * The chat template: `<|role|> content <|end|>` per message, joined by newlines, then
 * `\n<|assistant|>` when a generation prompt is added. With continue_final_message the last
 * message is left open (no `<|end|>`), so "messages + assistant header + k tokens" and
 * "messages + partial assistant message" render to the same token words.
 */
export function renderChat(messages: readonly Message[], addGenerationPrompt: boolean, continueFinal: boolean): string {
  const parts = messages.map((m, i) => {
    const open = continueFinal && i === messages.length - 1;
    return `<|${m.role}|> ${contentText(m)}${open ? '' : ' <|end|>'}`;
  });
  let s = parts.join('\n');
  if (addGenerationPrompt) s += '\n<|assistant|>';
  return s;
}

type CommonBody = z.output<z.ZodObject<typeof common>>;

/** What both endpoints ask of generation, from the fields they share. */
function sampling(
  b: CommonBody,
  maxTokens: number | null,
  top: number,
): Pick<
  InferenceRequest,
  | 'stream'
  | 'includeUsage'
  | 'continuousUsage'
  | 'maxTokens'
  | 'minTokens'
  | 'ignoreEos'
  | 'temperature'
  | 'seed'
  | 'stop'
  | 'topLogprobs'
  | 'kvTransfer'
  | 'returnTokenIds'
  | 'topK'
  | 'topP'
> {
  return {
    stream: b.stream ?? false,
    includeUsage: b.stream_options?.include_usage ?? false,
    continuousUsage: b.stream_options?.continuous_usage_stats ?? false,
    maxTokens,
    minTokens: b.min_tokens ?? 0,
    ignoreEos: b.ignore_eos ?? false,
    temperature: b.temperature ?? 1,
    seed: b.seed ?? undefined,
    stop: stops(b.stop),
    topLogprobs: top,
    kvTransfer: readKvTransfer(b.kv_transfer_params),
    returnTokenIds: b.return_token_ids ?? false,
    topK: Math.max(0, b.top_k ?? 0),
    topP: b.top_p ?? 1,
  };
}

export function parseChat(body: unknown, maxLogprobs: number, o: ParseOptions = SIM_PARSE): InferenceRequest {
  const b = parse(chatSchema, body);
  const top = b.logprobs ? (b.top_logprobs ?? 0) : -1;
  if (!b.logprobs && b.top_logprobs !== undefined && b.top_logprobs !== null && b.top_logprobs > 0) {
    throw new BadRequestError('invalid_request', 'top_logprobs requires logprobs to be true');
  }
  const maxTokens = b.max_completion_tokens ?? b.max_tokens ?? null;
  checkCommon({ n: b.n, max_tokens: maxTokens, stream: b.stream, stream_options: b.stream_options }, maxLogprobs, top, o.engine);
  const cont = b.continue_final_message ?? false;
  const addGen = b.add_generation_prompt ?? true;
  if (cont && addGen) {
    throw new BadRequestError('invalid_request', 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
  }
  return {
    kind: 'chat',
    model: b.model,
    prompt: renderChat(b.messages, addGen, cont),
    messages: b.messages,
    promptIds: null,
    addGenerationPrompt: addGen,
    continueFinal: cont,
    ...sampling(b, maxTokens, top),
  };
}

export function parseCompletion(body: unknown, maxLogprobs: number, o: ParseOptions = SIM_PARSE): InferenceRequest {
  const b = parse(completionSchema, body);
  const top = b.logprobs ?? -1;
  checkCommon(b, maxLogprobs, top, o.engine);
  if (b.echo) throw new BadRequestError('invalid_request', `echo: ${o.engine} does not support echo`);
  let prompt = '';
  let promptIds: number[] | null = null;
  if (typeof b.prompt === 'string') prompt = b.prompt;
  else if (b.prompt.length === 1 && typeof b.prompt[0] === 'string') prompt = b.prompt[0];
  else if (!o.tokenIds) throw new BadRequestError('invalid_request', `prompt: token-id prompts are not supported by ${o.engine}; send text`);
  else if (b.prompt.length === 0) throw new BadRequestError('invalid_request', 'prompt: a token-id prompt needs at least one token');
  else promptIds = b.prompt as number[];
  return {
    kind: 'completion',
    model: b.model,
    prompt,
    messages: null,
    promptIds,
    addGenerationPrompt: false,
    continueFinal: false,
    ...sampling(b, b.max_tokens ?? null, top),
  };
}
