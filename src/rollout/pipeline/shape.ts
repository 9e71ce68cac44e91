// The structure of a pipeline file: zod schemas applied piece by piece (file, pipeline, each
// stage, each step, rollback) so one bad step or stage does not hide the others' problems, durations
// no timer keeps refused with the rest, and every problem located by its path and its line in the YAML.
import { isNode } from 'yaml';
import type { Document, LineCounter } from 'yaml';
import { z } from 'zod';
import { formatPath } from '../../config/issues.js';
import type { ConfigIssue } from '../../errors.js';
import { DEFAULTS } from '../../defaults.js';
import { formatDuration, parseDuration } from './words.js';

export const STEP_KINDS = ['run', 'wait_for', 'monitor', 'on_failure'] as const;
export type StepKind = (typeof STEP_KINDS)[number];
const STEP_KEYS = [...STEP_KINDS, 'timeout', 'for', 'every', 'until', 'version'];

/** The longest a timer waits: a pipeline's durations past it (or under 1 ms) no timer keeps. */
const TIMER_MAX_MS = DEFAULTS.durations.timerMaxMs;

/** Why `text` cannot be a pipeline's duration (a step's, a stage's or the run's timer), or undefined when it can. */
function durationProblem(text: string): string | undefined {
  const ms = parseDuration(text);
  if (ms === undefined) return 'expected a duration such as 500ms, 30s, 5m or 1h';
  // `0.4ms` is read as a duration and rounds to 0: the step would time out at once
  if (ms < 1) return 'a duration under 1ms rounds to 0: give at least 1ms';
  // past 2^31 - 1 ms Node's timer fires after 1 ms: the step, stage or run would time out at once
  if (ms > TIMER_MAX_MS) return `${formatDuration(ms)} is longer than a timer can wait: at most ${TIMER_MAX_MS} ms (~24.8 days)`;
  return undefined;
}

const duration = z.string().refine((s) => durationProblem(s) === undefined, { error: (iss) => durationProblem(iss.input as string) });
const text = z.string().trim().min(1, { message: 'must not be empty' });

const stepSchema = z
  .object({
    run: text.optional(),
    wait_for: text.optional(),
    monitor: text.optional(),
    on_failure: text.optional(),
    timeout: duration.optional(),
    for: duration.optional(),
    every: duration.optional(),
    until: text.optional(),
    version: text.optional(),
  })
  .strict();
// validated piece by piece (file, pipeline, each stage, each step, rollback) so that one bad step
// does not hide the problems of the others: every problem is reported at once
const stageSchema = z
  .object({ name: text, timeout: duration.optional(), steps: z.array(z.unknown()).min(1, { message: 'a stage needs at least one step' }) })
  .strict();
const pipelineSchema = z
  .object({
    name: text.optional(),
    model: text.optional(),
    timeout: duration.optional(),
    stages: z.array(z.unknown()).min(1, { message: 'a pipeline needs at least one stage' }),
  })
  .strict();
const rollbackSchema = z.object({ trigger: text, action: text.optional(), notify: text.optional() }).strict();
const fileSchema = z.object({ pipeline: z.unknown().optional(), rollback: z.unknown().optional() }).strict();
export type RawStep = z.infer<typeof stepSchema>;
type RawRollback = z.infer<typeof rollbackSchema>;
interface RawStage {
  name: string;
  timeout: string | undefined;
  /** undefined where a step is invalid (already reported). */
  steps: (RawStep | undefined)[];
}
export interface Shape {
  pipeline: Omit<z.infer<typeof pipelineSchema>, 'stages'> & { stages: (RawStage | undefined)[] };
  /** undefined when absent or invalid; `hasRollback` tells which. */
  rollback: RawRollback | undefined;
  hasRollback: boolean;
  /** rollback.trigger when it is a string, checked even when the rest of rollback is invalid. */
  triggerText: string | undefined;
}

