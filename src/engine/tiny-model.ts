// A tiny llama-architecture model with seeded random weights, written as GGUF: the real engine's test model (no model hub here).
//
// It is a real model to llama.cpp: a SentencePiece-style vocabulary (control tokens, 256 byte
// tokens for byte fallback so that any text tokenises, ASCII characters, and common English words
// built up by merges, so that re-tokenising generated text can differ from the tokens generated),
// ChatML special tokens and chat template, and F32 weights drawn from the seed. One channel of the
// residual stream is held constant (the attention and feed-forward outputs never write to it), so
// the output layer can bias against byte and control tokens: what it generates is readable text.
// Same seed, same bytes; another seed, another "version" with other outputs.
import { createHash } from 'node:crypto';
import { mulberry32 } from '../domain/random.js';
import { bool, encodeGguf, f32, f32s, i32s, str, strs, u32 } from './gguf.js';
import type { GgufTensor, GgufValue } from './gguf.js';

export interface TinyModelOptions {
  seed: number;
  layers?: number;
  embedding?: number;
  heads?: number;
  feedForward?: number;
  /** The context the model declares it was trained on (llama.context_length). */
  contextLength?: number;
}

/** The ChatML template, as the model's own metadata carries it (tokenizer.chat_template). */
export const CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const WORDS = (
  'the of and to in is was that for it with as on be at by this had not are but from or have an they which one you were her all she there ' +
  'would their we him been has when who will more no if out so said what up its about into than them can only other new some could time ' +
  'these two may then do first any my now such like our over man me even most made after also did many before must through back years ' +
  'where much your way well down should because each just those people how too little state good very make world still own see men work ' +
  'long get here between both life being under never day same another know while last might us great old year off come since against go ' +
  'came right used take three model update safe fleet token stream worker gateway canary version'
).split(' ');

/** Token types of llama.cpp's vocabulary (llama_token_type). */
const NORMAL = 1;
const UNKNOWN = 2;
const CONTROL = 3;
const BYTE = 6;
const SPACE = '\u2581';

export interface Vocabulary {
  tokens: string[];
  scores: number[];
  types: number[];
  bos: number;
  eos: number;
  unk: number;
}

/** The vocabulary: every multi-character piece is reachable by merging two shorter ones (SentencePiece's rule). */
export function vocabulary(): Vocabulary {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  const seen = new Set<string>();
  const add = (t: string, type: number, score: number) => {
    if (seen.has(t)) return;
    seen.add(t);
    tokens.push(t);
    types.push(type);
    scores.push(score);
  };
  add('<unk>', UNKNOWN, 0);
  add('<s>', CONTROL, 0);
  add('</s>', CONTROL, 0);
  add('<|im_start|>', CONTROL, 0);
  add('<|im_end|>', CONTROL, 0);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, BYTE, 0);
  add(SPACE, NORMAL, -1);
  for (let c = 0x21; c <= 0x7e; c++) add(String.fromCharCode(c), NORMAL, -1);
  // words with their leading space, and every prefix of them (the merges that reach them); longer pieces score higher
  for (const w of WORDS) {
    const piece = SPACE + w;
    for (let n = 2; n <= piece.length; n++) add(piece.slice(0, n), NORMAL, n);
  }
  return { tokens, scores, types, bos: 1, eos: 4, unk: 0 };
}

