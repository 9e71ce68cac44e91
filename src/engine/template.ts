// A model's chat template (its GGUF metadata's Jinja text) rendered as vLLM renders it, with add_generation_prompt and continue_final_message.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BadRequestError } from '../errors.js';
import { contentText } from '../sim/requests.js';
import type { Message } from '../sim/requests.js';
import { RUNTIME_DIR } from './binding.js';
import type { LlamaModel } from './binding.js';

interface JinjaTemplate {
  render(vars: Record<string, unknown>): string;
}
interface JinjaModule {
  Template: new (source: string) => JinjaTemplate;
}

/** @huggingface/jinja, which node-llama-cpp brings with it (the same renderer Hugging Face's JS tools use). */
async function jinja(): Promise<JinjaModule> {
  const dir = path.join(RUNTIME_DIR, 'node_modules', '@huggingface', 'jinja', 'dist', 'index.js');
  if (!existsSync(dir)) throw new Error(`@huggingface/jinja is not installed in ${RUNTIME_DIR} (npm run engine:install)`);
  return (await import(pathToFileURL(dir).href)) as JinjaModule;
}

interface GgufMetadata {
  tokenizer?: { chat_template?: unknown; ggml?: { tokens?: string[]; bos_token_id?: number; eos_token_id?: number } };
}

export class ChatTemplate {
  private constructor(
    private readonly template: JinjaTemplate | undefined,
    private readonly bos: string,
    private readonly eos: string,
    readonly vocabSize: number,
  ) {}

  static async of(model: LlamaModel): Promise<ChatTemplate> {
    const md = model.fileInfo.metadata as GgufMetadata;
    const tokens = md.tokenizer?.ggml?.tokens ?? [];
    const tokenText = (id: number | undefined) => (id === undefined ? '' : (tokens[id] ?? ''));
    const source = md.tokenizer?.chat_template;
    const template = typeof source === 'string' ? new (await jinja()).Template(source) : undefined;
    return new ChatTemplate(template, tokenText(md.tokenizer?.ggml?.bos_token_id), tokenText(md.tokenizer?.ggml?.eos_token_id), tokens.length);
  }

  /**
   * The prompt of a chat. With continue_final_message the last message stays open: rendered without
   * a generation prompt, then cut right after its content (vLLM's way), so generation continues it.
   */
  render(messages: readonly Message[], addGenerationPrompt: boolean, continueFinal: boolean): string {
    if (this.template === undefined) throw new BadRequestError('invalid_request', 'the model has no chat template in its metadata: use /v1/completions');
    const msgs = messages.map((m) => ({ role: m.role, content: contentText(m) }));
    const text = this.template.render({ messages: msgs, add_generation_prompt: addGenerationPrompt, bos_token: this.bos, eos_token: this.eos });
    if (!continueFinal) return text;
    const final = msgs.at(-1)?.content ?? '';
    if (final === '') return text;
    const at = text.lastIndexOf(final);
    if (at < 0) throw new BadRequestError('invalid_request', 'continue_final_message: the chat template does not render the final message verbatim');
    return text.slice(0, at + final.length);
  }
}
