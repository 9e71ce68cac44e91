// deployment.yaml pipelines: parse and validate (every problem at once, each with its line and
// path), substitute variables, and compile into the plan the runner executes.
import { readFileSync } from 'node:fs';
import { LineCounter, isNode, parseDocument } from 'yaml';
import type { Document } from 'yaml';
import { z } from 'zod';
import { formatPath } from '../../config/load.js';
import { ConfigError } from '../../errors.js';
import type { ConfigIssue } from '../../errors.js';
import { PIPELINE_DEFAULTS, WAIT_CONDITIONS } from './defaults.js';
import type { WaitCondition } from './defaults.js';
import { TriggerError, parseTrigger } from './trigger.js';
import type { Trigger } from './trigger.js';
import { WordError, commandArgv, expandString, parseDuration } from './words.js';
import type { Lookup } from './words.js';

const STEP_KINDS = ['run', 'wait_for', 'monitor', 'on_failure'] as const;
type StepKind = (typeof STEP_KINDS)[number];
const STEP_KEYS = [...STEP_KINDS, 'timeout', 'for', 'every', 'version'];

const duration = z.string().refine((s) => parseDuration(s) !== undefined, { message: 'expected a duration such as 500ms, 30s, 5m or 1h' });
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
    version: text.optional(),
  })
  .strict();
// validated piece by piece (file, pipeline, each stage, each step, rollback) so that one bad step
// does not hide the problems of the others: every problem is reported at once
const stageSchema = z.object({ name: text, timeout: duration.optional(), steps: z.array(z.unknown()).min(1, { message: 'a stage needs at least one step' }) }).strict();
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
type RawStep = z.infer<typeof stepSchema>;
type RawRollback = z.infer<typeof rollbackSchema>;
interface RawStage {
  name: string;
  timeout: string | undefined;
  /** undefined where a step is invalid (already reported). */
  steps: (RawStep | undefined)[];
}
interface Shape {
  pipeline: Omit<z.infer<typeof pipelineSchema>, 'stages'> & { stages: (RawStage | undefined)[] };
  /** undefined when absent or invalid; `hasRollback` tells which. */
  rollback: RawRollback | undefined;
  hasRollback: boolean;
  /** rollback.trigger when it is a string, checked even when the rest of rollback is invalid. */
  triggerText: string | undefined;
}

/** A command after variable substitution; `text` is as written in the file. */
export interface Command {
  text: string;
  argv: string[];
  line: number | undefined;
}
export type Step =
  | { kind: 'run'; command: Command; timeoutMs: number; line: number | undefined }
  | { kind: 'wait_for'; condition: WaitCondition; version: string | undefined; timeoutMs: number; line: number | undefined }
  | { kind: 'monitor'; forMs: number; everyMs: number; line: number | undefined };
export interface Stage {
  name: string;
  steps: Step[];
  /** Commands run, in order, when a step of this stage fails. */
  onFailure: Command[];
  /** Bound on the whole stage (its steps' own timeouts still apply). */
  timeoutMs: number | undefined;
}
export interface Pipeline {
  source: string;
  name: string | undefined;
  model: string | undefined;
  timeoutMs: number;
  stages: Stage[];
  rollback: { trigger: Trigger; triggerText: string; action: Command | undefined; notify: string | undefined } | undefined;
  /** Every variable the file uses, where, and whether it has a value. */
  variables: { name: string; lines: number[]; set: boolean }[];
}

export interface SpecOptions {
  /** `--var NAME=value`; these win over the environment. */
  vars?: Readonly<Record<string, string>>;
  env?: Readonly<Record<string, string | undefined>>;
  /** false for `pipeline check`: unset variables are listed, not errors. */
  requireVars?: boolean;
}

function lineOf(doc: Document, lc: LineCounter, p: readonly PropertyKey[]): number | undefined {
  for (let n = p.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(p.slice(0, n) as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}

class Issues {
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
          message = hasKind ? `unknown key "${k}" in a step; expected ${STEP_KEYS.join(', ')}` : `unknown step kind "${k}"; expected run, wait_for, monitor or on_failure`;
          // a mistyped kind is a problem of the step; a stray key beside a kind, of that key
          if (!hasKind) at = p;
        } else if (prefix.length === 0 && iss.path.length === 0) message = `unknown key "${k}"; expected pipeline, rollback`;
        out.add(at, message, [...p, k]);
      }
      continue;
    }
    let message = iss.message;
    if (iss.code === 'invalid_type') {
      const got = iss.input === null ? 'null' : Array.isArray(iss.input) ? 'a list' : typeof iss.input === 'object' ? 'a mapping' : `${typeof iss.input} ${JSON.stringify(iss.input)}`;
      const want = iss.expected === 'object' ? (isStepValue && iss.path.length === 0 ? 'a step (a mapping such as "run: …")' : 'a mapping') : iss.expected === 'array' ? 'a list' : `a ${iss.expected}`;
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

/** After an invalid pipeline: section (already reported), keep what is usable so its stages are checked too. */
function salvage(v: unknown): z.infer<typeof pipelineSchema> | undefined {
  if (v === null || typeof v !== 'object' || !Array.isArray((v as { stages?: unknown }).stages)) return undefined;
  const o = v as Record<string, unknown>;
  const s = (x: unknown) => (typeof x === 'string' && x.trim() !== '' ? x.trim() : undefined);
  const timeout = s(o.timeout);
  return { name: s(o.name), model: s(o.model), timeout: timeout !== undefined && parseDuration(timeout) !== undefined ? timeout : undefined, stages: o.stages as unknown[] };
}

/** The file's structure, piece by piece; undefined when the top level itself is unusable. */
function shape(raw: unknown, out: Issues): Shape | undefined {
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
    const sh = parseAt(stageSchema, st, sp, out);
    if (!sh) return undefined;
    return { name: sh.name, timeout: sh.timeout, steps: sh.steps.map((x, i) => parseAt(stepSchema, x, [...sp, 'steps', i], out, true)) };
  });
  const t: unknown = hasRollback ? (top.rollback as { trigger?: unknown }).trigger : undefined;
  return { pipeline: { ...head, stages }, rollback, hasRollback, triggerText: typeof t === 'string' ? t : undefined };
}

