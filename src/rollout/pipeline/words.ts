// Command words for pipeline steps: splitting a command into argv without a shell, `$NAME` /
// `${NAME}` variables, and durations such as `30s`.

/** A piece of one word; `expand` is false for single-quoted or backslash-escaped text. */
interface Part {
  text: string;
  expand: boolean;
}
type Word = Part[];

/** A problem in a command's text; `at` is the 0-based offset in the text. */
export class WordError extends Error {
  constructor(
    message: string,
    readonly at: number,
  ) {
    super(message);
    this.name = 'WordError';
  }
}

const OPERATORS = new Set(['|', '&', ';', '<', '>', '`']);
const NAME_START = /[A-Za-z_]/;
const NAME_CHAR = /[A-Za-z0-9_]/;

/**
 * Split like a POSIX shell would into words, without running one: whitespace separates words,
 * '…' is literal, "…" groups (with \" \\ \$ escapes), \x escapes one character. Pipes,
 * redirections, `;`, `&` and backticks are refused rather than passed on as literal arguments,
 * because a reader of the YAML would expect a shell to act on them.
 */
function splitWords(text: string): Word[] {
  const words: Word[] = [];
  let cur: Word | undefined;
  const push = (t: string, expand: boolean) => {
    cur ??= [];
    const last = cur[cur.length - 1];
    if (last && last.expand === expand) last.text += t;
    else cur.push({ text: t, expand });
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      if (cur) words.push(cur);
      cur = undefined;
      i++;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new WordError("unterminated single quote (')", i);
      push(text.slice(i + 1, end), false);
      i = end + 1;
    } else if (c === '"') {
      const start = i;
      i++;
      cur ??= [];
      for (;;) {
        if (i >= text.length) throw new WordError('unterminated double quote (")', start);
        const d = text[i] as string;
        if (d === '"') break;
        if (d === '\\' && i + 1 < text.length && '"\\$'.includes(text[i + 1] as string)) {
          push(text[i + 1] as string, false);
          i += 2;
        } else {
          push(d, true);
          i++;
        }
      }
      i++;
    } else if (c === '\\') {
      if (i + 1 >= text.length) throw new WordError('a backslash at the end of the command escapes nothing', i);
      push(text[i + 1] as string, false);
      i += 2;
    } else if (OPERATORS.has(c)) {
      throw new WordError(
        `shell syntax ${JSON.stringify(c)} is not supported: run steps execute without a shell (quote it to pass it as an argument, or use \`sh -c '…'\`)`,
        i,
      );
    } else {
      push(c, true);
      i++;
    }
  }
  if (cur) words.push(cur);
  return words;
}

/** A variable reference found in expandable text. */
export interface VarRef {
  name: string;
  /** 0-based offset of the `$` within the part's text. */
  at: number;
}

/**
 * Expand `$NAME`, `${NAME}` and `$$` in one piece of text. `lookup` returns undefined for an unset
 * name; every unset name is reported through `missing` and left as written.
 */
function expandText(text: string, lookup: (name: string) => string | undefined, missing: (ref: VarRef) => void): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c !== '$') {
      out += c;
      i++;
      continue;
    }
    const n = text[i + 1];
    if (n === '$') {
      out += '$';
      i += 2;
    } else if (n === '(') {
      throw new WordError('command substitution $(…) is not supported: run steps execute without a shell', i);
    } else if (n === '{') {
      const end = text.indexOf('}', i + 2);
      if (end < 0) throw new WordError('"${" without a closing "}"', i);
      const name = text.slice(i + 2, end);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new WordError(`invalid variable name ${JSON.stringify(name)} in \${…}`, i);
      const v = lookup(name);
      if (v === undefined) missing({ name, at: i });
      out += v ?? text.slice(i, end + 1);
      i = end + 1;
    } else if (n !== undefined && NAME_START.test(n)) {
      let j = i + 1;
      while (j < text.length && NAME_CHAR.test(text[j] as string)) j++;
      const name = text.slice(i + 1, j);
      const v = lookup(name);
      if (v === undefined) missing({ name, at: i });
      out += v ?? text.slice(i, j);
      i = j;
    } else {
      // a lone `$` (e.g. "costs $5") is literal, as in a shell
      out += '$';
      i++;
    }
  }
  return out;
}

export type Lookup = (name: string) => string | undefined;

/** Split a command into argv and expand variables in each word; a value never splits a word. */
export function commandArgv(text: string, lookup: Lookup): { argv: string[]; missing: string[] } {
  const missing: string[] = [];
  const argv = splitWords(text).map((w) => w.map((p) => (p.expand ? expandText(p.text, lookup, (r) => missing.push(r.name)) : p.text)).join(''));
  if (argv.length === 0) throw new WordError('empty command', 0);
  return { argv, missing: [...new Set(missing)] };
}

/** Expand variables in a plain string (not a command): no splitting, no quotes. */
export function expandString(text: string, lookup: Lookup): { value: string; missing: string[] } {
  const missing: string[] = [];
  const value = expandText(text, lookup, (r) => missing.push(r.name));
  return { value, missing: [...new Set(missing)] };
}

/** Quote argv back into one line that a POSIX shell would split into the same words. */
export function renderArgv(argv: readonly string[]): string {
  return argv.map((a) => (a !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `500ms`, `30s`, `5m`, `1h` (also `1.5s`) → milliseconds; undefined when malformed. */
export function parseDuration(s: string): number | undefined {
  const m = DURATION.exec(s.trim());
  if (!m) return undefined;
  const ms = Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  return Number.isFinite(ms) && ms > 0 ? Math.round(ms) : undefined;
}

/** The shortest exact rendering of a duration: 90000 → `90s`, 300000 → `5m`. */
export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
