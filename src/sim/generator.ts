// Token generation: a pure, autoregressive function of (version key, context hash, sampling).
//
// Next token = f(version key, rolling hash of every context token so far). Generation never
// looks at positions or request ids, so continuing a prompt with its first k generated tokens
// reaches the same hash and yields exactly the remaining tokens; EOS is drawn from the same hash
// and lands at the same place. temperature > 0 samples with a value derived from (request seed,
// context hash), so a seeded request continues exactly as well.
import { DEFAULTS } from '../defaults.js';
import { fmix32, fnv1a, roll, unit } from './tokenizer.js';
import { MARKED_HASHES, MARKED_JSON, MARKED_TOKENS, NORMAL_HASHES, NORMAL_JSON, NORMAL_TOKENS } from './vocab.js';

const N = NORMAL_TOKENS.length;
const M = MARKED_TOKENS.length;
/** Token ids: 0..N-1 are ordinary tokens, N..N+M-1 marked ones. */
const ALL_TOKENS: readonly string[] = [...NORMAL_TOKENS, ...MARKED_TOKENS];
const ALL_JSON: readonly string[] = [...NORMAL_JSON, ...MARKED_JSON];
const ALL_HASHES = Uint32Array.from([...NORMAL_HASHES, ...MARKED_HASHES]);

const EOS_SALT = 0x0e05e05;
const HALL_SALT = 0x4a11c;
const LP_SALT = 0x10b9;
const SAMPLE_SALT = 0x5a3b1e;
const CORRUPT_KEY = 0xbadc0de5;

export interface TopLogprob {
  token: string;
  logprob: number;
}

export interface GenRequest {
  /** `versionKey(seed, model, adapter)`. */
  key: number;
  /** Rolling hash of the prompt context (`hashContext(renderedPrompt).hash`). */
  context: number;
  maxTokens: number;
  minTokens?: number;
  ignoreEos?: boolean;
  temperature?: number;
  /** The request's `seed`; required for deterministic output when temperature > 0. */
  sampleSeed?: number;
  /** -1 (default): no logprobs; 0..20: chosen token's logprob plus that many alternatives. */
  topLogprobs?: number;
  hallucinationRate?: number;
  eosRate?: number;
  /** Silent corruption: wrong tokens and logprobs shifted down, reported as a normal success. */
  corrupt?: boolean;
  /** Subtle corruption: logprobs shifted down by this many nats, the same tokens. */
  logprobDrift?: number;
  stop?: readonly string[];
}

export interface Generated {
  /** Text of each emitted token (the last one cut short when a stop string matched inside it). */
  tokens: string[];
  /** JSON string literal of each entry of `tokens`. */
  json: string[];
  /** Tokens generated, including one cut by a stop string (what usage counts). */
  count: number;
  logprobs: number[] | null;
  top: TopLogprob[][] | null;
  finish: 'stop' | 'length';
  /** The stop string that ended generation, when one did. */
  stopReason: string | null;
}

/** The key that makes a version's text its own. */
export function versionKey(seed: number, model: string, adapter?: string): number {
  return fnv1a(`${seed}\u0000${model}\u0000${adapter ?? ''}`);
}

function candidate(s: number, j: number, hallucinationRate: number): number {
  const sj = fmix32(s + Math.imul(j + 1, 0x9e3779b9));
  if (j === 0 && unit(fmix32(s ^ HALL_SALT)) < hallucinationRate) return N + (sj % M);
  return sj % N;
}

/** Up to `n` distinct candidate ids with descending logprobs for step hash `s`. */
function candidates(s: number, n: number, hallucinationRate: number, shift: number): { ids: number[]; lps: number[] } {
  const ids: number[] = [];
  const lps: number[] = [];
  let lp = -(0.01 + DEFAULTS.sim.maxTopLogprobDepth * unit(fmix32(s ^ LP_SALT))) - shift;
  for (let j = 0; ids.length < n && j < n * 4; j++) {
    const id = candidate(s, j, hallucinationRate);
    if (ids.includes(id)) continue;
    if (ids.length > 0) lp -= 0.25 + 1.75 * unit(fmix32(id ^ s ^ LP_SALT));
    ids.push(id);
    lps.push(lp);
  }
  return { ids, lps };
}

