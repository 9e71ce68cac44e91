// The simulator's vocabulary: ordinary words, punctuation, and the marked ("hallucinated") words.
//
// Marked-word rule (documented in docs/simulator.md): a word is marked when it consists only of
// ASCII letters and ends in "qz" (case-insensitive), e.g. "bravqz". No ordinary word does, and
// English text practically never does, so `markedShare` can measure hallucination in any text.
import { fnv1a, tokenize, wordOf } from './tokenizer.js';

const WORDS = `the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when if can more will
other so what some into them time only could new these two may first then do any like my now over
such our man me even most made after also did many before must through back years where much your
way well down should because each just those people how too little state good very make world still
own see men work long get here between both life being under never day same another know while last
might us great old year off come since against go came right used take three states himself few house
use during without again place american around however home small found thought went say part once
general high upon school every does got united left number course war until always away something
fact though water less public put think almost hand enough far took head yet government system better
set told nothing night end why called didn find look going asked later knew point next program city
business give group toward young days let room president side social given present several order
national possible rather second face per among form important often things looked early white case
large become big need four within felt along children saw best church ever least power development
light thing seemed family interest want members mind country area others although turned done open god
service certain kind problem began different door thus help sense means whole matter perhaps itself
york times human law line above name example action company hands local show whether five history gave
today either act feet across taken past quite anything seen having death experience body word half
really field am car words already themselves information tell together college shall money period held
keep sure probably free seems political real behind cannot miss question air office making brought
whose special major heard federal became study ago moment known result street economic boy position
reason change south board individual job society areas west close turn love community true court
force full seem am market model version token cache worker queue stream prompt signal layer weight
river mountain garden window letter music paper story answer reading bright quiet gentle careful
simple clear steady ready morning evening summer winter autumn spring forest valley ocean island`
  .split(/\s+/)
  .filter((w, i, all) => w.length > 0 && all.indexOf(w) === i);

const PUNCT = [',', '.', ',', '.', ';', ':'];

const SYLLABLES = ['bra', 'clo', 'dri', 'fen', 'glo', 'hax', 'jin', 'kel', 'lum', 'mor', 'nev', 'pol', 'riv', 'sul', 'tor', 'vex'];
const ENDINGS = ['a', 'o', 'e', 'i'];

/** Marked vocabulary: syllable + ending + "qz" (64 words). */
export const MARKED_WORDS: readonly string[] = SYLLABLES.flatMap((s) => ENDINGS.map((e) => `${s}${e}qz`));

/** Ordinary generated tokens: words with a leading space, punctuation without. */
export const NORMAL_TOKENS: readonly string[] = [...WORDS.map((w) => ` ${w}`), ...PUNCT];

/** Marked generated tokens (each with a leading space). */
export const MARKED_TOKENS: readonly string[] = MARKED_WORDS.map((w) => ` ${w}`);

/** Word hashes of the tokens, precomputed so generation never hashes strings. */
export const NORMAL_HASHES: Uint32Array = Uint32Array.from(NORMAL_TOKENS, (t) => fnv1a(wordOf(t)));
export const MARKED_HASHES: Uint32Array = Uint32Array.from(MARKED_TOKENS, (t) => fnv1a(wordOf(t)));

/** JSON string literals of the tokens (with quotes), precomputed for the streaming fast path. */
export const NORMAL_JSON: readonly string[] = NORMAL_TOKENS.map((t) => JSON.stringify(t));
export const MARKED_JSON: readonly string[] = MARKED_TOKENS.map((t) => JSON.stringify(t));

const MARKED_RE = /^[A-Za-z]+[qQ][zZ]$/;
const WORD_RE = /^[\p{L}\p{N}_]+$/u;

/** Whether a word (no whitespace) is marked by the documented rule. */
export function isMarkedWord(word: string): boolean {
  return MARKED_RE.test(word);
}

/** Share of words in `text` that are marked (0 when the text has no words). Punctuation is not a word. */
export function markedShare(text: string): number {
  let words = 0;
  let marked = 0;
  for (const tok of tokenize(text)) {
    const w = wordOf(tok);
    if (!WORD_RE.test(w)) continue;
    words++;
    if (isMarkedWord(w)) marked++;
  }
  return words === 0 ? 0 : marked / words;
}
