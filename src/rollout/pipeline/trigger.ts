// The rollback trigger language: `metric op value [unit]` joined by AND / OR / NOT with
// parentheses; a hand-written tokenizer and recursive-descent parser, normalised printing, and
// three-valued evaluation (a comparison without data is unknown, and unknown never fires).

export type MetricName = 'error_rate' | 'p99_latency' | 'p50_latency' | 'p99_ttft' | 'p99_tpot' | 'requests';
export type Scope = 'active' | 'canary' | 'stable';
export type Op = '>' | '>=' | '<' | '<=' | '==' | '!=';

/** How a metric's value is written: a ratio (fraction or %), a time (ms, s) or a count. */
const METRICS: Record<MetricName, 'ratio' | 'time' | 'count'> = {
  error_rate: 'ratio',
  p99_latency: 'time',
  p50_latency: 'time',
  p99_ttft: 'time',
  p99_tpot: 'time',
  requests: 'count',
};
export const METRIC_NAMES = Object.keys(METRICS) as MetricName[];
const OPS: readonly Op[] = ['>=', '<=', '==', '!=', '>', '<'];

export type Trigger =
  | { kind: 'cmp'; scope: Scope; metric: MetricName; op: Op; value: number; column: number }
  | { kind: 'and' | 'or'; left: Trigger; right: Trigger }
  | { kind: 'not'; expr: Trigger };

/** A parse error at a 1-based column of the expression. */
export class TriggerError extends Error {
  constructor(
    readonly column: number,
    readonly reason: string,
  ) {
    super(`column ${column}: ${reason}`);
    this.name = 'TriggerError';
  }
}

type TokKind = 'word' | 'num' | 'op' | 'lp' | 'rp' | 'pct' | 'end';
interface Tok {
  kind: TokKind;
  text: string;
  /** 1-based column. */
  col: number;
}

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] as string;
    const col = i + 1;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const rest = src.slice(i);
    const num = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?/.exec(rest);
    const word = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(rest);
    const op = OPS.find((o) => rest.startsWith(o));
    if (num) out.push({ kind: 'num', text: num[0], col });
    else if (word) out.push({ kind: 'word', text: word[0], col });
    else if (op) out.push({ kind: 'op', text: op, col });
    else if (c === '(' || c === ')') out.push({ kind: c === '(' ? 'lp' : 'rp', text: c, col });
    else if (c === '%') out.push({ kind: 'pct', text: c, col });
    else if (rest.startsWith('&&') || rest.startsWith('||'))
      throw new TriggerError(col, `"${rest.slice(0, 2)}" is not an operator here; write ${c === '&' ? 'AND' : 'OR'}`);
    else if (c === '=') throw new TriggerError(col, `"=" is not an operator; write "==" to compare for equality`);
    else if (c === '!') throw new TriggerError(col, `"!" is not an operator here; write NOT, or "!=" to compare`);
    else throw new TriggerError(col, `unexpected character ${JSON.stringify(c)}`);
    i += (num?.[0] ?? word?.[0] ?? op ?? c).length;
  }
  out.push({ kind: 'end', text: '', col: src.length + 1 });
  return out;
}

const describe = (t: Tok): string => (t.kind === 'end' ? 'the end of the expression' : JSON.stringify(t.text));
const isKw = (t: Tok, kw: string): boolean => t.kind === 'word' && t.text.toUpperCase() === kw;

class Parser {
  private i = 0;
  private readonly toks: Tok[];
  constructor(src: string) {
    this.toks = tokenize(src);
  }
  private peek(): Tok {
    return this.toks[this.i] as Tok;
  }
  private next(): Tok {
    const t = this.peek();
    if (t.kind !== 'end') this.i++;
    return t;
  }

