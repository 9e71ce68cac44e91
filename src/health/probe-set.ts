// Probe sets, pure: the request a probe sends, reading an engine's answer, recording what a healthy
// worker answers from a version's first workers (majority, or a configured reference), and checking
// an answer against the record.
import type { ProbeExpectation, ProbePrompt, ProbeSet } from '../domain/probes.js';
import { ConflictError, UnavailableError, UnprocessableError } from '../errors.js';
import type { ProbeFailureReason } from './machine.js';

/** What one answer to a probe says: the tokens, and where the engine gives them their logprobs and leads over the runner-up. */
export interface ProbeAnswer {
  tokens: string[];
  logprobs: number[] | null;
  /** Per token, its logprob minus the runner-up's (null when the engine sent no alternatives). */
  margins: number[] | null;
}

/** The alternatives asked for per token: the chosen one and the runner-up, whose distance says how reproducible the token is. */
const TOP_N = 2;

/**
 * The body of a probe: `/v1/completions` at temperature 0 with no top-k / top-p, asking for
 * logprobs (vLLM, SGLang and llama.cpp's OpenAI server all take these fields; unknown ones are
 * ignored). Completions, not chat: no chat template between the prompt and the tokens.
 */
export function probeBody(model: string, p: ProbePrompt): Record<string, unknown> {
  return { model, prompt: p.prompt, max_tokens: p.maxTokens, temperature: 0, top_p: 1, top_k: -1, logprobs: TOP_N, stream: false };
}

/** Read an engine's completion answer; a string saying what is wrong when it is not one. */
export function parseAnswer(body: string): ProbeAnswer | string {
  let j: unknown;
  try {
    j = JSON.parse(body);
  } catch {
    return `the answer is not JSON: ${JSON.stringify(body.slice(0, 80))}`;
  }
  const choice = (j as { choices?: unknown[] } | null)?.choices?.[0] as { text?: unknown; logprobs?: unknown } | undefined;
  if (choice === undefined || typeof choice.text !== 'string') return 'the answer has no choices[0].text';
  const lp = choice.logprobs as { tokens?: unknown; token_logprobs?: unknown; top_logprobs?: unknown } | null | undefined;
  if (!lp || !Array.isArray(lp.tokens) || !lp.tokens.every((t) => typeof t === 'string')) {
    // an engine without logprobs: the text is the one token we can compare
    return { tokens: choice.text === '' ? [] : [choice.text], logprobs: null, margins: null };
  }
  const tokens = lp.tokens;
  const logprobs = Array.isArray(lp.token_logprobs) && lp.token_logprobs.length === tokens.length ? lp.token_logprobs.map(Number) : null;
  let margins: number[] | null = null;
  if (Array.isArray(lp.top_logprobs) && lp.top_logprobs.length === tokens.length) {
    margins = (lp.top_logprobs as unknown[]).map((d) => {
      const vs = d && typeof d === 'object' ? Object.values(d as Record<string, unknown>).map(Number) : [];
      vs.sort((a, b) => b - a);
      return vs.length >= 2 ? (vs[0] as number) - (vs[1] as number) : Infinity;
    });
  }
  return { tokens, logprobs: logprobs?.every(Number.isFinite) ? logprobs : null, margins };
}

export interface RecordSettings {
  minMargin: number;
  minTokens: number;
  logprobTolerance: number;
}

export interface ReferenceProbe {
  prompt: string;
  tokens: string[];
}

export interface RecordInput {
  prompts: readonly ProbePrompt[];
  /** worker id → its answer to each prompt, in order (a string: why it did not answer). */
  answers: ReadonlyMap<string, readonly (ProbeAnswer | string)[]>;
  /** Configured reference answers (by prompt) for a version recorded from one worker. */
  reference?: readonly ReferenceProbe[] | undefined;
  settings: RecordSettings;
  now: number;
}

export interface Recorded {
  set: ProbeSet;
  /** Workers whose answer differs from the record: wrong from their first answer. */
  dissenters: { worker: string; prompt: string; detail: string }[];
}

/** Tokens up to the first near-tie (a healthy engine may answer past it otherwise). */
function stableLength(a: ProbeAnswer, minMargin: number): number {
  if (a.margins === null) return a.tokens.length;
  const i = a.margins.findIndex((m) => m < minMargin);
  return i < 0 ? a.tokens.length : i;
}

const key = (tokens: readonly string[]) => JSON.stringify(tokens);

/**
 * The probe set of a version from its workers' answers. With two or more workers a token sequence
 * must be answered by a strict majority (ConflictError `probe_disagreement` otherwise: nobody can
 * tell which is right); with one worker its answer is checked against the reference when one is
 * configured, or taken as it is (basis `single`). Every worker that answered otherwise is a dissenter.
 */
