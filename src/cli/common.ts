// What every admin verb shares: the common options (--url --token --data-dir --output --model),
// the default model, strict flag parsing and the human formats (times, GPU ranges, durations).
import type { Command } from 'commander';
import { AdminClient } from './client.js';
import { UsageError, parseOutput } from './output.js';
import { parseDuration } from '../rollout/pipeline/words.js';
import { DEFAULTS } from '../defaults.js';
import type { OutputFormat } from './output.js';

export interface CommonOptions {
  url?: string;
  token?: string;
  dataDir?: string;
  output: string;
  model?: string;
}

/** Add the common options to a verb. `model` false for verbs that do not act on one model. */
export function withCommon(cmd: Command, opts: { model?: 'one' | 'filter' | false } = {}): Command {
  cmd
    .option('--url <url>', 'admin API base URL (default $GLIDEPATH_URL or http://127.0.0.1:8081)')
    .option('--token <token>', 'bearer token (default $GLIDEPATH_TOKEN, else <data dir>/admin-token)')
    .option('--data-dir <dir>', 'where to find admin-token (default $GLIDEPATH_DATA_DIR or .glidepath)')
    .option('-o, --output <format>', 'table or json', 'table');
  if (opts.model === 'one') cmd.option('-m, --model <name>', 'model to act on (default: the only model, when there is one)');
  if (opts.model === 'filter') cmd.option('-m, --model <name>', 'only this model (default: all)');
  return cmd;
}

export interface Session {
  client: AdminClient;
  output: OutputFormat;
  json: boolean;
}

/** Validate the common options (usage errors before any network call) and build the client. */
export function session(o: CommonOptions): Session {
  const output = parseOutput(o.output);
  const client = new AdminClient({ url: o.url, token: o.token, dataDir: o.dataDir });
  return { client, output, json: output === 'json' };
}

interface StatusModels {
  models: { model: string }[];
}

/** The model a verb acts on: --model, else the only model the fleet has; several → a usage error. */
export async function resolveModel(s: Session, given: string | undefined): Promise<string> {
  if (given !== undefined) {
    if (given.trim() === '') throw new UsageError('--model: expected a model name, got an empty string');
    return given;
  }
  const st = await s.client.get<StatusModels>('/status');
  const names = st.models.map((m) => m.model);
  if (names.length === 1) return names[0] as string;
  throw new UsageError(`--model is required: this fleet serves ${names.length} models (${names.join(', ')})`);
}

export const enc = encodeURIComponent;

/** A path under /models/:model. */
export function modelPath(model: string, rest = ''): string {
  return `/models/${enc(model)}${rest}`;
}