/** Generate tokens; pure and deterministic for a given request. */
export function generate(r: GenRequest): Generated {
  const key = r.corrupt ? (r.key ^ CORRUPT_KEY) >>> 0 : r.key;
  // a shift moves every candidate alike: the ranking, so the tokens, stay the same
  const shift = (r.corrupt ? DEFAULTS.sim.corruptLogprobShift : 0) + (r.logprobDrift ?? 0);
  const hall = r.hallucinationRate ?? DEFAULTS.sim.hallucinationRate;
  const eosRate = r.ignoreEos ? 0 : (r.eosRate ?? DEFAULTS.sim.eosRate);
  const minTokens = r.minTokens ?? 0;
  const temperature = r.temperature ?? 0;
  const topN = r.topLogprobs ?? -1;
  const wantLp = topN >= 0;
  const sampling = temperature > 0;
  const nCand = Math.max(sampling ? DEFAULTS.sim.sampleCandidates : 1, topN, 1);
  const seedHash = fmix32((r.sampleSeed ?? 0) ^ SAMPLE_SALT);
  const stops = r.stop ?? [];
  const stopLen = maxLen(stops);

  const tokens: string[] = [];
  const json: string[] = [];
  const logprobs: number[] | null = wantLp ? [] : null;
  const top: TopLogprob[][] | null = wantLp ? [] : null;
  let h = r.context;
  let finish: Generated['finish'] = 'length';
  let text = '';

  for (let step = 0; step < r.maxTokens; step++) {
    const s = fmix32(h ^ key);
    if (eosRate > 0 && step >= minTokens && unit(fmix32(s ^ EOS_SALT)) < eosRate) {
      finish = 'stop';
      break;
    }
    let id: number;
    let lp = 0;
    if (!sampling && !wantLp) {
      id = candidate(s, 0, hall);
    } else {
      const c = candidates(s, nCand, hall, shift);
      let pick = 0;
      if (sampling) {
        const k = Math.min(DEFAULTS.sim.sampleCandidates, c.ids.length);
        let total = 0;
        for (let j = 0; j < k; j++) total += Math.exp((c.lps[j] ?? 0) / temperature);
        let u = unit(fmix32(h ^ seedHash)) * total;
        for (pick = 0; pick < k - 1; pick++) {
          u -= Math.exp((c.lps[pick] ?? 0) / temperature);
          if (u < 0) break;
        }
      }
      id = c.ids[pick] ?? 0;
      lp = c.lps[pick] ?? 0;
      if (logprobs && top) {
        logprobs.push(lp);
        const alts: TopLogprob[] = [];
        for (let j = 0; j < topN; j++) alts.push({ token: ALL_TOKENS[c.ids[j] ?? 0] ?? '', logprob: c.lps[j] ?? 0 });
        top.push(alts);
      }
    }
    const tok = ALL_TOKENS[id] ?? '';
    tokens.push(tok);
    json.push(ALL_JSON[id] ?? '""');
    h = roll(h, ALL_HASHES[id] ?? 0);
    if (stops.length > 0) {
      const before = text.length;
      text += tok;
      const cut = findStop(text, stops, Math.max(0, before - stopLen + 1));
      if (cut) {
        trimTo(tokens, json, text.slice(0, cut.index));
        if (logprobs) logprobs.length = tokens.length;
        if (top) top.length = tokens.length;
        return { tokens, json, count: step + 1, logprobs, top, finish: 'stop', stopReason: cut.stop };
      }
    }
  }
  return { tokens, json, count: tokens.length, logprobs, top, finish, stopReason: null };
}

function maxLen(stops: readonly string[]): number {
  let m = 0;
  for (const s of stops) m = Math.max(m, s.length);
  return m;
}

function findStop(text: string, stops: readonly string[], from: number): { index: number; stop: string } | null {
  let best: { index: number; stop: string } | null = null;
  for (const stop of stops) {
    const i = text.indexOf(stop, from);
    if (i >= 0 && (best === null || i < best.index)) best = { index: i, stop };
  }
  return best;
}

/** Make the token texts add up to `keepText` exactly: cut the token where it ends, drop the rest. */
function trimTo(tokens: string[], json: string[], keepText: string): void {
  let acc = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] ?? '';
    if (acc + t.length >= keepText.length) {
      const part = keepText.slice(acc);
      tokens[i] = part;
      json[i] = JSON.stringify(part);
      tokens.length = i + 1;
      json.length = i + 1;
      return;
    }
    acc += t.length;
  }
}

/** Emit a fixed token sequence (the judge's reply) under the same result shape. */
export function fixedTokens(toks: readonly string[], maxTokens: number, topLogprobs = -1): Generated {
  const tokens = toks.slice(0, maxTokens);
  const wantLp = topLogprobs >= 0;
  return {
    tokens,
    json: tokens.map((t) => JSON.stringify(t)),
    count: tokens.length,
    logprobs: wantLp ? tokens.map(() => -0.01) : null,
    top: wantLp ? tokens.map((t) => (topLogprobs > 0 ? [{ token: t, logprob: -0.01 }] : [])) : null,
    finish: toks.length > maxTokens ? 'length' : 'stop',
    stopReason: null,
  };
}
