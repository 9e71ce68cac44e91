// The simulator's tokenizer and hashes: whitespace-led word/punctuation tokens that re-read exactly.
//
// A token is optional leading whitespace followed by one of: a chat marker `<|name|>`, a run of
// letters/digits/underscore, or one other character. Because every token owns its leading
// whitespace and generated words start with a space, the text of k tokens tokenizes back to the
// same k tokens, and `prompt + generated text` tokenizes as the prompt's tokens followed by the
// generated ones. Trailing whitespace with nothing after it is not a token.
//
// Generation hashes a token's *word* (the token without its whitespace), so whitespace
// differences (" foo" vs "  foo") never change what comes next.

const TOKEN_RE = /\s*(?:<\|[a-z_]+\|>|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_])/gu;

/** Split text into tokens (each keeps its leading whitespace). */
export function tokenize(text: string): string[] {
  return text.match(TOKEN_RE) ?? [];
}

/** Number of tokens in `text` without building the array of them. */
export function countTokens(text: string): number {
  TOKEN_RE.lastIndex = 0;
  let n = 0;
  while (TOKEN_RE.exec(text) !== null) n++;
  return n;
}

/** The word of a token: the token without its leading whitespace. */
export function wordOf(token: string): string {
  return token.trimStart();
}

/** 32-bit FNV-1a over UTF-16 code units. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** murmur3's 32-bit finalizer: a cheap bijective mix. */
export function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Seed of the rolling context hash (the empty context). */
export const CONTEXT_SEED = 0x2545f491;

/** Extend a rolling context hash by one token, given the token's word hash. */
export function roll(h: number, wordHash: number): number {
  return fmix32((Math.imul(h, 0x9e3779b1) ^ wordHash) + 0x7f4a7c15);
}

/** Rolling hash of the whole token sequence of `text`, starting from `h`. */
export function hashContext(text: string, h = CONTEXT_SEED): { hash: number; tokens: number } {
  TOKEN_RE.lastIndex = 0;
  let n = 0;
  let m: RegExpExecArray | null;
  while ((m = TOKEN_RE.exec(text)) !== null) {
    h = roll(h, fnv1a(m[0].trimStart()));
    n++;
  }
  return { hash: h, tokens: n };
}

/** Uniform [0,1) from a 32-bit value. */
export function unit(x: number): number {
  return (x >>> 0) / 4294967296;
}