interface Ctx {
  issues: Issues;
  lookup: Lookup;
  requireVars: boolean;
  used: Map<string, Set<number>>;
}

function noteMissing(ctx: Ctx, p: readonly PropertyKey[], missing: string[]): void {
  const line = ctx.issues.line(p);
  for (const name of missing) {
    const lines = ctx.used.get(name) ?? new Set<number>();
    if (line !== undefined) lines.add(line);
    ctx.used.set(name, lines);
    if (ctx.requireVars) ctx.issues.add(p, `variable $${name} is not set (pass --var ${name}=… or set it in the environment)`);
  }
}

/** Expand a plain string value (not a command), noting every variable it uses. */
function str(ctx: Ctx, p: readonly PropertyKey[], src: string): string {
  const line = ctx.issues.line(p);
  try {
    expandString(src, (n) => {
      const lines = ctx.used.get(n) ?? new Set<number>();
      if (line !== undefined) lines.add(line);
      ctx.used.set(n, lines);
      return '';
    });
    const r = expandString(src, ctx.lookup);
    noteMissing(ctx, p, r.missing);
    return r.value;
  } catch (err) {
    if (!(err instanceof WordError)) throw err;
    ctx.issues.add(p, `column ${err.at + 1}: ${err.message}`);
    return src;
  }
}

function command(ctx: Ctx, p: readonly PropertyKey[], src: string): Command {
  const line = ctx.issues.line(p);
  try {
    // collect every name the text uses (set or not) for the variables list
    commandArgv(src, (n) => {
      const lines = ctx.used.get(n) ?? new Set<number>();
      if (line !== undefined) lines.add(line);
      ctx.used.set(n, lines);
      return '';
    });
    const { argv, missing } = commandArgv(src, ctx.lookup);
    noteMissing(ctx, p, missing);
    return { text: src, argv, line };
  } catch (err) {
    if (!(err instanceof WordError)) throw err;
    ctx.issues.add(p, `column ${err.at + 1}: ${err.message}`);
    return { text: src, argv: [], line };
  }
}

function step(ctx: Ctx, p: readonly PropertyKey[], s: RawStep, hasTrigger: boolean): Step | Command | undefined {
  const kinds = STEP_KINDS.filter((k) => s[k] !== undefined);
  if (kinds.length !== 1) {
    ctx.issues.add(p, kinds.length === 0 ? 'a step needs one of run, wait_for, monitor or on_failure' : `a step has exactly one kind; this one has ${kinds.join(' and ')} (write them as separate "- " items)`);
    return undefined;
  }
  const kind = kinds[0] as StepKind;
  const allowed: Record<StepKind, string[]> = { run: ['timeout'], wait_for: ['timeout', 'version'], monitor: ['for', 'every'], on_failure: ['timeout'] };
  for (const k of ['timeout', 'for', 'every', 'version'] as const) {
    if (s[k] !== undefined && !allowed[kind].includes(k)) ctx.issues.add([...p, k], `"${k}" does not apply to a ${kind} step (it takes ${allowed[kind].join(', ')})`);
  }
  const line = ctx.issues.line(p);
  const ms = (v: string | undefined, d: number) => (v === undefined ? d : (parseDuration(v) ?? d));
  switch (kind) {
    case 'run':
      return { kind, command: command(ctx, [...p, 'run'], s.run as string), timeoutMs: ms(s.timeout, PIPELINE_DEFAULTS.runTimeoutMs), line };
    case 'on_failure':
      return command(ctx, [...p, 'on_failure'], s.on_failure as string);
    case 'wait_for': {
      const cond = s.wait_for as string;
      if (!(WAIT_CONDITIONS as readonly string[]).includes(cond)) ctx.issues.add([...p, 'wait_for'], `unknown condition "${cond}"; expected ${WAIT_CONDITIONS.join(' or ')}`);
      const version = s.version === undefined ? undefined : str(ctx, [...p, 'version'], s.version);
      return { kind, condition: cond as WaitCondition, version, timeoutMs: ms(s.timeout, PIPELINE_DEFAULTS.waitTimeoutMs), line };
    }
    case 'monitor': {
      if (s.monitor !== 'health_gates') ctx.issues.add([...p, 'monitor'], `unknown monitor "${s.monitor}"; expected health_gates`);
      if (!hasTrigger) ctx.issues.add([...p, 'monitor'], 'monitor: health_gates evaluates rollback.trigger, and this file has none');
      const forMs = ms(s.for, PIPELINE_DEFAULTS.monitorForMs);
      const everyMs = ms(s.every, PIPELINE_DEFAULTS.monitorEveryMs);
      if (everyMs > forMs) ctx.issues.add([...p, 'every'], `every (${s.every}) is longer than for (${s.for ?? 'default'}): the gates would never be checked`);
      return { kind, forMs, everyMs, line };
    }
  }
}