/** Normal draws (Box–Muller) from the seeded generator. */
function gaussian(rand: () => number): () => number {
  return () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

export interface TinyModel {
  bytes: Buffer;
  /** SHA-256 of the weights alone (also in the metadata as glidepath.weights_sha256). */
  weightsSha256: string;
  vocabulary: Vocabulary;
}

/** The GGUF bytes of a tiny llama model drawn from `seed` (a few hundred KB). */
export function makeTinyModel(o: TinyModelOptions): TinyModel {
  const layers = o.layers ?? 2;
  const embd = o.embedding ?? 64;
  const heads = o.heads ?? 4;
  const ff = o.feedForward ?? 128;
  const ctx = o.contextLength ?? 2048;
  if (embd % heads !== 0) throw new Error(`embedding ${embd} is not a multiple of heads ${heads}`);
  const vocab = vocabulary();
  const nv = vocab.tokens.length;
  const normal = gaussian(mulberry32(o.seed));
  const fill = (n: number, std: number) => Float32Array.from({ length: n }, () => normal() * std);
  const ones = (n: number) => new Float32Array(n).fill(1);
  /** Row `row` (of `cols` values) of a row-major matrix set to zero: that output channel is never written. */
  const zeroRow = (m: Float32Array, cols: number, row: number) => m.fill(0, row * cols, (row + 1) * cols);

  // channel 0 of the residual stream is a constant: the bias channel
  const emb = fill(embd * nv, 1);
  for (let t = 0; t < nv; t++) emb[t * embd] = 4;
  const out = fill(embd * nv, 3 / Math.sqrt(embd));
  for (let t = 0; t < nv; t++) {
    const type = vocab.types[t];
    // readable text: normal tokens favoured, byte and control tokens far behind; the end of turn sometimes
    out[t * embd] = t === vocab.eos ? 0.35 : type === NORMAL ? 1 : -4;
  }
  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [embd, nv], data: emb },
    { name: 'output_norm.weight', dims: [embd], data: ones(embd) },
    { name: 'output.weight', dims: [embd, nv], data: out },
  ];
  const w = 1 / Math.sqrt(embd);
  for (let l = 0; l < layers; l++) {
    const attnOut = fill(embd * embd, w);
    zeroRow(attnOut, embd, 0);
    const down = fill(ff * embd, 1 / Math.sqrt(ff));
    zeroRow(down, ff, 0);
    tensors.push(
      { name: `blk.${l}.attn_norm.weight`, dims: [embd], data: ones(embd) },
      { name: `blk.${l}.attn_q.weight`, dims: [embd, embd], data: fill(embd * embd, w) },
      { name: `blk.${l}.attn_k.weight`, dims: [embd, embd], data: fill(embd * embd, w) },
      { name: `blk.${l}.attn_v.weight`, dims: [embd, embd], data: fill(embd * embd, w) },
      { name: `blk.${l}.attn_output.weight`, dims: [embd, embd], data: attnOut },
      { name: `blk.${l}.ffn_norm.weight`, dims: [embd], data: ones(embd) },
      { name: `blk.${l}.ffn_gate.weight`, dims: [embd, ff], data: fill(embd * ff, w) },
      { name: `blk.${l}.ffn_up.weight`, dims: [embd, ff], data: fill(embd * ff, w) },
      { name: `blk.${l}.ffn_down.weight`, dims: [ff, embd], data: down },
    );
  }
  const hash = createHash('sha256');
  for (const t of tensors) hash.update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  const weightsSha256 = hash.digest('hex');
  const md = new Map<string, GgufValue>([
    ['general.architecture', str('llama')],
    ['general.name', str(`glidepath-tiny-${o.seed}`)],
    ['general.alignment', u32(32)],
    ['glidepath.seed', u32(o.seed)],
    ['glidepath.weights_sha256', str(weightsSha256)],
    ['llama.context_length', u32(ctx)],
    ['llama.embedding_length', u32(embd)],
    ['llama.block_count', u32(layers)],
    ['llama.feed_forward_length', u32(ff)],
    ['llama.rope.dimension_count', u32(embd / heads)],
    ['llama.rope.freq_base', f32(10000)],
    ['llama.attention.head_count', u32(heads)],
    ['llama.attention.head_count_kv', u32(heads)],
    ['llama.attention.layer_norm_rms_epsilon', f32(1e-5)],
    ['llama.vocab_size', u32(nv)],
    ['tokenizer.ggml.model', str('llama')],
    ['tokenizer.ggml.tokens', strs(vocab.tokens)],
    ['tokenizer.ggml.scores', f32s(vocab.scores)],
    ['tokenizer.ggml.token_type', i32s(vocab.types)],
    ['tokenizer.ggml.bos_token_id', u32(vocab.bos)],
    ['tokenizer.ggml.eos_token_id', u32(vocab.eos)],
    ['tokenizer.ggml.unknown_token_id', u32(vocab.unk)],
    ['tokenizer.ggml.add_bos_token', bool(true)],
    ['tokenizer.ggml.add_eos_token', bool(false)],
    ['tokenizer.chat_template', str(CHAT_TEMPLATE)],
  ]);
  return { bytes: encodeGguf(md, tensors), weightsSha256, vocabulary: vocab };
}

/** A LoRA adapter for a tiny model of the given shape (its layers and width), drawn from `seed`. */
export interface TinyAdapterOptions {
  seed: number;
  rank?: number;
  layers?: number;
  embedding?: number;
}

/**
 * The GGUF bytes of a LoRA adapter (llama.cpp's format: general.type "adapter", adapter.type "lora",
 * `<tensor>.lora_a` of ggml shape [in, rank] and `.lora_b` of [rank, out]) on every layer's query,
 * value and output projections, strong enough that the adapted model answers differently.
 */
export function makeTinyAdapter(o: TinyAdapterOptions): Buffer {
  const rank = o.rank ?? 4;
  const layers = o.layers ?? 2;
  const embd = o.embedding ?? 64;
  const normal = gaussian(mulberry32(o.seed));
  const fill = (n: number) => Float32Array.from({ length: n }, () => normal() * 0.3);
  const tensors: GgufTensor[] = [];
  for (let l = 0; l < layers; l++) {
    for (const t of ['attn_q', 'attn_v', 'attn_output']) {
      tensors.push({ name: `blk.${l}.${t}.weight.lora_a`, dims: [embd, rank], data: fill(embd * rank) });
      tensors.push({ name: `blk.${l}.${t}.weight.lora_b`, dims: [rank, embd], data: fill(rank * embd) });
    }
  }
  const md = new Map<string, GgufValue>([
    ['general.architecture', str('llama')],
    ['general.type', str('adapter')],
    ['adapter.type', str('lora')],
    ['adapter.lora.alpha', f32(2 * rank)],
  ]);
  return encodeGguf(md, tensors);
}
