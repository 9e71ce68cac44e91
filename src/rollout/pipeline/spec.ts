// deployment.yaml pipelines: parse and validate (every problem at once, each with its line and
// path), substitute variables, and compile into the plan the runner executes.
import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument } from 'yaml';
import { ConfigError } from '../../errors.js';
import { Issues, STEP_KINDS, shape } from './shape.js';
import type { RawStep, Shape, StepKind } from './shape.js';
import { PIPELINE_DEFAULTS, WAIT_CONDITIONS } from './defaults.js';
import type { WaitCondition } from './defaults.js';
import { TriggerError, parseTrigger } from './trigger.js';
import type { Trigger } from './trigger.js';
import { WordError, commandArgv, expandString, parseDuration } from './words.js';
import type { Lookup } from './words.js';

/** A command after variable substitution; `text` is as written in the file. */
export interface Command {
  text: string;
  argv: string[];
  line: number | undefined;
  /** on_failure's own `timeout:`; run steps keep theirs on the step; else the run default. */
  timeoutMs?: number;
}
export type Step =
  | { kind: 'run'; command: Command; timeoutMs: number; line: number | undefined }
  | { kind: 'wait_for'; condition: WaitCondition; version: string | undefined; timeoutMs: number; line: number | undefined }
  /** With `until`, the monitor ends when that condition holds, and `forMs` bounds the wait. */
  | { kind: 'monitor'; forMs: number; everyMs: number; until: WaitCondition | undefined; version: string | undefined; line: number | undefined };
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
    ctx.issues.add(
      p,
      kinds.length === 0
        ? 'a step needs one of run, wait_for, monitor or on_failure'
        : `a step has exactly one kind; this one has ${kinds.join(' and ')} (write them as separate "- " items)`,
    );
    return undefined;
  }
  const kind = kinds[0] as StepKind;
  const allowed: Record<StepKind, string[]> = {
    run: ['timeout'],
    wait_for: ['timeout', 'version'],
    monitor: ['for', 'every', 'until', 'version'],
    on_failure: ['timeout'],
  };
  for (const k of ['timeout', 'for', 'every', 'until', 'version'] as const) {
    if (s[k] !== undefined && !allowed[kind].includes(k))
      ctx.issues.add([...p, k], `"${k}" does not apply to a ${kind} step (it takes ${allowed[kind].join(', ')})`);
  }
  const line = ctx.issues.line(p);
  const ms = (v: string | undefined, d: number) => (v === undefined ? d : (parseDuration(v) ?? d));
  const condition = (key: 'wait_for' | 'until', cond: string) => {
    if (!(WAIT_CONDITIONS as readonly string[]).includes(cond))
      ctx.issues.add([...p, key], `unknown condition "${cond}"; expected one of ${WAIT_CONDITIONS.join(', ')}`);
    return cond as WaitCondition;
  };
  switch (kind) {
    case 'run':
      return { kind, command: command(ctx, [...p, 'run'], s.run as string), timeoutMs: ms(s.timeout, PIPELINE_DEFAULTS.runTimeoutMs), line };
    case 'on_failure':
      return { ...command(ctx, [...p, 'on_failure'], s.on_failure as string), timeoutMs: ms(s.timeout, PIPELINE_DEFAULTS.runTimeoutMs) };
    case 'wait_for': {
      const version = s.version === undefined ? undefined : str(ctx, [...p, 'version'], s.version);
      return { kind, condition: condition('wait_for', s.wait_for as string), version, timeoutMs: ms(s.timeout, PIPELINE_DEFAULTS.waitTimeoutMs), line };
    }
    case 'monitor': {
      if (s.monitor !== 'health_gates') ctx.issues.add([...p, 'monitor'], `unknown monitor "${s.monitor}"; expected health_gates`);
      if (!hasTrigger) ctx.issues.add([...p, 'monitor'], 'monitor: health_gates evaluates rollback.trigger, and this file has none');
      const until = s.until === undefined ? undefined : condition('until', s.until);
      const forMs = ms(s.for, until === undefined ? PIPELINE_DEFAULTS.monitorForMs : PIPELINE_DEFAULTS.monitorUntilMs);
      const everyMs = ms(s.every, PIPELINE_DEFAULTS.monitorEveryMs);
      if (everyMs > forMs) ctx.issues.add([...p, 'every'], `every (${s.every}) is longer than for (${s.for ?? 'default'}): the gates would never be checked`);
      if (s.version !== undefined && until === undefined)
        ctx.issues.add([...p, 'version'], '"version" of a monitor step names the version its until: condition waits for; this step has no until');
      const version = s.version === undefined ? undefined : str(ctx, [...p, 'version'], s.version);
      return { kind, forMs, everyMs, until, version, line };
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
    if (prev !== undefined && st.name !== '') iss.add([...sp, 'name'], `duplicate stage name "${st.name}" (also stages[${prev}])`);
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
    if (steps.length === 0 && st.steps.every((x) => x !== undefined))
      iss.add([...sp, 'steps'], 'a stage needs at least one run, wait_for or monitor step (on_failure only runs when one of them fails)');
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
  const fail = () =>
    new ConfigError(
      [...issues.list].sort((a, b) => (a.line ?? 0) - (b.line ?? 0)),
      source,
    );
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