  parse(): Trigger {
    if (this.peek().kind === 'end') throw new TriggerError(1, 'empty expression; expected a comparison such as "error_rate > 0.001"');
    const e = this.or();
    const t = this.peek();
    if (t.kind === 'rp') throw new TriggerError(t.col, `unexpected ")" with no "(" to close`);
    if (t.kind !== 'end') throw new TriggerError(t.col, `expected AND, OR or the end of the expression, got ${describe(t)}`);
    return e;
  }
  private or(): Trigger {
    let left = this.and();
    while (isKw(this.peek(), 'OR')) {
      this.next();
      left = { kind: 'or', left, right: this.and() };
    }
    return left;
  }
  private and(): Trigger {
    let left = this.unary();
    while (isKw(this.peek(), 'AND')) {
      this.next();
      left = { kind: 'and', left, right: this.unary() };
    }
    return left;
  }
  private unary(): Trigger {
    if (isKw(this.peek(), 'NOT')) {
      this.next();
      return { kind: 'not', expr: this.unary() };
    }
    const t = this.peek();
    if (t.kind === 'lp') {
      this.next();
      const e = this.or();
      const close = this.peek();
      if (close.kind !== 'rp') throw new TriggerError(close.col, `expected ")" to close the "(" at column ${t.col}, got ${describe(close)}`);
      this.next();
      return e;
    }
    return this.comparison();
  }
  private comparison(): Trigger {
    const t = this.next();
    if (t.kind !== 'word' || ['AND', 'OR', 'NOT'].includes(t.text.toUpperCase())) {
      throw new TriggerError(t.col, `expected a metric (${METRIC_NAMES.join(', ')}), got ${describe(t)}`);
    }
    const dot = t.text.indexOf('.');
    let scope: Scope = 'active';
    let name = t.text;
    if (dot >= 0) {
      const s = t.text.slice(0, dot);
      if (s !== 'canary' && s !== 'stable') throw new TriggerError(t.col, `unknown prefix "${s}."; expected "canary." or "stable."`);
      scope = s;
      name = t.text.slice(dot + 1);
    }
    if (!(name in METRICS)) {
      throw new TriggerError(t.col + (dot + 1), `unknown metric ${JSON.stringify(name)}; expected one of ${METRIC_NAMES.join(', ')}`);
    }
    const metric = name as MetricName;
    const opTok = this.next();
    if (opTok.kind !== 'op') throw new TriggerError(opTok.col, `expected a comparison operator (>, >=, <, <=, ==, !=) after ${t.text}, got ${describe(opTok)}`);
    const numTok = this.next();
    if (numTok.kind !== 'num') throw new TriggerError(numTok.col, `expected a number after '${opTok.text}', got ${describe(numTok)}`);
    const value = this.unit(metric, Number(numTok.text), numTok);
    return { kind: 'cmp', scope, metric, op: opTok.text as Op, value, column: t.col };
  }
  /** Read an optional unit and convert to the canonical one (ms, fraction, count). */
  private unit(metric: MetricName, n: number, numTok: Tok): number {
    const kind = METRICS[metric];
    const u = this.peek();
    // a word right after the number is its unit unless it starts the next comparison
    const isUnitWord = u.kind === 'word' && !['AND', 'OR', 'NOT'].includes(u.text.toUpperCase()) && !u.text.includes('.') && !(u.text in METRICS);
    const unit = u.kind === 'pct' ? '%' : isUnitWord ? u.text : undefined;
    if (unit === undefined) return n;
    this.next();
    if (kind === 'time' && (unit === 'ms' || unit === 's')) return tidy(unit === 's' ? n * 1000 : n);
    if (kind === 'ratio' && unit === '%') return tidy(n / 100);
    const allowed = kind === 'time' ? 'ms or s (no unit means ms)' : kind === 'ratio' ? '% (or a fraction such as 0.001 without a unit)' : 'none (a count)';
    const what = ['ms', 's', '%'].includes(unit) ? `unit ${unit} does not apply to ${metric}` : `unknown unit ${JSON.stringify(unit)} after ${numTok.text}`;
    throw new TriggerError(u.col, `${what}; units for ${metric}: ${allowed}`);
  }
}

/** Drop binary floating-point noise from a unit conversion (0.1% → 0.001, not 0.0010000000000000002). */
function tidy(x: number): number {
  return Number(x.toPrecision(12));
}

export function parseTrigger(src: string): Trigger {
  return new Parser(src).parse();
}

const PREC = { or: 1, and: 2, not: 3, cmp: 4 } as const;

/** The canonical form: canonical units, upper-case keywords, parentheses only where needed. */
export function formatTrigger(t: Trigger, parent = 0): string {
  let s: string;
  if (t.kind === 'cmp') {
    const name = t.scope === 'active' ? t.metric : `${t.scope}.${t.metric}`;
    const v = METRICS[t.metric] === 'time' ? `${t.value}ms` : String(t.value);
    s = `${name} ${t.op} ${v}`;
  } else if (t.kind === 'not') s = `NOT ${formatTrigger(t.expr, PREC.not)}`;
  else s = `${formatTrigger(t.left, PREC[t.kind])} ${t.kind.toUpperCase()} ${formatTrigger(t.right, PREC[t.kind] + 1)}`;
  return PREC[t.kind] < parent ? `(${s})` : s;
}

/** Measured values of one version; undefined or NaN means no data. */
export type MetricValues = Partial<Record<MetricName, number | null>>;
export type TriggerStats = Partial<Record<Scope, MetricValues>>;

type Tri = boolean | 'unknown';
export interface Check {
  expr: string;
  value: number | null;
  result: Tri;
  reason?: string;
}
export interface Evaluation {
  fired: boolean;
  result: Tri;
  /** Every comparison with the value it saw, in source order. */
  checks: Check[];
  /** One line for humans: what fired, or why nothing did. */
  summary: string;
}

function compare(a: number, op: Op, b: number): boolean {
  switch (op) {
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '==':
      return a === b;
    case '!=':
      return a !== b;
  }
}

/** Kleene logic: unknown AND false is false, unknown OR true is true, NOT unknown is unknown. */
export function evaluateTrigger(t: Trigger, stats: TriggerStats): Evaluation {
  const checks: Check[] = [];
  const ev = (n: Trigger): Tri => {
    if (n.kind === 'cmp') {
      const expr = formatTrigger(n);
      const v = stats[n.scope]?.[n.metric];
      if (v === undefined || v === null || Number.isNaN(v)) {
        const reason =
          stats[n.scope] === undefined ? `no ${n.scope} version to measure` : `no data for ${n.scope === 'active' ? '' : `${n.scope}.`}${n.metric}`;
        checks.push({ expr, value: null, result: 'unknown', reason });
        return 'unknown';
      }
      const r = compare(v, n.op, n.value);
      checks.push({ expr, value: v, result: r });
      return r;
    }
    if (n.kind === 'not') {
      const r = ev(n.expr);
      return r === 'unknown' ? r : !r;
    }
    const l = ev(n.left);
    const r = ev(n.right);
    if (n.kind === 'and') return l === false || r === false ? false : l === true && r === true ? true : 'unknown';
    return l === true || r === true ? true : l === false && r === false ? false : 'unknown';
  };
  const result = ev(t);
  const shown = (c: Check) => `${c.expr} (${c.value === null ? c.reason : `measured ${c.value}`})`;
  const summary =
    result === true
      ? `fired: ${checks
          .filter((c) => c.result === true)
          .map(shown)
          .join('; ')}`
      : result === 'unknown'
        ? `not fired, no data: ${checks
            .filter((c) => c.result === 'unknown')
            .map(shown)
            .join('; ')}`
        : 'not fired';
  return { fired: result === true, result, checks, summary };
}
