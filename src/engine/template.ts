// A model's chat template (its GGUF metadata's Jinja text) rendered as vLLM renders it, with add_generation_prompt and continue_final_message.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BadRequestError } from '../errors.js';
import { contentText } from '../sim/requests.js';
import type { Message } from '../sim/requests.js';
import { bindingEntry, RUNTIME_DIR } from './binding.js';
import type { LlamaModel } from './binding.js';

interface JinjaTemplate {
  render(vars: Record<string, unknown>): string;
}
interface JinjaModule {
  Template: new (source: string) => JinjaTemplate;
}

/** @huggingface/jinja, which node-llama-cpp brings with it (the same renderer Hugging Face's JS tools use). */
async function jinja(): Promise<JinjaModule> {
  // beside the node-llama-cpp that was loaded (engine/node_modules, or the project's own)
  const entry = bindingEntry();
  const roots = [...(entry === undefined ? [] : [path.resolve(path.dirname(entry), '..', '..')]), path.join(RUNTIME_DIR, 'node_modules')];
  const file = roots.map((r) => path.join(r, '@huggingface', 'jinja', 'dist', 'index.js')).find((f) => existsSync(f));
  if (file === undefined) throw new Error(`@huggingface/jinja is not installed beside node-llama-cpp (npm run engine:install)`);
  return (await import(pathToFileURL(file).href)) as JinjaModule;
}

/** Stands for the final message's content while the template renders, so that the cut is found exactly. */
const SENTINEL = '\u0000glidepath-final-message\u0000';

interface GgufMetadata {
  tokenizer?: { chat_template?: unknown; ggml?: { tokens?: string[]; bos_token_id?: number; eos_token_id?: number } };
}

export class ChatTemplate {
  private constructor(
    private readonly template: JinjaTemplate | undefined,
    private readonly bos: string,
    private readonly eos: string,
    readonly vocabSize: number,
    /** The longest token's text, in bytes (an upper bound: byte tokens are written `<0xAB>`): a text of B bytes has at least B / this tokens. */
    readonly longestPieceBytes: number,
  ) {}

  static async of(model: LlamaModel): Promise<ChatTemplate> {
    const md = model.fileInfo.metadata as GgufMetadata;
    const tokens = md.tokenizer?.ggml?.tokens ?? [];
    const tokenText = (id: number | undefined) => (id === undefined ? '' : (tokens[id] ?? ''));
    const source = md.tokenizer?.chat_template;
    const template = typeof source === 'string' ? new (await jinja()).Template(source) : undefined;
    const longest = tokens.reduce((m, t) => Math.max(m, Buffer.byteLength(t)), 1);
    return new ChatTemplate(template, tokenText(md.tokenizer?.ggml?.bos_token_id), tokenText(md.tokenizer?.ggml?.eos_token_id), tokens.length, longest);
  }

  /**
   * The prompt of a chat. With continue_final_message the last message stays open: rendered without
   * a generation prompt, then cut right after its content (vLLM's way), so generation continues it.
   */
  render(messages: readonly Message[], addGenerationPrompt: boolean, continueFinal: boolean): string {
    const template = this.template;
    if (template === undefined) throw new BadRequestError('invalid_request', 'the model has no chat template in its metadata: use /v1/completions');
    const msgs = messages.map((m) => ({ role: m.role, content: contentText(m) }));
    const final = continueFinal ? (msgs.at(-1)?.content ?? '') : '';
    // the final message rendered as a sentinel, then cut right after it and given its content back:
    // the cut cannot land in the template's own markup, and the content is kept as it is
    if (final !== '') (msgs.at(-1) as { content: string }).content = SENTINEL;
    let text: string;
    try {
      text = template.render({ messages: msgs, add_generation_prompt: addGenerationPrompt, bos_token: this.bos, eos_token: this.eos });
    } catch (e) {
      // the template's own refusals (raise_exception: "roles must alternate", …) are the request's fault
      throw new BadRequestError('invalid_request', `the chat template refused the messages: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (final === '') return text;
    const at = text.lastIndexOf(SENTINEL);
    if (at < 0) throw new BadRequestError('invalid_request', 'continue_final_message: the chat template does not render the final message verbatim');
    return text.slice(0, at) + final;
  }
}