const NUM_RE = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** Strict integer flag: a bad value is a usage error naming the flag. */
export function intFlag(flag: string, v: string | undefined, min = 1): number | undefined {
  if (v === undefined) return undefined;
  const n = NUM_RE.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < min) throw new UsageError(`${flag} must be ${min >= 1 ? 'a positive' : 'a non-negative'} integer, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * A period or wait in ms (`--interval`, `--drain-timeout`): a positive integer up to a day
 * (DEFAULTS.durations.maxIntervalMs). Past 2^31 - 1 ms Node's timer fires after 1 ms: a watch would poll every ms.
 */
export function msFlag(flag: string, v: string | undefined): number | undefined {
  const n = intFlag(flag, v);
  const max = DEFAULTS.durations.maxIntervalMs;
  if (n !== undefined && n > max) throw new UsageError(`${flag} must be at most ${max} ms (a day), got ${JSON.stringify(v)}`);
  return n;
}

/** A number from 0 to 1 (`--shadow-share`); an empty value is no number. */
export function fractionFlag(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = NUM_RE.test(v.trim()) ? Number(v) : NaN;
  if (!(n >= 0 && n <= 1)) throw new UsageError(`${flag} must be a number from 0 to 1, got ${JSON.stringify(v)}`);
  return n;
}

/** One of a fixed set of values. */
export function choiceFlag<T extends string>(flag: string, v: string | undefined, choices: readonly T[]): T | undefined {
  if (v === undefined) return undefined;
  if ((choices as readonly string[]).includes(v)) return v as T;
  throw new UsageError(`${flag} must be one of ${choices.join(', ')}, got ${JSON.stringify(v)}`);
}

/** A non-empty string flag. */
export function textFlag(flag: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v.trim() === '') throw new UsageError(`${flag}: expected a value, got an empty string`);
  return v;
}

/**
 * A positive duration flag: `500ms`, `30s`, `5m`, `1h` (the pipeline's duration syntax), from 1 ms
 * (a shorter one, `0.4ms`, would round to 0: refused rather than dropped) to the longest a timer waits
 * (DEFAULTS.durations.timerMaxMs, ~24.8 days: past it Node fires after 1 ms).
 */
export function durationFlag(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const ms = parseDuration(v);
  if (ms === undefined) throw new UsageError(`${flag}: expected a duration such as 500ms, 30s, 5m or 1h, got ${JSON.stringify(v)}`);
  if (ms < 1) throw new UsageError(`${flag}: expected a duration of at least 1ms, got ${JSON.stringify(v)}`);
  const max = DEFAULTS.durations.timerMaxMs;
  if (ms > max) throw new UsageError(`${flag}: expected a duration of at most ${max} ms (~24.8 days, the longest a timer waits), got ${JSON.stringify(v)}`);
  return ms;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A point in time for --since/--until: epoch ms, an ISO date, or a duration ago (`90s`, `15m`,
 * `2h`, `7d`). Returns epoch ms.
 */
export function timeFlag(flag: string, v: string | undefined, now = Date.now()): number | undefined {
  if (v === undefined) return undefined;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s);
  const rel = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(s);
  if (rel) return Math.round(now - Number(rel[1]) * (UNIT_MS[rel[2] as string] as number));
  const t = Date.parse(s);
  if (Number.isFinite(t)) return t;
  throw new UsageError(`${flag} must be epoch ms, an ISO date (2025-03-22T08:00:00Z) or a duration ago (30s, 15m, 2h, 7d), got ${JSON.stringify(v)}`);
}

// ---- human formats ---------------------------------------------------------------------------

/** `2025-03-22 08:00:12` (UTC), as seed 000's LOADED_AT column. */
export function fmtTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/** Durations: two significant digits under 1 ms (0.04 ms), one decimal under 10 s, else seconds. */
export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1) return `${Number(ms.toPrecision(2))} ms`;
  if (ms < 10_000) return `${(Math.round(ms * 10) / 10).toString()} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** GPU ids as seed 000 shows them: `GPU 4-7`, `GPU 0,2`, `GPU 1`; none → `-`. */
export function fmtGpus(ids: readonly string[] | null | undefined): string {
  if (!ids || ids.length === 0) return '-';
  if (!ids.every((g) => /^\d+$/.test(g))) return `GPU ${ids.join(',')}`;
  const ns = [...new Set(ids.map(Number))].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < ns.length;) {
    let j = i;
    while (j + 1 < ns.length && (ns[j + 1] as number) === (ns[j] as number) + 1) j++;
    parts.push(j > i ? `${ns[i]}-${ns[j]}` : `${ns[i]}`);
    i = j + 1;
  }
  return `GPU ${parts.join(',')}`;
}

/** Route weights as `v1 95%, v2 5%` (zero weights left out). */
export function fmtWeights(w: Record<string, number> | null | undefined): string {
  if (!w) return '-';
  const parts = Object.entries(w)
    .filter(([, x]) => x > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([id, x]) => `${id} ${fmtPct(x)}`);
  return parts.length ? parts.join(', ') : '-';
}

export function fmtPct(x: number | null | undefined): string {
  if (x === null || x === undefined) return '-';
  const p = x * 100;
  return `${Number.isInteger(p) ? p : Number(p.toPrecision(3))}%`;
}

export function out(s: string): void {
  process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
}

export function err(s: string): void {
  process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);
}