export function recordProbeSet(input: RecordInput): Recorded {
  const { prompts, answers, settings } = input;
  const workers = [...answers.keys()];
  if (workers.length === 0) throw new UnavailableError('probe_record_failed', 'no worker to record the probe set from');
  const probes: ProbeExpectation[] = [];
  const skipped: { prompt: string; why: string }[] = [];
  const dissent = new Map<string, { worker: string; prompt: string; detail: string }>();
  const agreeing = new Set(workers);
  prompts.forEach((p, i) => {
    const got = workers.map((w) => ({ w, a: answers.get(w)?.[i] ?? 'no answer' }));
    const failed = got.filter((g): g is { w: string; a: string } => typeof g.a === 'string');
    if (failed.length * 2 >= got.length) {
      const why = failed.map((f) => `${f.w}: ${f.a}`).join('; ');
      throw new UnavailableError('probe_record_failed', `recording the probe set: prompt ${JSON.stringify(p.prompt)} was not answered: ${why}`);
    }
    const ok = got.filter((g): g is { w: string; a: ProbeAnswer } => typeof g.a !== 'string');
    // compare only what every answer holds reproducibly
    const n = Math.min(...ok.map((g) => stableLength(g.a, settings.minMargin)));
    const ref = input.reference?.find((r) => r.prompt === p.prompt);
    let expected: string[];
    if (ref !== undefined && workers.length === 1) {
      expected = ref.tokens;
    } else {
      const groups = new Map<string, string[]>();
      for (const g of ok) {
        const k = key(g.a.tokens.slice(0, n));
        groups.set(k, [...(groups.get(k) ?? []), g.w]);
      }
      const [best, members] = [...groups.entries()].sort((a, b) => b[1].length - a[1].length)[0] as [string, string[]];
      if (members.length * 2 <= got.length && got.length > 1) {
        const seen = [...groups.entries()].map(([k, ws]) => `${ws.join(', ')} answered ${k}`).join('; ');
        throw new ConflictError(
          'probe_disagreement',
          `the workers disagree on probe ${JSON.stringify(p.prompt)} with no majority (${seen}): pin a probe set or configure a reference`,
        );
      }
      expected = JSON.parse(best) as string[];
    }
    for (const g of got) {
      const a = g.a;
      const matches = typeof a !== 'string' && key(a.tokens.slice(0, expected.length)) === key(expected);
      if (!matches) {
        agreeing.delete(g.w);
        if (!dissent.has(g.w))
          dissent.set(g.w, {
            worker: g.w,
            prompt: p.prompt,
            detail: typeof a === 'string' ? a : `answered ${key(a.tokens.slice(0, expected.length))}, the record is ${key(expected)}`,
          });
      }
    }
    // an engine without logprobs answers one text, not tokens: its length says nothing about reproducibility
    if (expected.length < settings.minTokens && !ok.every((g) => textOnly(g.a))) {
      skipped.push({ prompt: p.prompt, why: `only ${expected.length} token(s) are reproducible (a near-tie follows; ${settings.minTokens} needed)` });
      return;
    }
    const lps = ok.filter((g) => agreeing.has(g.w) && g.a.logprobs !== null).map((g) => g.a.logprobs as number[]);
    const tol = settings.logprobTolerance;
    const logprobs =
      lps.length === 0
        ? null
        : expected.map((_, t) => {
            const xs = lps.map((l) => l[t] as number);
            return { min: Math.min(...xs) - tol, max: Math.min(0, Math.max(...xs) + tol) };
          });
    probes.push({ prompt: p.prompt, maxTokens: p.maxTokens, tokens: expected, logprobs });
  });
  if (probes.length === 0) {
    throw new UnprocessableError(
      'probe_set_empty',
      `no probe prompt has ${settings.minTokens} reproducible tokens: ${skipped.map((s) => `${JSON.stringify(s.prompt)}: ${s.why}`).join('; ')}`,
    );
  }
  const basis = workers.length > 1 ? 'majority' : input.reference?.length ? 'reference' : 'single';
  return {
    set: { probes, basis, recordedAt: input.now, from: workers.filter((w) => agreeing.has(w)), pinned: false, skipped },
    dissenters: [...dissent.values()],
  };
}

export type CheckResult = { ok: true } | { ok: false; reason: Extract<ProbeFailureReason, 'token_mismatch' | 'logprob_drift'>; detail: string };

/** An answer without per-token detail (an engine that gives no logprobs): its text is compared, not its tokens. */
function textOnly(a: ProbeAnswer): boolean {
  return a.logprobs === null && a.margins === null;
}

/** Does an answer match the record? Tokens first (a prefix of the answer), then each token's logprob. */
export function checkAnswer(e: ProbeExpectation, a: ProbeAnswer): CheckResult {
  if (textOnly(a) || e.logprobs === null) {
    const want = e.tokens.join('');
    const got = a.tokens.join('');
    if (got.startsWith(want)) return { ok: true };
    return {
      ok: false,
      reason: 'token_mismatch',
      detail: `answered ${JSON.stringify(got.slice(0, want.length + 20))}, the record says ${JSON.stringify(want)}`,
    };
  }
  for (let i = 0; i < e.tokens.length; i++) {
    const w = e.tokens[i] as string;
    const g = a.tokens[i];
    if (g === undefined) return { ok: false, reason: 'token_mismatch', detail: `answered ${i} token(s) where ${e.tokens.length} were recorded` };
    if (g !== w) return { ok: false, reason: 'token_mismatch', detail: `token ${i + 1} is ${JSON.stringify(g)}, the record says ${JSON.stringify(w)}` };
  }
  if (a.logprobs !== null) {
    for (let i = 0; i < e.logprobs.length; i++) {
      const r = e.logprobs[i] as { min: number; max: number };
      const lp = a.logprobs[i] as number;
      if (lp < r.min || lp > r.max) {
        return {
          ok: false,
          reason: 'logprob_drift',
          detail: `token ${i + 1} (${JSON.stringify(e.tokens[i])}) has logprob ${lp.toFixed(3)}, outside the recorded [${r.min.toFixed(3)}, ${r.max.toFixed(3)}]`,
        };
      }
    }
  }
  return { ok: true };
}