function lineOf(doc: Document, lc: LineCounter, p: readonly PropertyKey[]): number | undefined {
  for (let n = p.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(p.slice(0, n) as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}

export class Issues {
  readonly list: ConfigIssue[] = [];
  constructor(
    private readonly doc: Document,
    private readonly lc: LineCounter,
  ) {}
  line(p: readonly PropertyKey[]): number | undefined {
    return lineOf(this.doc, this.lc, p);
  }
  add(p: readonly PropertyKey[], message: string, lineAt: readonly PropertyKey[] = p): void {
    const line = this.line(lineAt);
    this.list.push(line === undefined ? { path: formatPath(p), message } : { path: formatPath(p), message, line });
  }
}

/** Turn zod's issues into ours; `step` is the raw step when the value is one (for the kind message). */
function schemaIssues(err: z.ZodError, prefix: readonly PropertyKey[], out: Issues, isStepValue: boolean, step?: Record<string, unknown>): void {
  for (const iss of err.issues) {
    const p = [...prefix, ...iss.path];
    if (iss.code === 'unrecognized_keys') {
      for (const k of iss.keys) {
        let message = `unknown key "${k}"`;
        let at = [...p, k];
        if (step && iss.path.length === 0) {
          const hasKind = STEP_KINDS.some((kind) => kind in step);
          message = hasKind
            ? `unknown key "${k}" in a step; expected ${STEP_KEYS.join(', ')}`
            : `unknown step kind "${k}"; expected run, wait_for, monitor or on_failure`;
          // a mistyped kind is a problem of the step; a stray key beside a kind, of that key
          if (!hasKind) at = p;
        } else if (prefix.length === 0 && iss.path.length === 0) message = `unknown key "${k}"; expected pipeline, rollback`;
        out.add(at, message, [...p, k]);
      }
      continue;
    }
    let message = iss.message;
    if (iss.code === 'invalid_type') {
      const got =
        iss.input === null
          ? 'null'
          : Array.isArray(iss.input)
            ? 'a list'
            : typeof iss.input === 'object'
              ? 'a mapping'
              : `${typeof iss.input} ${JSON.stringify(iss.input)}`;
      const want =
        iss.expected === 'object'
          ? isStepValue && iss.path.length === 0
            ? 'a step (a mapping such as "run: …")'
            : 'a mapping'
          : iss.expected === 'array'
            ? 'a list'
            : `a ${iss.expected}`;
      message = iss.input === undefined ? 'required' : `expected ${want}, got ${got}`;
    }
    out.add(p, message);
  }
}

function parseAt<T>(schema: z.ZodType<T>, value: unknown, prefix: readonly PropertyKey[], out: Issues, isStep = false): T | undefined {
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data;
  const step = isStep && value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  schemaIssues(r.error, prefix, out, isStep, step);
  return undefined;
}

// What the salvages below keep of a value already reported: a non-empty text (trimmed), a duration a timer keeps.
const usableText = (x: unknown): string | undefined => (typeof x === 'string' && x.trim() !== '' ? x.trim() : undefined);
const usableDuration = (x: unknown): string | undefined => (typeof x === 'string' && durationProblem(x) === undefined ? x : undefined);

/** After an invalid pipeline: section (already reported), keep what is usable so its stages are checked too. */
function salvage(v: unknown): z.infer<typeof pipelineSchema> | undefined {
  if (v === null || typeof v !== 'object' || !Array.isArray((v as { stages?: unknown }).stages)) return undefined;
  const o = v as Record<string, unknown>;
  return { name: usableText(o.name), model: usableText(o.model), timeout: usableDuration(usableText(o.timeout)), stages: o.stages as unknown[] };
}

/**
 * After an invalid step (already reported), keep what compiling it checks further (its command's
 * syntax and variables, its condition, the keys its kind does not take) when its kind is usable:
 * a bad duration or a stray key must not hide the step's other problems. Durations are kept as
 * written, so a key its kind does not take is still named; unknown keys and values of the wrong
 * type are left out (reported already).
 */
function salvageStep(v: unknown): RawStep | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const kinds = STEP_KINDS.filter((k) => o[k] !== undefined);
  // no kind, or one that is not a usable text: the step is that problem alone (compiling it would add a misleading "needs one of")
  if (kinds.length === 0 || kinds.some((k) => usableText(o[k]) === undefined)) return undefined;
  const step: RawStep = {};
  for (const k of [...STEP_KINDS, 'until', 'version'] as const) step[k] = usableText(o[k]);
  for (const k of ['timeout', 'for', 'every'] as const) if (typeof o[k] === 'string') step[k] = o[k];
  return step;
}

/** After an invalid stage (already reported), keep its steps so that their problems are reported too. */
function salvageStage(v: unknown): z.infer<typeof stageSchema> | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (!Array.isArray(o.steps) || o.steps.length === 0) return undefined;
  // (a stage whose name is unusable is named '': the file is refused whatever its stages' names)
  return { name: usableText(o.name) ?? '', timeout: usableDuration(o.timeout), steps: o.steps as unknown[] };
}

/** The file's structure, piece by piece; undefined when the top level itself is unusable. */
export function shape(raw: unknown, out: Issues): Shape | undefined {
  // unknown top-level keys are reported, and the rest is still checked
  parseAt(fileSchema, raw, [], out);
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const top = raw as { pipeline?: unknown; rollback?: unknown };
  if (top.pipeline === undefined) {
    out.add(['pipeline'], 'required: the file needs a pipeline: section with stages');
    return undefined;
  }
  const hasRollback = top.rollback !== undefined && top.rollback !== null;
  const rollback = hasRollback ? parseAt(rollbackSchema, top.rollback, ['rollback'], out) : undefined;
  const head = parseAt(pipelineSchema, top.pipeline, ['pipeline'], out) ?? salvage(top.pipeline);
  if (!head) return undefined;
  const stages = head.stages.map((st, si): RawStage | undefined => {
    const sp = ['pipeline', 'stages', si];
    const sh = parseAt(stageSchema, st, sp, out) ?? salvageStage(st);
    if (!sh) return undefined;
    return { name: sh.name, timeout: sh.timeout, steps: sh.steps.map((x, i) => parseAt(stepSchema, x, [...sp, 'steps', i], out, true) ?? salvageStep(x)) };
  });
  const t: unknown = hasRollback ? (top.rollback as { trigger?: unknown }).trigger : undefined;
  return { pipeline: { ...head, stages }, rollback, hasRollback, triggerText: typeof t === 'string' ? t : undefined };
}