function compile(raw: Shape, ctx: Ctx, source: string): Pipeline {
  const iss = ctx.issues;
  let rollback: Pipeline['rollback'];
  let trigger: Trigger | undefined;
  const triggerText = raw.triggerText === undefined ? undefined : str(ctx, ['rollback', 'trigger'], raw.triggerText);
  if (triggerText !== undefined) {
    try {
      trigger = parseTrigger(triggerText);
    } catch (err) {
      if (!(err instanceof TriggerError)) throw err;
      iss.add(['rollback', 'trigger'], err.message);
    }
  }
  if (raw.rollback) {
    const action = raw.rollback.action === undefined ? undefined : command(ctx, ['rollback', 'action'], raw.rollback.action);
    const notify = raw.rollback.notify === undefined ? undefined : str(ctx, ['rollback', 'notify'], raw.rollback.notify);
    if (trigger) rollback = { trigger, triggerText: triggerText ?? raw.rollback.trigger, action, notify };
  }
  const model = raw.pipeline.model === undefined ? undefined : str(ctx, ['pipeline', 'model'], raw.pipeline.model);
  const names = new Map<string, number>();
  const stages: Stage[] = raw.pipeline.stages.flatMap((st, si) => {
    if (!st) return [];
    const sp = ['pipeline', 'stages', si];
    const prev = names.get(st.name);
    if (prev !== undefined) iss.add([...sp, 'name'], `duplicate stage name "${st.name}" (also stages[${prev}])`);
    names.set(st.name, si);
    const steps: Step[] = [];
    const onFailure: Command[] = [];
    st.steps.forEach((s, i) => {
      if (!s) return;
      const r = step(ctx, [...sp, 'steps', i], s, raw.hasRollback);
      if (r === undefined) return;
      if ('kind' in r) steps.push(r);
      else onFailure.push(r);
    });
    if (steps.length === 0 && st.steps.every((x) => x !== undefined)) iss.add([...sp, 'steps'], 'a stage needs at least one run, wait_for or monitor step (on_failure only runs when one of them fails)');
    return [{ name: st.name, steps, onFailure, timeoutMs: st.timeout === undefined ? undefined : parseDuration(st.timeout) }];
  });
  const variables = [...ctx.used.entries()]
    .map(([name, lines]) => ({ name, lines: [...lines].sort((a, b) => a - b), set: ctx.lookup(name) !== undefined }))
    .sort((a, b) => a.name.localeCompare(b.name));
  return {
    source,
    name: raw.pipeline.name,
    model,
    timeoutMs: raw.pipeline.timeout === undefined ? PIPELINE_DEFAULTS.totalTimeoutMs : (parseDuration(raw.pipeline.timeout) as number),
    stages,
    rollback,
    variables,
  };
}

/** Parse and validate pipeline YAML text. Throws ConfigError listing every problem with its line. */
export function parsePipelineText(src: string, source = '<pipeline>', opts: SpecOptions = {}): Pipeline {
  const lc = new LineCounter();
  const doc = parseDocument(src, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => ({ path: '', message: e.message.split('\n')[0] ?? e.message, line: lc.linePos(e.pos[0]).line })),
      source,
    );
  }
  const raw: unknown = doc.toJS();
  const issues = new Issues(doc, lc);
  if (raw === null || raw === undefined) throw new ConfigError([{ path: '', message: 'the file is empty; expected a pipeline: section' }], source);
  const sh = shape(raw, issues);
  const fail = () => new ConfigError([...issues.list].sort((a, b) => (a.line ?? 0) - (b.line ?? 0)), source);
  if (!sh) throw fail();
  const vars = opts.vars ?? {};
  const env = opts.env ?? process.env;
  const lookup: Lookup = (n) => (Object.hasOwn(vars, n) ? vars[n] : env[n]);
  const ctx: Ctx = { issues, lookup, requireVars: opts.requireVars ?? true, used: new Map() };
  const pipeline = compile(sh, ctx, source);
  if (issues.list.length > 0) throw fail();
  return pipeline;
}

export function loadPipelineFile(file: string, opts: SpecOptions = {}): Pipeline {
  let src: string;
  try {
    src = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError([{ path: '', message: code === 'ENOENT' ? 'file not found' : `cannot read: ${(err as Error).message}` }], file);
  }
  return parsePipelineText(src, file, opts);
}
