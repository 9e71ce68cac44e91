// The built-in judge model: scores responses from their share of marked words, deterministically.
//
// Format (docs/simulator.md, "Judge"):
//   pointwise: the user message contains `<response>TEXT</response>`;
//              the judge replies `{"score": S}` with S in [1, 10], one decimal.
//   pairwise:  `<response_a>A</response_a>` and `<response_b>B</response_b>`;
//              the judge replies `{"winner": "A"|"B"|"tie", "score_a": SA, "score_b": SB}`.
import { BadRequestError } from '../errors.js';
import { fmix32, fnv1a, unit } from './tokenizer.js';
import { markedShare } from './vocab.js';

/** Score at zero marked words, before the per-response spread. */
const TOP = 9.2;
/** Points lost per unit of marked share (3% marked → −1.8). */
const SLOPE = 60;
/** Half-width of the deterministic per-response spread. */
const SPREAD = 0.8;
/** Pairwise: scores closer than this are a tie. */
export const TIE_MARGIN = 0.5;

/**
 * Pointwise score of a response: 9.2 − 60 × markedShare(text) + spread, where spread is a
 * uniform value in [−0.8, 0.8] derived from a hash of the text; clamped to [1, 10] and rounded
 * to one decimal.
 */
export function judgeScore(text: string): number {
  const spread = (unit(fmix32(fnv1a(text) ^ 0x1d6e)) * 2 - 1) * SPREAD;
  const raw = TOP - SLOPE * markedShare(text) + spread;
  return Math.round(Math.min(10, Math.max(1, raw)) * 10) / 10;
}

export interface PairwiseVerdict {
  winner: 'A' | 'B' | 'tie';
  score_a: number;
  score_b: number;
}

export function judgePair(a: string, b: string): PairwiseVerdict {
  const sa = judgeScore(a);
  const sb = judgeScore(b);
  const winner = Math.abs(sa - sb) < TIE_MARGIN ? 'tie' : sa > sb ? 'A' : 'B';
  return { winner, score_a: sa, score_b: sb };
}

function between(text: string, tag: string): string | null {
  const open = `<${tag}>`;
  const i = text.indexOf(open);
  if (i < 0) return null;
  const j = text.indexOf(`</${tag}>`, i + open.length);
  if (j < 0) return null;
  return text.slice(i + open.length, j);
}

/**
 * The judge's reply text for a prompt (the text of the user messages). Pairwise tags take
 * precedence over pointwise; a prompt with neither is a 400.
 */
export function judgeReply(prompt: string): string {
  const a = between(prompt, 'response_a');
  const b = between(prompt, 'response_b');
  if (a !== null && b !== null) {
    const v = judgePair(a, b);
    return `{"winner": "${v.winner}", "score_a": ${v.score_a.toFixed(1)}, "score_b": ${v.score_b.toFixed(1)}}`;
  }
  const r = between(prompt, 'response');
  if (r !== null) return `{"score": ${judgeScore(r).toFixed(1)}}`;
  throw new BadRequestError(
    'judge_format',
    'the judge model needs <response>…</response> (pointwise) or <response_a>…</response_a> and <response_b>…</response_b> (pairwise) in a user message',
  );
}
